//! Mutual exclusion between tasks.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use super::{Target, unique};

/// 16 tasks, each with its own client, take one mutex 12 times each and do a non-atomic
/// read-pause-write of a shared counter inside; no update is lost and no two tasks are ever
/// inside at once.
///
/// # Examples
///
/// ```
/// # distlock_testkit::block_on(async {
/// distlock_testkit::conformance::mutual_exclusion_across_tasks(&distlock_testkit::Target::new("memory://doc")).await;
/// # });
/// ```
pub async fn mutual_exclusion_across_tasks(target: &Target) {
    const TASKS: u32 = 16;
    const ROUNDS: u32 = 12;
    let name = unique("exclusion");
    let counter = Arc::new(AtomicU32::new(0));
    let inside = Arc::new(AtomicU32::new(0));
    let mut tasks = Vec::new();
    for _ in 0..TASKS {
        let client = target.client().await;
        let (name, counter, inside) = (name.clone(), counter.clone(), inside.clone());
        tasks.push(tokio::spawn(async move {
            let mutex = client.mutex(name);
            for _ in 0..ROUNDS {
                let guard = mutex.lock_timeout(Duration::from_secs(30)).await.unwrap();
                assert_eq!(
                    inside.fetch_add(1, Ordering::SeqCst),
                    0,
                    "two holders at once"
                );
                let seen = counter.load(Ordering::SeqCst);
                tokio::time::sleep(Duration::from_micros(200)).await;
                counter.store(seen + 1, Ordering::SeqCst);
                inside.fetch_sub(1, Ordering::SeqCst);
                guard.release().await.unwrap();
            }
        }));
    }
    for task in tasks {
        tokio::time::timeout(Duration::from_secs(120), task)
            .await
            .expect("exclusion tasks finish in time")
            .unwrap();
    }
    assert_eq!(counter.load(Ordering::SeqCst), TASKS * ROUNDS);
}

/// `try_lock` on a held lock answers `None` at once, and `Some` after release.
///
/// # Examples
///
/// ```
/// # distlock_testkit::block_on(async {
/// distlock_testkit::conformance::try_lock_when_held_returns_none(&distlock_testkit::Target::new("memory://doc")).await;
/// # });
/// ```
pub async fn try_lock_when_held_returns_none(target: &Target) {
    let name = unique("try");
    let a = target.client().await;
    let b = target.client().await;
    let held = a.mutex(&name).lock().await.unwrap();
    let started = std::time::Instant::now();
    assert!(b.mutex(&name).try_lock().await.unwrap().is_none());
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "try_lock must not wait"
    );
    held.release().await.unwrap();
    let again = b.mutex(&name).try_lock().await.unwrap();
    assert!(again.is_some(), "try_lock after release succeeds");
}
