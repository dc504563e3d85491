//! Multi-locks: all or nothing, no deadlock between overlapping sets.

use std::time::Duration;

use super::{Target, unique};

/// A multi-lock is all or nothing: with one member held elsewhere it takes none; once free
/// it holds every member against single lockers, and releases them together.
///
/// # Examples
///
/// ```
/// # distlock_testkit::block_on(async {
/// distlock_testkit::conformance::multi_lock_is_all_or_nothing(&distlock_testkit::Target::new("memory://doc")).await;
/// # });
/// ```
pub async fn multi_lock_is_all_or_nothing(target: &Target) {
    let base = unique("multi");
    let names: Vec<String> = ["a", "b", "c"]
        .iter()
        .map(|n| format!("{base}/{n}"))
        .collect();
    let a = target.client().await;
    let b = target.client().await;
    let blocker = b.mutex(&names[1]).lock().await.unwrap();
    assert!(a.multi_lock(&names).try_lock().await.unwrap().is_none());
    let first = b.mutex(&names[0]).try_lock().await.unwrap();
    assert!(
        first.is_some(),
        "the member taken before the busy one was given back"
    );
    drop(first);
    blocker.release().await.unwrap();

    let all = a
        .multi_lock(&names)
        .lock_timeout(Duration::from_secs(5))
        .await
        .unwrap();
    let tokens: Vec<u64> = all.guards().iter().map(|g| g.fencing_token()).collect();
    assert_eq!(tokens.len(), 3);
    for name in &names {
        assert!(
            b.mutex(name).try_lock().await.unwrap().is_none(),
            "{name} is held"
        );
    }
    all.release().await.unwrap();
    for name in &names {
        assert!(
            b.mutex(name).try_lock().await.unwrap().is_some(),
            "{name} was released"
        );
    }
}

/// Two multi-locks over the same names listed in opposite orders take turns without
/// deadlock.
///
/// # Examples
///
/// ```
/// # distlock_testkit::block_on(async {
/// distlock_testkit::conformance::multi_locks_in_any_order_do_not_deadlock(&distlock_testkit::Target::new("memory://doc")).await;
/// # });
/// ```
pub async fn multi_locks_in_any_order_do_not_deadlock(target: &Target) {
    let base = unique("multi-order");
    let x = format!("{base}/x");
    let y = format!("{base}/y");
    let mut tasks = Vec::new();
    for order in [[x.clone(), y.clone()], [y.clone(), x.clone()]] {
        let client = target.client().await;
        tasks.push(tokio::spawn(async move {
            for _ in 0..8 {
                let both = client
                    .multi_lock(&order)
                    .lock_timeout(Duration::from_secs(20))
                    .await
                    .expect("no deadlock between opposite orders");
                tokio::time::sleep(Duration::from_millis(2)).await;
                both.release().await.unwrap();
            }
        }));
    }
    for task in tasks {
        tokio::time::timeout(Duration::from_secs(60), task)
            .await
            .expect("multi-lockers finish")
            .unwrap();
    }
}
