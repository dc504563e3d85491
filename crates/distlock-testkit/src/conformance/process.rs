//! Several OS processes on one lock, and process faults: SIGKILL and SIGSTOP of a holder.

use std::time::{Duration, Instant};

use distlock::{Health, LockOptions};

use super::{Target, unique};
use crate::child::{ChildEvent, ChildProcess, ChildTask};
use distlock_servers::Signal;

pub(crate) const EVENT_WAIT: Duration = Duration::from_secs(30);

pub(crate) fn spawn(target: &Target, task: &ChildTask) -> ChildProcess {
    assert!(
        !target.child_test().is_empty(),
        "process tests need the child test: generate them with process_suite!"
    );
    ChildProcess::spawn(target.child_test(), task).expect("a helper process starts")
}

/// A helper process holding `name` with a `ttl` lease, once it reports the grant: the
/// process and its fencing token.
fn spawn_holder(target: &Target, name: &str, ttl: Duration) -> (ChildProcess, u64) {
    let child = spawn(
        target,
        &ChildTask::Hold {
            url: target.url().to_owned(),
            name: name.to_owned(),
            ttl_ms: ttl.as_millis() as u64,
        },
    );
    let token = acquired(&child);
    (child, token)
}

pub(crate) fn acquired(child: &ChildProcess) -> u64 {
    match child.next_event(EVENT_WAIT) {
        Some(ChildEvent::Acquired { fencing_token }) => fencing_token,
        other => panic!("the helper did not acquire the lock: {other:?}"),
    }
}

/// Three processes each run 15 critical sections on one mutex, each a non-atomic
/// read-pause-write of a shared counter file; no update is lost.
///
/// # Examples
///
/// ```ignore
/// distlock_testkit::process_suite!(target); // generates this test
/// ```
pub async fn mutual_exclusion_across_processes(target: &Target) {
    const PROCESSES: u32 = 3;
    const ITERATIONS: u32 = 15;
    let dir = tempfile::tempdir().unwrap();
    let counter = dir.path().join("counter");
    std::fs::write(&counter, "0").unwrap();
    let name = unique("processes");
    let mut children: Vec<ChildProcess> = (0..PROCESSES)
        .map(|_| {
            spawn(
                target,
                &ChildTask::Exclusion {
                    url: target.url().to_owned(),
                    name: name.clone(),
                    iterations: ITERATIONS,
                    counter: counter.clone(),
                },
            )
        })
        .collect();
    for child in &mut children {
        let event = child.next_event(Duration::from_secs(120));
        assert_eq!(
            event,
            Some(ChildEvent::Done {
                sections: ITERATIONS
            })
        );
        assert!(child.wait(Duration::from_secs(30)), "helper exits cleanly");
    }
    let total: u32 = std::fs::read_to_string(&counter)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert_eq!(
        total,
        PROCESSES * ITERATIONS,
        "updates were lost: sections overlapped"
    );
}

/// A holder process killed with SIGKILL leaves its lease behind; another process gets the
/// lock within TTL + 1 s, with a greater token.
///
/// # Examples
///
/// ```ignore
/// distlock_testkit::process_suite!(target); // generates this test
/// ```
pub async fn killed_holder_frees_the_lock_within_ttl(target: &Target) {
    let name = unique("killed");
    let ttl = Duration::from_millis(1500);
    let (child, dead_token) = spawn_holder(target, &name, ttl);
    let client = target.client().await;
    assert!(client.mutex(&name).try_lock().await.unwrap().is_none());
    child.signal(Signal::Kill);
    let killed_at = Instant::now();
    let guard = client
        .mutex(&name)
        .lock_timeout(ttl + Duration::from_secs(1))
        .await
        .expect("the lock is free within ttl + 1 s of the kill");
    assert!(killed_at.elapsed() <= ttl + Duration::from_secs(1));
    assert!(guard.fencing_token() > dead_token);
}

/// A program that returns from its async `main` holding a lock with a 60 s lease leaves it
/// free at once (the next acquirer gets it within a second): without a word on a
/// multi-thread runtime (the client's last handle waits for the guard's release in flight)
/// and on a current-thread one (the last handle makes the release on a thread of its own),
/// and on a current-thread one after `Client::close`. The next token is greater.
///
/// # Examples
///
/// ```ignore
/// distlock_testkit::process_suite!(target); // generates this test
/// ```
pub async fn a_program_ending_with_its_lock_leaves_it_free(target: &Target) {
    let client = target.client().await;
    for (close, current_thread) in [(false, false), (false, true), (true, true)] {
        let name = unique("ending");
        let mut child = spawn(
            target,
            &ChildTask::EndHolding {
                url: target.url().to_owned(),
                name: name.clone(),
                close,
                current_thread,
            },
        );
        let token = acquired(&child);
        assert!(child.wait(EVENT_WAIT), "the program ended");
        let next = client
            .mutex(&name)
            .lock_timeout(Duration::from_secs(1))
            .await
            .unwrap_or_else(|e| {
                panic!(
                    "free within a second of the end (close: {close}, current thread: \
                     {current_thread}): {e}"
                )
            });
        assert!(next.fencing_token() > token);
        next.release().await.unwrap();
    }
}

/// For backends whose locks live as long as the holder's connection (session locks): a
/// holder process killed with SIGKILL, holding a 60 s lease, frees the lock at once (within
/// 2 s), and the next token is greater.
///
/// # Examples
///
/// ```ignore
/// distlock_testkit::conformance::killed_session_holder_frees_the_lock_at_once(&target).await;
/// ```
pub async fn killed_session_holder_frees_the_lock_at_once(target: &Target) {
    let name = unique("killed-session");
    let (child, dead_token) = spawn_holder(target, &name, Duration::from_secs(60));
    let client = target.client().await;
    assert!(client.mutex(&name).try_lock().await.unwrap().is_none());
    child.signal(Signal::Kill);
    let guard = client
        .mutex(&name)
        .lock_timeout(Duration::from_secs(2))
        .await
        .expect("the lock is free within 2 s of the holder's death, long before its ttl");
    assert!(guard.fencing_token() > dead_token);
}

/// A holder process frozen with SIGSTOP past its TTL loses the lock to another process
/// (greater token). Thawed, its guard reports `Lost`, its release answers `NotHeld`, and
/// the new holder is undisturbed.
///
/// # Examples
///
/// ```ignore
/// distlock_testkit::process_suite!(target); // generates this test
/// ```
pub async fn paused_holder_loses_its_lease(target: &Target) {
    let name = unique("paused");
    let ttl = Duration::from_millis(1500);
    let (child, paused_token) = spawn_holder(target, &name, ttl);
    child.signal(Signal::Stop);
    let client = target.client().await;
    let options = LockOptions::new()
        .ttl(Duration::from_secs(10))
        .wait(ttl + Duration::from_secs(1));
    let guard = client
        .mutex(&name)
        .lock_with(&options)
        .await
        .expect("the paused holder's lease ends and the lock is granted");
    assert!(guard.fencing_token() > paused_token);
    child.signal(Signal::Continue);
    assert_eq!(child.next_event(EVENT_WAIT), Some(ChildEvent::Lost));
    assert_eq!(
        child.next_event(EVENT_WAIT),
        Some(ChildEvent::Released {
            outcome: "not_held".into()
        })
    );
    assert_eq!(guard.health(), Health::Held);
    guard.renew().await.expect("the new holder is undisturbed");
    let state = &client.status(Some(&name)).await.unwrap()[0];
    assert_eq!(state.holders.len(), 1);
    assert_eq!(state.holders[0].fencing_token, guard.fencing_token());
}

/// A waiter whose process is killed while it waits leaves the queue within a bounded time:
/// waiters queued behind it (fair ones, where the backend has fair mode) get the lock after
/// the release, not never.
///
/// # Examples
///
/// ```ignore
/// distlock_testkit::process_suite!(target); // generates this test
/// ```
pub async fn killed_waiter_does_not_stall_the_queue(target: &Target) {
    let name = unique("dead-waiter");
    let client = target.client().await;
    let held = client.mutex(&name).lock().await.unwrap();
    let child = spawn(
        target,
        &ChildTask::Wait {
            url: target.url().to_owned(),
            name: name.clone(),
        },
    );
    assert_eq!(child.next_event(EVENT_WAIT), Some(ChildEvent::Waiting));
    super::wait_for_waiters(&client, &name, 1).await;
    child.signal(Signal::Kill);

    let behind = {
        let client = target.client().await;
        let name = name.clone();
        tokio::spawn(async move {
            let fair = client.capabilities().fair;
            let fair = LockOptions::new().fair(fair).wait(Duration::from_secs(15));
            let started = Instant::now();
            let guard = client.mutex(&name).lock_with(&fair).await;
            (guard, started.elapsed())
        })
    };
    super::wait_for_waiter_of(&client, &name, std::process::id()).await;
    held.release().await.unwrap();
    let (guard, waited) = behind.await.unwrap();
    let guard = guard.expect("the waiter behind the dead one gets the lock");
    assert!(
        waited < Duration::from_secs(10),
        "a dead waiter stalled the queue for {waited:?}"
    );
    guard.release().await.unwrap();
}
