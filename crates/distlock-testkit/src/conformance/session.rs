//! Grants that live by the client's session: health follows the session, one expiry loses
//! every grant at once, and the core releases at `max_hold` or, without renewal, at the TTL.

use std::time::{Duration, Instant};

use distlock::backend::Liveness;
use distlock::{Client, ErrorKind, Guard, Health, LockOptions};

use super::{Target, eventually, expect_kind, unique};

/// A client of `target` and the faults of its session; fails if the backend does not
/// declare grants that live by session.
async fn session_client(target: &Target) -> (Client, Box<dyn super::SessionFaults>) {
    let client = target.client().await;
    assert_eq!(
        client.capabilities().liveness,
        Liveness::Session,
        "the session suite is for backends whose grants live by session"
    );
    let faults = target
        .session_faults(&client)
        .expect("a session target says how to fault its sessions");
    (client, faults)
}

/// Waits (bounded by 5 s) until every guard reports `health`.
async fn all_become(guards: &[&Guard], health: Health, what: &str) {
    for guard in guards {
        let became = eventually(Duration::from_secs(5), || async {
            guard.health() == health
        })
        .await;
        assert!(became, "{what}");
    }
}

/// A session guard has no lease of its own: with the session connected it is held long past
/// its TTL, renewing nothing, and nobody else gets the lock.
///
/// # Examples
///
/// ```
/// # distlock_testkit::block_on(async {
/// distlock_testkit::conformance::session_guards_outlive_their_ttl(&distlock_testkit::memory_session_target()).await;
/// # });
/// ```
pub async fn session_guards_outlive_their_ttl(target: &Target) {
    let (client, _faults) = session_client(target).await;
    let other = target.client().await;
    let name = unique("outlive");
    let options = LockOptions::new().ttl(Duration::from_millis(100));
    let guard = client.mutex(&name).lock_with(&options).await.unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(guard.health(), Health::Held, "held at five times its TTL");
    assert!(guard.safe_until() > std::time::Instant::now());
    assert!(other.mutex(&name).try_lock().await.unwrap().is_none());
    guard.renew().await.expect("a session guard still stands");
    guard.release().await.unwrap();
}

/// A suspended session puts every guard of the client at risk, and none is lost while the
/// session is still valid; when contact is back they are held again.
///
/// # Examples
///
/// ```
/// # distlock_testkit::block_on(async {
/// distlock_testkit::conformance::suspended_session_puts_every_guard_at_risk(&distlock_testkit::memory_session_target()).await;
/// # });
/// ```
pub async fn suspended_session_puts_every_guard_at_risk(target: &Target) {
    let (client, faults) = session_client(target).await;
    let mutex = client.mutex(unique("suspend-m")).lock().await.unwrap();
    let reader = client.rwlock(unique("suspend-r")).read().await.unwrap();
    assert_eq!(mutex.health(), Health::Held);
    faults.suspend().await;
    all_become(
        &[&mutex, &reader],
        Health::AtRisk,
        "a guard of a suspended session is at risk",
    )
    .await;
    faults.resume().await;
    all_become(
        &[&mutex, &reader],
        Health::Held,
        "a guard is held again once its session is back",
    )
    .await;
    mutex.release().await.unwrap();
    reader.release().await.unwrap();
}

/// An expired session loses every guard of the client at once (each `lost()` resolves), and
/// other clients get the locks at once; the client itself serves later acquires in a new
/// session.
///
/// # Examples
///
/// ```
/// # distlock_testkit::block_on(async {
/// distlock_testkit::conformance::expired_session_loses_every_guard_at_once(&distlock_testkit::memory_session_target()).await;
/// # });
/// ```
pub async fn expired_session_loses_every_guard_at_once(target: &Target) {
    let (client, faults) = session_client(target).await;
    let other = target.client().await;
    let names: Vec<String> = (0..3).map(|_| unique("expire")).collect();
    let mut guards = Vec::new();
    for name in &names {
        guards.push(client.mutex(name).lock().await.unwrap());
    }
    faults.expire().await;
    for guard in &guards {
        tokio::time::timeout(Duration::from_secs(5), guard.lost())
            .await
            .expect("every guard of an expired session turns Lost");
        assert_eq!(guard.health(), Health::Lost);
        assert!(guard.safe_until() <= std::time::Instant::now());
    }
    for (name, lost) in names.iter().zip(&guards) {
        let next = other
            .mutex(name)
            .lock_timeout(Duration::from_secs(10))
            .await
            .expect("the lock of an expired session is free");
        assert!(next.fencing_token() > lost.fencing_token());
        next.release().await.unwrap();
    }
    let again = client
        .mutex(&names[0])
        .lock_timeout(Duration::from_secs(10))
        .await;
    let again = again.expect("a new session serves the client's later acquires");
    assert_eq!(again.health(), Health::Held);
    again.release().await.unwrap();
    for guard in guards {
        expect_kind(
            guard.renew().await,
            ErrorKind::LockLost,
            "renewing a lost guard",
        );
        assert_eq!(guard.health(), Health::Lost, "once lost, always lost");
    }
}

/// A session suspended past its validity loses its guards before the server could expire
/// it, and contact coming back later does not bring them back.
///
/// # Examples
///
/// ```
/// # distlock_testkit::block_on(async {
/// distlock_testkit::conformance::suspended_past_validity_is_lost(&distlock_testkit::memory_session_target()).await;
/// # });
/// ```
pub async fn suspended_past_validity_is_lost(target: &Target) {
    let (client, faults) = session_client(target).await;
    let guard = client.mutex(unique("validity")).lock().await.unwrap();
    faults.suspend().await;
    let deadline = guard.safe_until();
    tokio::time::timeout(Duration::from_secs(30), guard.lost())
        .await
        .expect("a guard of a session suspended past its validity turns Lost");
    assert!(std::time::Instant::now() >= deadline);
    faults.resume().await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(guard.health(), Health::Lost, "once lost, always lost");
    faults.expire().await;
}

/// A session grant has no lease to lapse, so the core releases it: at `max_hold`, and,
/// without automatic renewal, at its TTL. Another client gets the lock then.
///
/// # Examples
///
/// ```
/// # distlock_testkit::block_on(async {
/// distlock_testkit::conformance::session_grants_are_released_at_their_limit(&distlock_testkit::memory_session_target()).await;
/// # });
/// ```
pub async fn session_grants_are_released_at_their_limit(target: &Target) {
    let (client, _faults) = session_client(target).await;
    let other = target.client().await;
    for options in [
        LockOptions::new().max_hold(Duration::from_millis(300)),
        LockOptions::new()
            .ttl(Duration::from_millis(300))
            .auto_renew(false),
    ] {
        let name = unique("limit");
        let started = Instant::now();
        let guard = client.mutex(&name).lock_with(&options).await.unwrap();
        assert!(guard.safe_until() <= std::time::Instant::now() + Duration::from_millis(300));
        let next = other
            .mutex(&name)
            .lock_timeout(Duration::from_secs(5))
            .await
            .expect("the core releases a session grant at its limit");
        assert!(
            started.elapsed() >= Duration::from_millis(250),
            "released too early"
        );
        assert_eq!(guard.health(), Health::Lost);
        assert!(next.fencing_token() > guard.fencing_token());
        next.release().await.unwrap();
    }
}

/// A waiter whose session expires while it waits is not handed a grant of the dead session:
/// it queues again in the new one and is granted there, held.
///
/// # Examples
///
/// ```
/// # distlock_testkit::block_on(async {
/// distlock_testkit::conformance::waiter_of_an_expired_session_waits_on_in_the_new_one(&distlock_testkit::memory_session_target()).await;
/// # });
/// ```
pub async fn waiter_of_an_expired_session_waits_on_in_the_new_one(target: &Target) {
    let (waiting_client, faults) = session_client(target).await;
    let holder_client = target.client().await;
    let name = unique("requeue");
    let held = holder_client.mutex(&name).lock().await.unwrap();
    let waiter = {
        let (client, name) = (waiting_client.clone(), name.clone());
        tokio::spawn(async move {
            client
                .mutex(&name)
                .lock_timeout(Duration::from_secs(20))
                .await
        })
    };
    super::wait_for_waiters(&holder_client, &name, 1).await;
    faults.expire().await;
    held.release().await.unwrap();
    let granted = waiter
        .await
        .unwrap()
        .expect("the waiter is granted in its new session");
    assert_eq!(granted.health(), Health::Held);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        granted.health(),
        Health::Held,
        "its grant lives in a live session"
    );
    granted.release().await.unwrap();
}
