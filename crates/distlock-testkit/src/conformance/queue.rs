//! Waiting: cancellation, release on drop, fairness, reentrancy, status.

use std::time::Duration;

use distlock::backend::Liveness;
use distlock::{ErrorKind, Health, LockOptions};

use super::{Target, eventually, expect_kind, unique, wait_for_waiters};

/// Dropping an acquire future — while it waits, or at any moment of its attempt — leaves no
/// queue entry and no grant behind.
///
/// # Examples
///
/// ```
/// # distlock_testkit::block_on(async {
/// distlock_testkit::conformance::cancelled_acquire_leaves_nothing(&distlock_testkit::Target::new("memory://doc")).await;
/// # });
/// ```
pub async fn cancelled_acquire_leaves_nothing(target: &Target) {
    let name = unique("cancel");
    let a = target.client().await;
    let b = target.client().await;
    let held = a.mutex(&name).lock().await.unwrap();
    let waiting = tokio::time::timeout(Duration::from_millis(300), b.mutex(&name).lock()).await;
    assert!(
        waiting.is_err(),
        "the waiter was still waiting when dropped"
    );
    // Shorter than any entry takes to lapse after its waiter went (2 s at the least: the
    // SQL stores' 3 s waiter lease, refreshed every second), so a lapsed entry cannot pass
    // for a cancelled one.
    let cleaned = eventually(Duration::from_millis(1500), || async {
        a.status(Some(&name)).await.unwrap()[0].waiters.is_empty()
    })
    .await;
    assert!(cleaned, "a dropped waiter left its queue entry behind");
    held.release().await.unwrap();

    for round in 0..20u64 {
        let cut = Duration::from_micros(50 + round * 150);
        let attempt = tokio::time::timeout(cut, b.mutex(&name).lock()).await;
        drop(attempt);
        let free = eventually(Duration::from_secs(3), || async {
            match a.mutex(&name).try_lock().await.unwrap() {
                Some(guard) => {
                    guard.release().await.unwrap();
                    true
                }
                None => false,
            }
        })
        .await;
        assert!(
            free,
            "round {round}: an abandoned acquire left a grant behind"
        );
    }
}

/// Dropping a guard releases the grant in the background, promptly.
///
/// # Examples
///
/// ```
/// # distlock_testkit::block_on(async {
/// distlock_testkit::conformance::dropped_guard_is_released(&distlock_testkit::Target::new("memory://doc")).await;
/// # });
/// ```
pub async fn dropped_guard_is_released(target: &Target) {
    let name = unique("drop");
    let a = target.client().await;
    let b = target.client().await;
    drop(a.mutex(&name).lock().await.unwrap());
    let guard = b
        .mutex(&name)
        .lock_timeout(Duration::from_secs(2))
        .await
        .expect("a dropped guard frees the lock well before its 30 s ttl");
    guard.release().await.unwrap();
}

/// With `fair`, waiters are granted in the order they arrived.
///
/// # Examples
///
/// ```
/// # distlock_testkit::block_on(async {
/// distlock_testkit::conformance::fair_mode_grants_in_arrival_order(&distlock_testkit::Target::new("memory://doc")).await;
/// # });
/// ```
pub async fn fair_mode_grants_in_arrival_order(target: &Target) {
    let name = unique("fair");
    let observer = target.client().await;
    if !observer.capabilities().fair {
        let fair = LockOptions::new().fair(true);
        expect_kind(
            observer.mutex(&name).lock_with(&fair).await,
            ErrorKind::Unsupported,
            "fair",
        );
        return;
    }
    let fair = LockOptions::new().fair(true).wait(Duration::from_secs(30));
    let held = observer.mutex(&name).lock_with(&fair).await.unwrap();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let mut tasks = Vec::new();
    for i in 0..5usize {
        let client = target.client().await;
        let (lock_name, tx, fair) = (name.clone(), tx.clone(), fair.clone());
        tasks.push(tokio::spawn(async move {
            let guard = client.mutex(&lock_name).lock_with(&fair).await.unwrap();
            tx.send(i).unwrap();
            tokio::time::sleep(Duration::from_millis(5)).await;
            guard.release().await.unwrap();
        }));
        wait_for_waiters(&observer, &name, i + 1).await;
    }
    drop(tx);
    held.release().await.unwrap();
    for task in tasks {
        tokio::time::timeout(Duration::from_secs(60), task)
            .await
            .unwrap()
            .unwrap();
    }
    let mut order = Vec::new();
    while let Some(i) = rx.recv().await {
        order.push(i);
    }
    assert_eq!(
        order,
        vec![0, 1, 2, 3, 4],
        "fair grants out of arrival order"
    );
}

/// With `reentrant(owner)`, the same owner acquires again at once and shares the grant;
/// the lock is released only with the last hold; other owners stay excluded until then.
///
/// # Examples
///
/// ```
/// # distlock_testkit::block_on(async {
/// distlock_testkit::conformance::reentrant_holds_nest_by_owner(&distlock_testkit::Target::new("memory://doc")).await;
/// # });
/// ```
pub async fn reentrant_holds_nest_by_owner(target: &Target) {
    let name = unique("reentrant");
    let client = target.client().await;
    let other = target.client().await;
    let owner = client.new_owner();
    let mine = LockOptions::new()
        .reentrant(owner.clone())
        .wait(Duration::from_secs(1));
    let mutex = client.mutex(&name);
    let depth1 = mutex.lock_with(&mine).await.unwrap();
    let depth2 = mutex.lock_with(&mine).await.unwrap();
    let depth3 = mutex.lock_with(&mine).await.unwrap();
    assert_eq!(depth1.fencing_token(), depth3.fencing_token());
    assert_eq!(depth2.owner(), &owner);
    let stranger = LockOptions::new().reentrant(client.new_owner());
    expect_kind(
        mutex
            .lock_with(&stranger.wait(Duration::from_millis(100)))
            .await,
        ErrorKind::Timeout,
        "another owner on the same client",
    );
    depth3.release().await.unwrap();
    depth1.release().await.unwrap();
    assert!(
        other.mutex(&name).try_lock().await.unwrap().is_none(),
        "released too early"
    );
    assert_eq!(depth2.health(), Health::Held);
    depth2.release().await.unwrap();
    assert!(
        other.mutex(&name).try_lock().await.unwrap().is_some(),
        "last hold releases"
    );
}

/// `status` shows holders with owner metadata, token and remaining TTL, and queued waiters.
///
/// # Examples
///
/// ```
/// # distlock_testkit::block_on(async {
/// distlock_testkit::conformance::status_shows_holders_and_waiters(&distlock_testkit::Target::new("memory://doc")).await;
/// # });
/// ```
pub async fn status_shows_holders_and_waiters(target: &Target) {
    let name = unique("status");
    let a = target.client().await;
    let b = target.client().await;
    let held = a.mutex(&name).lock().await.unwrap();
    let waiter = {
        let name = name.clone();
        tokio::spawn(async move { b.mutex(&name).lock_timeout(Duration::from_secs(30)).await })
    };
    wait_for_waiters(&a, &name, 1).await;
    let states = a.status(Some(&name)).await.unwrap();
    let state = &states[0];
    assert_eq!(state.name, name);
    assert_eq!(state.holders.len(), 1);
    let holder = &state.holders[0];
    assert_eq!(holder.fencing_token, held.fencing_token());
    assert_eq!(holder.owner, held.owner().as_str());
    assert_eq!(holder.meta.pid, std::process::id());
    match a.capabilities().liveness {
        Liveness::Lease => assert!(
            holder.remaining_ms.is_some_and(|ms| ms > 0 && ms <= 30_000),
            "a lease shows its time left: {:?}",
            holder.remaining_ms
        ),
        Liveness::Session => assert_eq!(holder.remaining_ms, None, "a session grant has no TTL"),
    }
    assert!(state.last_fencing_token >= held.fencing_token());
    let all = a.status(None).await.unwrap();
    assert!(
        all.iter().any(|s| s.name == name),
        "listing all locks includes this one"
    );
    held.release().await.unwrap();
    let next = waiter.await.unwrap().unwrap();
    assert!(next.fencing_token() > holder.fencing_token);
}
