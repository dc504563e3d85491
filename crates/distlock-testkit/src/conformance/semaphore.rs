//! Semaphores.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use distlock::{ErrorKind, LockOptions};

use super::{Target, expect_kind, unique};

/// A client of the target, or `None` once a backend without semaphores was shown to refuse
/// them with `Unsupported`.
async fn semaphore_client(target: &Target, name: &str) -> Option<distlock::Client> {
    let client = target.client().await;
    if client.capabilities().semaphore {
        return Some(client);
    }
    expect_kind(
        client.semaphore(name, 2).acquire().await,
        ErrorKind::Unsupported,
        "semaphore",
    );
    None
}

/// Never more than `limit` permits out, counting multi-permit grants, and the limit is
/// reachable by separate grants.
///
/// # Examples
///
/// ```
/// # distlock_testkit::block_on(async {
/// distlock_testkit::conformance::semaphore_never_exceeds_its_permits(&distlock_testkit::Target::new("memory://doc")).await;
/// # });
/// ```
pub async fn semaphore_never_exceeds_its_permits(target: &Target) {
    let name = unique("sem");
    let Some(client) = semaphore_client(target, &name).await else {
        return;
    };
    let sem = client.semaphore(&name, 3);
    let two = sem.acquire_many(2).await.unwrap();
    assert!(sem.try_acquire_many(2).await.unwrap().is_none());
    let one = sem.try_acquire().await.unwrap().expect("one permit left");
    assert!(sem.try_acquire().await.unwrap().is_none());
    two.release().await.unwrap();
    one.release().await.unwrap();

    let inside = Arc::new(AtomicU32::new(0));
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let client = target.client().await;
        let (name, inside) = (name.clone(), inside.clone());
        tasks.push(tokio::spawn(async move {
            let sem = client.semaphore(&name, 3);
            for _ in 0..6 {
                let permit = sem
                    .acquire_with(1, &LockOptions::new().wait(Duration::from_secs(30)))
                    .await
                    .unwrap();
                let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                assert!(now <= 3, "{now} permits out of 3");
                tokio::time::sleep(Duration::from_millis(3)).await;
                inside.fetch_sub(1, Ordering::SeqCst);
                permit.release().await.unwrap();
            }
        }));
    }
    for task in tasks {
        tokio::time::timeout(Duration::from_secs(120), task)
            .await
            .unwrap()
            .unwrap();
    }
}

/// Permits whose holder stopped renewing come back when their lease ends.
///
/// # Examples
///
/// ```
/// # distlock_testkit::block_on(async {
/// distlock_testkit::conformance::semaphore_permits_of_a_crashed_holder_return(&distlock_testkit::Target::new("memory://doc")).await;
/// # });
/// ```
pub async fn semaphore_permits_of_a_crashed_holder_return(target: &Target) {
    let name = unique("sem-crash");
    let Some(client) = semaphore_client(target, &name).await else {
        return;
    };
    let crashed = LockOptions::new()
        .ttl(Duration::from_millis(300))
        .auto_renew(false);
    let sem = client.semaphore(&name, 2);
    let lost = sem.acquire_with(2, &crashed).await.unwrap();
    let other = target.client().await;
    let permit = other
        .semaphore(&name, 2)
        .acquire_with(1, &LockOptions::new().wait(Duration::from_millis(1300)))
        .await
        .expect("permits return within ttl + 1 s");
    assert!(permit.fencing_token() > lost.fencing_token());
}
