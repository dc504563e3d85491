//! Read/write locks.

use std::time::Duration;

use distlock::ErrorKind;

use super::{Target, expect_kind, unique, wait_for_waiters};

/// Readers hold together; a writer waits for them and then holds alone.
///
/// # Examples
///
/// ```
/// # distlock_testkit::block_on(async {
/// distlock_testkit::conformance::rwlock_readers_share_and_writers_exclude(&distlock_testkit::Target::new("memory://doc")).await;
/// # });
/// ```
pub async fn rwlock_readers_share_and_writers_exclude(target: &Target) {
    let name = unique("rw");
    let a = target.client().await;
    let b = target.client().await;
    if !a.capabilities().rwlock {
        expect_kind(
            a.rwlock(&name).read().await,
            ErrorKind::Unsupported,
            "rwlock",
        );
        return;
    }
    let r1 = a.rwlock(&name).read().await.unwrap();
    let r2 = b
        .rwlock(&name)
        .try_read()
        .await
        .unwrap()
        .expect("readers share");
    assert_ne!(r1.fencing_token(), r2.fencing_token());
    assert!(b.rwlock(&name).try_write().await.unwrap().is_none());
    match b.mutex(&name).try_lock().await {
        Ok(taken) => assert!(taken.is_none(), "a mutex on the name is a writer"),
        // Backends whose mutexes are server locks of another kind (MySQL's session mode)
        // keep a name to one kind and refuse the other.
        Err(err) => assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}"),
    }
    r1.release().await.unwrap();
    assert!(
        b.rwlock(&name).try_write().await.unwrap().is_none(),
        "one reader still holds"
    );
    r2.release().await.unwrap();
    let w = b
        .rwlock(&name)
        .try_write()
        .await
        .unwrap()
        .expect("free after readers left");
    assert!(a.rwlock(&name).try_read().await.unwrap().is_none());
    assert!(a.rwlock(&name).try_write().await.unwrap().is_none());
    w.release().await.unwrap();
}

/// A waiting writer blocks new readers, so readers cannot starve it; it gets the lock
/// when the current readers leave.
///
/// # Examples
///
/// ```
/// # distlock_testkit::block_on(async {
/// distlock_testkit::conformance::rwlock_waiting_writer_blocks_new_readers(&distlock_testkit::Target::new("memory://doc")).await;
/// # });
/// ```
pub async fn rwlock_waiting_writer_blocks_new_readers(target: &Target) {
    let name = unique("rw-starve");
    let a = target.client().await;
    if !a.capabilities().rwlock {
        expect_kind(
            a.rwlock(&name).write().await,
            ErrorKind::Unsupported,
            "rwlock",
        );
        return;
    }
    let reader = a.rwlock(&name).read().await.unwrap();
    let writer = {
        let b = target.client().await;
        let name = name.clone();
        tokio::spawn(async move {
            b.rwlock(&name)
                .write_with(&distlock::LockOptions::new().wait(Duration::from_secs(30)))
                .await
        })
    };
    wait_for_waiters(&a, &name, 1).await;
    let c = target.client().await;
    assert!(
        c.rwlock(&name).try_read().await.unwrap().is_none(),
        "a new reader jumped a waiting writer"
    );
    let reader_token = reader.fencing_token();
    reader.release().await.unwrap();
    let w = tokio::time::timeout(Duration::from_secs(10), writer)
        .await
        .expect("the writer gets the lock")
        .unwrap()
        .unwrap();
    assert!(
        w.fencing_token() > reader_token,
        "the writer's token {} follows the reader's {reader_token}",
        w.fencing_token()
    );
    w.release().await.unwrap();
    assert!(c.rwlock(&name).try_read().await.unwrap().is_some());
}
