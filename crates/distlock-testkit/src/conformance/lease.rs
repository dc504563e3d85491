//! Leases: expiry, renewal, stale holders, fencing, loss detection.

use std::time::{Duration, Instant};

use distlock::{ErrorKind, Health, LockOptions};

use super::{Target, eventually, expect_kind, unique};

fn short(ttl_ms: u64) -> LockOptions {
    LockOptions::new()
        .ttl(Duration::from_millis(ttl_ms))
        .auto_renew(false)
}

/// A holder that stops renewing loses the lock when its TTL ends; another client gets it
/// within TTL + 1 s, with a greater token.
///
/// # Examples
///
/// ```
/// # distlock_testkit::block_on(async {
/// distlock_testkit::conformance::ttl_expiry_frees_the_lock(&distlock_testkit::Target::new("memory://doc")).await;
/// # });
/// ```
pub async fn ttl_expiry_frees_the_lock(target: &Target) {
    let name = unique("ttl");
    let a = target.client().await;
    let b = target.client().await;
    let stale = a.mutex(&name).lock_with(&short(400)).await.unwrap();
    let started = Instant::now();
    let fresh = b
        .mutex(&name)
        .lock_timeout(Duration::from_millis(1400))
        .await
        .expect("the lock is free again within ttl + 1 s");
    assert!(
        started.elapsed() >= Duration::from_millis(300),
        "granted while the first lease was still valid"
    );
    assert!(fresh.fencing_token() > stale.fencing_token());
    assert_eq!(stale.health(), Health::Lost);
}

/// With auto-renewal, a holder keeps the lock long past its TTL and stays `Held`.
///
/// # Examples
///
/// ```
/// # distlock_testkit::block_on(async {
/// distlock_testkit::conformance::renewal_keeps_the_lock(&distlock_testkit::Target::new("memory://doc")).await;
/// # });
/// ```
pub async fn renewal_keeps_the_lock(target: &Target) {
    let name = unique("renew");
    let a = target.client().await;
    let b = target.client().await;
    let options = LockOptions::new().ttl(Duration::from_millis(300));
    let guard = a.mutex(&name).lock_with(&options).await.unwrap();
    let first_deadline = guard.safe_until();
    tokio::time::sleep(Duration::from_millis(1000)).await;
    assert_eq!(guard.health(), Health::Held);
    assert!(
        guard.safe_until() > first_deadline,
        "renewal moves safe_until"
    );
    assert!(b.mutex(&name).try_lock().await.unwrap().is_none());
    guard.renew().await.expect("manual renewal of a held lease");
    guard.release().await.unwrap();
}

/// A holder whose lease ran out and was taken over can neither renew nor release
/// (`NotHeld`), and trying does not disturb the new holder.
///
/// # Examples
///
/// ```
/// # distlock_testkit::block_on(async {
/// distlock_testkit::conformance::stale_holder_cannot_release_or_renew(&distlock_testkit::Target::new("memory://doc")).await;
/// # });
/// ```
pub async fn stale_holder_cannot_release_or_renew(target: &Target) {
    let name = unique("stale");
    let a = target.client().await;
    let b = target.client().await;
    let stale = a.mutex(&name).lock_with(&short(300)).await.unwrap();
    let fresh = b
        .mutex(&name)
        .lock_timeout(Duration::from_secs(2))
        .await
        .unwrap();
    // Past its safe deadline the guard is lost for good, and renewing says so.
    expect_kind(stale.renew().await, ErrorKind::LockLost, "stale renew");
    expect_kind(stale.release().await, ErrorKind::NotHeld, "stale release");
    assert_eq!(fresh.health(), Health::Held);
    fresh.renew().await.expect("the new holder is undisturbed");
    assert!(a.mutex(&name).try_lock().await.unwrap().is_none());
    let state = &b.status(Some(&name)).await.unwrap()[0];
    assert_eq!(state.holders.len(), 1);
    assert_eq!(state.holders[0].fencing_token, fresh.fencing_token());
    fresh.release().await.unwrap();
}

/// Tokens strictly increase over sequential grants, over concurrent grants in grant order,
/// and across lock kinds sharing a name.
///
/// # Examples
///
/// ```
/// # distlock_testkit::block_on(async {
/// distlock_testkit::conformance::fencing_tokens_strictly_increase(&distlock_testkit::Target::new("memory://doc")).await;
/// # });
/// ```
pub async fn fencing_tokens_strictly_increase(target: &Target) {
    let name = unique("fence");
    let client = target.client().await;
    let mut last = 0;
    for _ in 0..10 {
        let guard = client.mutex(&name).lock().await.unwrap();
        assert!(guard.fencing_token() > last, "token did not increase");
        last = guard.fencing_token();
        guard.release().await.unwrap();
    }
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let mut tasks = Vec::new();
    for _ in 0..6 {
        let client = target.client().await;
        let (name, tx) = (name.clone(), tx.clone());
        tasks.push(tokio::spawn(async move {
            for _ in 0..5 {
                let guard = client
                    .mutex(&name)
                    .lock_timeout(Duration::from_secs(30))
                    .await
                    .unwrap();
                tx.send(guard.fencing_token()).unwrap();
                guard.release().await.unwrap();
            }
        }));
    }
    drop(tx);
    for task in tasks {
        task.await.unwrap();
    }
    let mut seen = Vec::new();
    while let Some(token) = rx.recv().await {
        seen.push(token);
    }
    assert_eq!(seen.len(), 30);
    assert!(
        seen.iter().all(|t| *t > last),
        "concurrent tokens exceed earlier ones"
    );
    assert!(
        seen.windows(2).all(|w| w[0] < w[1]),
        "tokens in grant order increase: {seen:?}"
    );
    if client.capabilities().rwlock {
        let reader = client.rwlock(&name).read().await.unwrap();
        assert!(reader.fencing_token() > *seen.last().unwrap());
    }
}

/// `lost()` resolves once an unrenewed lease ends — no later than another client takes the
/// lock over — and health turns `Lost`.
///
/// # Examples
///
/// ```
/// # distlock_testkit::block_on(async {
/// distlock_testkit::conformance::lost_fires_after_takeover(&distlock_testkit::Target::new("memory://doc")).await;
/// # });
/// ```
pub async fn lost_fires_after_takeover(target: &Target) {
    let name = unique("lost");
    let a = target.client().await;
    let b = target.client().await;
    // Measured before the request: the lease runs from no earlier than that.
    let started = Instant::now();
    let guard = a.mutex(&name).lock_with(&short(300)).await.unwrap();
    let taker = {
        let name = name.clone();
        tokio::spawn(async move {
            let guard = b
                .mutex(&name)
                .lock_timeout(Duration::from_secs(3))
                .await
                .unwrap();
            (Instant::now(), guard)
        })
    };
    tokio::time::timeout(Duration::from_millis(1300), guard.lost())
        .await
        .expect("lost() resolves after the lease ends");
    let lost_at = Instant::now();
    assert!(
        lost_at - started >= Duration::from_millis(200),
        "lost before the lease could end"
    );
    assert_eq!(guard.health(), Health::Lost);
    let (granted_at, taken) = taker.await.unwrap();
    assert!(
        lost_at <= granted_at + Duration::from_millis(50),
        "the old holder learned of the loss after the takeover"
    );
    assert!(taken.fencing_token() > guard.fencing_token());
}

/// Tokens strictly increase in grant order for readers, writers and semaphore permits too:
/// each grant, shared or not, gets a token above every token granted before for its name.
///
/// # Examples
///
/// ```
/// # distlock_testkit::block_on(async {
/// distlock_testkit::conformance::fencing_tokens_increase_in_grant_order_for_every_kind(&distlock_testkit::Target::new("memory://doc")).await;
/// # });
/// ```
pub async fn fencing_tokens_increase_in_grant_order_for_every_kind(target: &Target) {
    let a = target.client().await;
    let b = target.client().await;
    let caps = a.capabilities();
    let mut order = Vec::new();
    if caps.rwlock {
        let name = unique("fence-rw");
        let r1 = a.rwlock(&name).read().await.unwrap();
        let r2 = b.rwlock(&name).read().await.unwrap();
        order.extend([r1.fencing_token(), r2.fencing_token()]);
        let writer = {
            let (b, name) = (b.clone(), name.clone());
            let waiting = LockOptions::new().wait(Duration::from_secs(10));
            tokio::spawn(async move { b.rwlock(&name).with_options(waiting).write().await })
        };
        super::wait_for_waiters(&a, &name, 1).await;
        r1.release().await.unwrap();
        r2.release().await.unwrap();
        let w = writer.await.unwrap().unwrap();
        order.push(w.fencing_token());
        w.release().await.unwrap();
        let r3 = a.rwlock(&name).read().await.unwrap();
        order.push(r3.fencing_token());
        r3.release().await.unwrap();
        assert_strictly_increasing(&order, "read, read, write, read");
    }
    if caps.semaphore {
        let name = unique("fence-sem");
        order.clear();
        let p1 = a.semaphore(&name, 2).acquire().await.unwrap();
        let p2 = b.semaphore(&name, 2).acquire().await.unwrap();
        order.extend([p1.fencing_token(), p2.fencing_token()]);
        let third = {
            let (a, name) = (a.clone(), name.clone());
            tokio::spawn(async move {
                a.semaphore(&name, 2)
                    .with_options(LockOptions::new().wait(Duration::from_secs(10)))
                    .acquire()
                    .await
            })
        };
        super::wait_for_waiters(&b, &name, 1).await;
        p2.release().await.unwrap();
        let p3 = third.await.unwrap().unwrap();
        order.push(p3.fencing_token());
        p1.release().await.unwrap();
        p3.release().await.unwrap();
        let p4 = b.semaphore(&name, 2).acquire_many(2).await.unwrap();
        order.push(p4.fencing_token());
        assert_strictly_increasing(&order, "permit, permit, permit, two permits");
        p4.release().await.unwrap();
    }
}

fn assert_strictly_increasing(tokens: &[u64], what: &str) {
    assert!(
        tokens.windows(2).all(|w| w[0] < w[1]),
        "tokens of {what} in grant order must strictly increase: {tokens:?}"
    );
}

/// A holder with `max_hold` stops renewing after it, so its lease ends.
///
/// # Examples
///
/// ```
/// # distlock_testkit::block_on(async {
/// distlock_testkit::conformance::max_hold_stops_renewal(&distlock_testkit::Target::new("memory://doc")).await;
/// # });
/// ```
pub async fn max_hold_stops_renewal(target: &Target) {
    let name = unique("maxhold");
    let client = target.client().await;
    let options = LockOptions::new()
        .ttl(Duration::from_millis(300))
        .max_hold(Duration::from_millis(500));
    let guard = client.mutex(&name).lock_with(&options).await.unwrap();
    tokio::time::timeout(Duration::from_secs(3), guard.lost())
        .await
        .expect("the lease ends after max_hold");
    let other = target.client().await;
    let ok = eventually(Duration::from_secs(2), || async {
        other.mutex(&name).try_lock().await.unwrap().is_some()
    })
    .await;
    assert!(ok, "the lock is free after max_hold plus the ttl");
}

/// For stores whose other clients wait on one client's writes (SQLite's write lock, a SQL
/// transaction's locks): while a client's writes are paused (as a process pauses them
/// before it stops itself), its lock requests are held back and go on once the pause is
/// dropped, and another client writes meanwhile.
///
/// # Examples
///
/// ```ignore
/// distlock_testkit::conformance::paused_writes_hold_back_this_client_alone(&target).await;
/// ```
pub async fn paused_writes_hold_back_this_client_alone(target: &Target) {
    let (name, elsewhere) = (unique("paused-writes"), unique("elsewhere"));
    let client = target.client().await;
    let paused = tokio::time::timeout(Duration::from_secs(5), client.pause_writes())
        .await
        .expect("nothing under way: paused at once");
    assert!(paused.is_holding(), "this store's writes can be paused");
    let held_back = {
        let client = client.clone();
        tokio::spawn(async move { client.mutex(&name).lock().await })
    };
    let other = target.client().await;
    let theirs = tokio::time::timeout(Duration::from_secs(5), other.mutex(&elsewhere).lock())
        .await
        .expect("another client writes while this one is paused")
        .unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!held_back.is_finished(), "held back while paused");
    drop(paused);
    let ours = tokio::time::timeout(Duration::from_secs(5), held_back)
        .await
        .expect("let go once the pause is dropped")
        .unwrap()
        .unwrap();
    ours.release().await.unwrap();
    theirs.release().await.unwrap();
}
