//! Hand-offs: an exclusive grant passed to another client, adopted once, atomically, with
//! a greater fencing token.

use std::time::Duration;

use distlock::{ErrorKind, HandOff, LockOptions};

use super::{Target, eventually, expect_kind, unique};

/// A holder hands its mutex off; another client adopts it with a greater token (and a
/// write lock's too); nobody else gets the lock between; the sender's guard sees it gone
/// (`handed_over`) and its renewal is refused; a second adoption finds nothing
/// (`NotHeld`), as does a forged one (another grant token, fencing token or name); the
/// adopter renews past several TTLs and releases. An expired hand-off,
/// one of another backend, a shared grant's and a window out of bounds are
/// `InvalidInput`; a hand-off nobody adopts is released at its deadline; one adopted
/// through the sender's own client leaves the sender's guard gone and the adopter's held.
///
/// # Examples
///
/// ```
/// # distlock_testkit::block_on(async {
/// distlock_testkit::conformance::hand_off_is_adopted_once_with_a_greater_token(&distlock_testkit::Target::new("memory://doc")).await;
/// # });
/// ```
pub async fn hand_off_is_adopted_once_with_a_greater_token(target: &Target) {
    let name = unique("hand-off");
    let (sender, adopter, other) = (
        target.client().await,
        target.client().await,
        target.client().await,
    );
    let ttl = Duration::from_millis(400);
    let short = LockOptions::new().ttl(ttl);
    let guard = sender.mutex(&name).lock_with(&short).await.unwrap();
    let handed = guard.hand_off(Duration::from_secs(10)).unwrap();
    let text = handed.to_string();
    assert!(
        !format!("{handed:?}").contains(&handed.grant),
        "Debug hides the grant"
    );
    let received: HandOff = text.parse().unwrap();
    assert_eq!(received, handed);
    let forge = |change: &dyn Fn(&mut HandOff)| {
        let mut forged = received.clone();
        change(&mut forged);
        forged
    };
    let forgeries = [
        forge(&|f| f.grant = "not-the-grant".into()),
        forge(&|f| f.fencing_token += 1),
        forge(&|f| f.name = unique("hand-off-elsewhere")),
    ];
    for forged in &forgeries {
        expect_kind(
            adopter.adopt(forged).await,
            ErrorKind::NotHeld,
            "a hand-off that names another grant",
        );
    }
    assert!(guard.health().is_valid(), "a forgery takes nothing");

    let adopted = adopter.adopt(&received).await.unwrap();
    assert!(
        adopted.fencing_token() > guard.fencing_token(),
        "a greater token"
    );
    assert_eq!(adopted.name(), name);
    // Refused at once where the store answers a renewal; within moments where the grant
    // lives by a session, whose watch on it sees the adoption.
    let refused = eventually(Duration::from_secs(2), || async {
        guard.renew().await.is_err()
    })
    .await;
    assert!(refused, "the sender's grant is gone");
    tokio::time::timeout(Duration::from_secs(5), guard.handed_over(&handed))
        .await
        .expect("the sender sees the adoption")
        .unwrap();
    expect_kind(
        adopter.adopt(&received).await,
        ErrorKind::NotHeld,
        "a second adoption",
    );
    assert!(other.mutex(&name).try_lock().await.unwrap().is_none());
    tokio::time::sleep(ttl * 3).await;
    assert!(adopted.health().is_valid(), "the adopter renews its lease");
    assert!(other.mutex(&name).try_lock().await.unwrap().is_none());
    adopted.release().await.unwrap();
    assert!(other.mutex(&name).try_lock().await.unwrap().is_some());

    // Bad hand-offs.
    let guard = sender.mutex(&name).lock().await.unwrap();
    let mut expired = guard.hand_off(Duration::from_secs(10)).unwrap();
    expired.deadline_unix_ms = 1;
    expect_kind(
        adopter.adopt(&expired).await,
        ErrorKind::InvalidInput,
        "an expired hand-off",
    );
    let mut foreign = guard.hand_off(Duration::from_secs(10)).unwrap();
    foreign.backend = "nosuch".into();
    expect_kind(
        adopter.adopt(&foreign).await,
        ErrorKind::InvalidInput,
        "another backend's",
    );
    for within in [Duration::ZERO, Duration::from_secs(3 * 86_400)] {
        expect_kind(
            guard.hand_off(within),
            ErrorKind::InvalidInput,
            "a window out of bounds",
        );
    }
    expect_kind(
        "{}".parse::<HandOff>(),
        ErrorKind::InvalidInput,
        "no hand-off",
    );
    let unwanted = guard.hand_off(Duration::from_millis(300)).unwrap();
    let waited = guard.handed_over(&unwanted).await;
    expect_kind(waited, ErrorKind::Timeout, "a hand-off nobody adopted");
    let free = eventually(Duration::from_secs(2), || async {
        other.mutex(&name).try_lock().await.unwrap().is_some()
    })
    .await;
    assert!(free, "released at its deadline");

    // Adopted through the sender's own client: never two valid guards, and the sender's
    // end of it takes nothing from the adopter.
    let guard = sender.mutex(&name).lock().await.unwrap();
    let handed = guard.hand_off(Duration::from_secs(10)).unwrap();
    let adopted = sender.adopt(&handed).await.unwrap();
    let refused = eventually(Duration::from_secs(2), || async {
        guard.renew().await.is_err()
    })
    .await;
    assert!(
        refused,
        "the sender's guard is gone once adopted by its own client"
    );
    tokio::time::timeout(Duration::from_secs(5), guard.handed_over(&handed))
        .await
        .expect("the sender sees the adoption")
        .unwrap();
    assert!(adopted.health().is_valid(), "the adopter holds it");
    assert!(other.mutex(&name).try_lock().await.unwrap().is_none());
    adopted.release().await.unwrap();
    if sender.capabilities().rwlock {
        let reader = sender.rwlock(&name).read().await.unwrap();
        expect_kind(
            reader.hand_off(Duration::from_secs(1)),
            ErrorKind::InvalidInput,
            "a read grant",
        );
        reader.release().await.unwrap();
        let writer = sender.rwlock(&name).write().await.unwrap();
        let handed = writer.hand_off(Duration::from_secs(10)).unwrap();
        let adopted = adopter.adopt(&handed).await.unwrap();
        assert!(adopted.fencing_token() > writer.fencing_token());
        assert_eq!(adopted.kind(), distlock::LockKind::Write);
        let readers = other.rwlock(&name).try_read().await.unwrap();
        assert!(readers.is_none(), "the adopted write lock excludes readers");
        adopted.release().await.unwrap();
    }
}

/// A process hands its grant off over a pipe (its standard output) and ends once it is
/// adopted; this process adopts it with a greater token, renews it past several TTLs while
/// nobody else gets the lock, and releases it.
///
/// # Examples
///
/// ```ignore
/// distlock_testkit::process_suite!(target); // generates this test
/// ```
pub async fn a_process_hands_its_grant_to_another(target: &Target) {
    let name = unique("handed-across");
    let ttl = Duration::from_millis(500);
    let mut child = super::process::spawn(
        target,
        &crate::child::ChildTask::HandOff {
            url: target.url().to_owned(),
            name: name.clone(),
            ttl_ms: ttl.as_millis() as u64,
        },
    );
    let sender_token = super::process::acquired(&child);
    let handed = match child.next_event(super::process::EVENT_WAIT) {
        Some(crate::child::ChildEvent::HandedOff { hand_off }) => hand_off,
        other => panic!("the helper did not hand its grant off: {other:?}"),
    };
    let (adopter, other) = (target.client().await, target.client().await);
    assert!(other.mutex(&name).try_lock().await.unwrap().is_none());
    let handed: HandOff = handed.parse().unwrap();
    let adopted = adopter.adopt(&handed).await.unwrap();
    assert!(
        adopted.fencing_token() > sender_token,
        "the sender's late writes are refused"
    );
    assert_eq!(
        child.next_event(super::process::EVENT_WAIT),
        Some(crate::child::ChildEvent::Released {
            outcome: "handed".into()
        }),
        "the sender sees the adoption"
    );
    assert!(
        child.wait(super::process::EVENT_WAIT),
        "the sender ends cleanly"
    );
    for _ in 0..3 {
        tokio::time::sleep(ttl).await;
        assert!(
            other.mutex(&name).try_lock().await.unwrap().is_none(),
            "nobody else"
        );
    }
    assert!(adopted.health().is_valid(), "renewed past several TTLs");
    adopted.release().await.unwrap();
    assert!(other.mutex(&name).try_lock().await.unwrap().is_some());
}
