//! Leaders in processes of their own, killed and paused: a successor wins with a greater
//! term, observers follow, and a leader that wakes past its lease stops its work.

use std::time::{Duration, Instant};

use distlock::{Health, LeaderInfo, LockOptions};
use distlock_servers::Signal;
use tokio::sync::watch;

use super::election::shown;
use super::process::{EVENT_WAIT, acquired, spawn};
use super::{Target, unique};
use crate::child::{ChildEvent, ChildProcess, ChildTask};

/// The lease of the leaders these tests fault.
const TTL: Duration = Duration::from_millis(1500);

/// A helper process leading election `name` as `identity`, once it reports its term.
fn spawn_leader(target: &Target, name: &str, identity: &str) -> (ChildProcess, u64) {
    let child = spawn(
        target,
        &ChildTask::Lead {
            url: target.url().to_owned(),
            name: name.to_owned(),
            identity: identity.to_owned(),
            ttl_ms: TTL.as_millis() as u64,
        },
    );
    let term = acquired(&child);
    (child, term)
}

/// Waits until `seen` shows `identity` leading; its term.
async fn shows(seen: &mut watch::Receiver<Option<LeaderInfo>>, identity: &str) -> u64 {
    let what = format!("`{identity}` leading");
    shown(seen, &what, |l| l.identity == identity).await.term
}

/// A leader process killed with SIGKILL is succeeded by a waiting candidate within its
/// lease plus a second, with a greater term; an observer sees the new leader within a
/// second of its win.
///
/// # Examples
///
/// ```ignore
/// distlock_testkit::process_suite!(target); // generates this test
/// ```
pub async fn killed_leader_is_succeeded_with_a_greater_term(target: &Target) {
    let name = unique("killed-leader");
    let (child, dead_term) = spawn_leader(target, &name, "child");
    let client = target.client().await;
    let mut seen = client
        .election(&name)
        .observe_every(Duration::from_millis(100))
        .observe()
        .await
        .unwrap();
    assert_eq!(shows(&mut seen, "child").await, dead_term);
    let successor = {
        let election = client
            .election(&name)
            .identity("successor")
            .with_options(LockOptions::new().wait(TTL + Duration::from_secs(5)));
        tokio::spawn(async move { election.campaign().await })
    };
    child.signal(Signal::Kill);
    let killed_at = Instant::now();
    let leadership = successor
        .await
        .unwrap()
        .expect("a waiting candidate wins once the killed leader's lease ends");
    assert!(
        killed_at.elapsed() <= TTL + Duration::from_secs(1),
        "won {:?} after the kill",
        killed_at.elapsed()
    );
    assert!(leadership.term() > dead_term, "terms strictly increase");
    assert_eq!(shows(&mut seen, "successor").await, leadership.term());
    leadership.resign().await.unwrap();
}

/// A leader process frozen with SIGSTOP past its lease is succeeded with a greater term;
/// thawed, its work is stopped (`run` ends with the loss), and the successor still leads.
///
/// # Examples
///
/// ```ignore
/// distlock_testkit::process_suite!(target); // generates this test
/// ```
pub async fn paused_leader_is_stopped_when_it_wakes(target: &Target) {
    let name = unique("paused-leader");
    let (child, paused_term) = spawn_leader(target, &name, "child");
    child.signal(Signal::Stop);
    let client = target.client().await;
    let leadership = client
        .election(&name)
        .identity("successor")
        .with_options(
            LockOptions::new()
                .ttl(Duration::from_secs(10))
                .wait(TTL + Duration::from_secs(1)),
        )
        .campaign()
        .await
        .expect("the paused leader's lease ends and the successor wins");
    assert!(leadership.term() > paused_term, "terms strictly increase");
    child.signal(Signal::Continue);
    assert_eq!(
        child.next_event(EVENT_WAIT),
        Some(ChildEvent::Lost),
        "the thawed leader's work is stopped"
    );
    assert_eq!(leadership.health(), Health::Held);
    leadership
        .guard()
        .renew()
        .await
        .expect("the successor is undisturbed");
    let leader = client
        .election(&name)
        .leader()
        .await
        .unwrap()
        .expect("a leader");
    assert_eq!(
        (leader.identity.as_str(), leader.term),
        ("successor", leadership.term())
    );
}
