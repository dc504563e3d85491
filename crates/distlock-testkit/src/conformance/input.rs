//! Bad input: every kind gets a clear `InvalidInput`, nothing panics, nothing is held.

use std::time::Duration;

use distlock::{ErrorKind, LockOptions, MAX_NAME_LEN};

use super::{Target, expect_kind, unique};

/// Empty, oversized and control-character names, zero and huge TTLs, zero and excess
/// permits, a semaphore without permits, mixed lock kinds on one name, and renewal slower
/// than the lease are all refused with `InvalidInput`, and leave the lock free.
///
/// # Examples
///
/// ```
/// # distlock_testkit::block_on(async {
/// distlock_testkit::conformance::bad_input_is_rejected(&distlock_testkit::Target::new("memory://doc")).await;
/// # });
/// ```
pub async fn bad_input_is_rejected(target: &Target) {
    let client = target.client().await;
    let invalid = ErrorKind::InvalidInput;
    expect_kind(client.mutex("").lock().await, invalid, "empty name");
    expect_kind(
        client.mutex("x".repeat(MAX_NAME_LEN + 1)).try_lock().await,
        invalid,
        "long name",
    );
    expect_kind(client.mutex("a\0b").lock().await, invalid, "NUL in name");
    expect_kind(
        client.mutex("a\nb").lock().await,
        invalid,
        "newline in name",
    );
    expect_kind(
        client.status(Some("")).await,
        invalid,
        "status of an empty name",
    );

    let name = unique("input");
    let mutex = client.mutex(&name);
    expect_kind(
        mutex
            .lock_with(&LockOptions::new().ttl(Duration::ZERO))
            .await,
        invalid,
        "zero ttl",
    );
    expect_kind(
        mutex
            .lock_with(&LockOptions::new().ttl(Duration::from_secs(400 * 86_400)))
            .await,
        invalid,
        "absurd ttl",
    );
    expect_kind(
        mutex
            .lock_with(
                &LockOptions::new()
                    .ttl(Duration::from_secs(1))
                    .renew_every(Duration::from_secs(2)),
            )
            .await,
        invalid,
        "renewal slower than the lease",
    );
    if client.backend().capabilities().semaphore {
        expect_kind(
            client.semaphore(&name, 0).acquire().await,
            invalid,
            "zero-permit semaphore",
        );
        expect_kind(
            client.semaphore(&name, 2).acquire_many(0).await,
            invalid,
            "zero permits",
        );
        expect_kind(
            client.semaphore(&name, 2).acquire_many(3).await,
            invalid,
            "excess permits",
        );
        let sem_name = unique("input-sem");
        let permit = client.semaphore(&sem_name, 2).acquire().await.unwrap();
        expect_kind(
            client.mutex(&sem_name).try_lock().await,
            invalid,
            "mutex on a semaphore",
        );
        expect_kind(
            client.semaphore(&sem_name, 5).try_acquire().await,
            invalid,
            "other limit",
        );
        permit.release().await.unwrap();
    }
    let guard = mutex.try_lock().await.unwrap();
    assert!(guard.is_some(), "rejected requests left nothing held");
}
