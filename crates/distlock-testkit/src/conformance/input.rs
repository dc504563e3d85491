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
    if client.capabilities().semaphore {
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

/// Names are compared byte for byte: names that differ only in a trailing space, in case
/// or in an accent are distinct locks, each held at once by a client of its own, and
/// `status` of each shows its own holder (a database collation that pads, folds case or
/// strips accents would merge them).
///
/// # Examples
///
/// ```
/// # distlock_testkit::block_on(async {
/// distlock_testkit::conformance::names_differing_in_a_space_case_or_accent_are_distinct(&distlock_testkit::Target::new("memory://doc")).await;
/// # });
/// ```
pub async fn names_differing_in_a_space_case_or_accent_are_distinct(target: &Target) {
    let base = unique("names");
    let pairs = [
        (format!("{base}/pad"), format!("{base}/pad ")),
        (format!("{base}/case"), format!("{base}/CASE")),
        (format!("{base}/e"), format!("{base}/é")),
    ];
    for (one, other) in pairs {
        let (a, b) = (target.client().await, target.client().await);
        let first = a.mutex(&one).try_lock().await.unwrap();
        let first = first.unwrap_or_else(|| panic!("`{one}` is free"));
        let second = b.mutex(&other).try_lock().await.unwrap();
        let second = second.unwrap_or_else(|| panic!("`{other}` is not `{one}`"));
        for (name, token) in [
            (&one, first.fencing_token()),
            (&other, second.fencing_token()),
        ] {
            let states = a.status(Some(name)).await.unwrap();
            let shown: Vec<u64> = states
                .iter()
                .filter(|s| &s.name == name)
                .flat_map(|s| s.holders.iter().map(|h| h.fencing_token))
                .collect();
            assert_eq!(shown, [token], "status of `{name}`: {states:?}");
        }
        first.release().await.unwrap();
        second.release().await.unwrap();
    }
}
