//! Hand-offs on one Redis server: a release grants the lock at once to the head waiter and
//! tells its client, which holds it as the message arrives and confirms it with its first
//! renewal. A head waiter that was killed is passed over; one that stopped lets its short
//! claim lapse to the waiter behind it; one that gives up as the grant comes gives it back.

use std::time::{Duration, Instant};

use distlock::{Client, ErrorKind, Health, LockOptions};
use distlock_testkit::{ChildEvent, ChildProcess, ChildTask, Server, Signal};

#[path = "redis_common/stats.rs"]
mod stats;

use stats::{reset_stats, script_calls};

const CHILD: &str = "handoff_child";

#[test]
#[ignore = "runs only as a helper process of the hand-off tests"]
fn handoff_child() {
    distlock_testkit::run_child();
}

fn url(redis: &Server) -> String {
    format!("redis://{}/0", redis.addr())
}

async fn raw(redis: &Server) -> redis::aio::MultiplexedConnection {
    let client = redis::Client::open(url(redis)).unwrap();
    client.get_multiplexed_async_connection().await.unwrap()
}

/// Waits (at most 5 s) until lock `name` has `count` waiters.
async fn wait_for_waiters(client: &Client, name: &str, count: usize) {
    for _ in 0..250 {
        let state = client.status(Some(name)).await.unwrap();
        if state.first().map_or(0, |s| s.waiters.len()) == count {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("lock {name} never had {count} waiters");
}

/// A waiter that its client's process runs, queued behind `held`'s holder.
fn queued_child(redis: &Server, name: &str) -> ChildProcess {
    let task = ChildTask::Wait {
        url: url(redis),
        name: name.to_owned(),
    };
    let child = ChildProcess::spawn(CHILD, &task).unwrap();
    assert_eq!(
        child.next_event(Duration::from_secs(20)),
        Some(ChildEvent::Waiting)
    );
    child
}

/// The waiter's lock changes hands in the release's trip: the waiter runs no script to
/// take it, and, releasing it at once, none to confirm it either.
#[test]
fn a_release_hands_the_lock_to_the_head_waiter_in_one_trip() {
    distlock_testkit::block_on(async {
        let redis = distlock_testkit::redis_server().unwrap_or_else(|e| panic!("{e}"));
        let mut raw = raw(&redis).await;
        let (a, b) = (
            Client::connect(&url(&redis)).await.unwrap(),
            Client::connect(&url(&redis)).await.unwrap(),
        );
        for round in 0..5 {
            let held = a.mutex("handed").lock().await.unwrap();
            let waiting = {
                let b = b.clone();
                tokio::spawn(async move { b.mutex("handed").lock().await })
            };
            wait_for_waiters(&a, "handed", 1).await;
            reset_stats(&mut raw).await;
            let token = held.fencing_token();
            held.release().await.unwrap();
            let handed = waiting.await.unwrap().unwrap();
            assert!(handed.fencing_token() > token);
            assert_eq!(handed.health(), Health::Held);
            handed.release().await.unwrap();
            // The release's fast path (which finds a waiter), its full script (which hands
            // the lock on), and the new holder's release: no acquire, no confirmation.
            let calls = script_calls(&mut raw).await;
            assert_eq!(calls, 3, "round {round}: {calls} script calls");
        }
    });
}

/// A lock handed over is held on a short claim until the new holder's first renewal
/// confirms it for the TTL: held past the claim, it stays valid, renews, and the key lives
/// for the TTL.
#[test]
fn a_lock_handed_over_is_confirmed_for_its_ttl() {
    distlock_testkit::block_on(async {
        let redis = distlock_testkit::redis_server().unwrap_or_else(|e| panic!("{e}"));
        let mut raw = raw(&redis).await;
        let (a, b) = (
            Client::connect(&url(&redis)).await.unwrap(),
            Client::connect(&url(&redis)).await.unwrap(),
        );
        let ttl = LockOptions::new().ttl(Duration::from_secs(20));
        let held = a.mutex("confirmed").lock_with(&ttl).await.unwrap();
        let waiting = {
            let b = b.clone();
            let ttl = ttl.clone();
            tokio::spawn(async move { b.mutex("confirmed").lock_with(&ttl).await })
        };
        wait_for_waiters(&a, "confirmed", 1).await;
        held.release().await.unwrap();
        let handed = waiting.await.unwrap().unwrap();
        for _ in 0..6 {
            tokio::time::sleep(Duration::from_millis(50)).await;
            assert_eq!(handed.health(), Health::Held);
        }
        let left: i64 = redis::cmd("PTTL")
            .arg("confirmed")
            .query_async(&mut raw)
            .await
            .unwrap();
        assert!(left > 15_000, "the key lives {left} ms more");
        handed.renew().await.unwrap();
        handed.release().await.unwrap();
    });
}

/// A head waiter whose process was killed is passed over by the release that would have
/// handed it the lock (nobody listens on its client's channel): the waiter behind it gets
/// the lock at once, not after the dead one's place in the queue expires.
#[test]
fn a_killed_head_waiter_is_passed_over_at_once() {
    distlock_testkit::block_on(async {
        let redis = distlock_testkit::redis_server().unwrap_or_else(|e| panic!("{e}"));
        let (a, c) = (
            Client::connect(&url(&redis)).await.unwrap(),
            Client::connect(&url(&redis)).await.unwrap(),
        );
        let held = a.mutex("killed").lock().await.unwrap();
        let child = queued_child(&redis, "killed");
        wait_for_waiters(&a, "killed", 1).await;
        child.signal(Signal::Kill);
        let behind = {
            let c = c.clone();
            tokio::spawn(async move {
                let started = Instant::now();
                let guard = c.mutex("killed").lock().await;
                (guard, started)
            })
        };
        wait_for_waiters(&a, "killed", 2).await;
        // The server notices the killed client's connections closed.
        tokio::time::sleep(Duration::from_millis(200)).await;
        let released = Instant::now();
        held.release().await.unwrap();
        let (guard, _) = behind.await.unwrap();
        let guard = guard.unwrap();
        assert!(
            released.elapsed() < Duration::from_millis(500),
            "the waiter behind a dead one waited {:?} after the release",
            released.elapsed()
        );
        guard.release().await.unwrap();
    });
}

/// A head waiter whose process stopped is handed the lock but cannot confirm it: the claim
/// lapses, and the waiter behind, told to look then, takes the lock. The stopped one,
/// resumed, finds its grant gone and waits again, and gets the lock after.
#[test]
fn a_stopped_head_waiter_lets_its_claim_lapse_to_the_next() {
    distlock_testkit::block_on(async {
        let redis = distlock_testkit::redis_server().unwrap_or_else(|e| panic!("{e}"));
        let (a, c) = (
            Client::connect(&url(&redis)).await.unwrap(),
            Client::connect(&url(&redis)).await.unwrap(),
        );
        let held = a.mutex("stopped").lock().await.unwrap();
        let child = queued_child(&redis, "stopped");
        wait_for_waiters(&a, "stopped", 1).await;
        child.signal(Signal::Stop);
        let behind = {
            let c = c.clone();
            tokio::spawn(async move { c.mutex("stopped").lock().await })
        };
        wait_for_waiters(&a, "stopped", 2).await;
        let released = Instant::now();
        let first = held.fencing_token();
        held.release().await.unwrap();
        let guard = behind.await.unwrap().unwrap();
        let waited = released.elapsed();
        assert!(
            waited < Duration::from_secs(1),
            "the waiter behind a stopped one waited {waited:?} after the release"
        );
        assert!(guard.fencing_token() > first);
        child.signal(Signal::Continue);
        // Resumed, the stopped waiter holds nothing while the lock is taken.
        assert_eq!(child.next_event(Duration::from_millis(700)), None);
        assert_eq!(guard.health(), Health::Held);
        let token = guard.fencing_token();
        guard.release().await.unwrap();
        match child.next_event(Duration::from_secs(10)) {
            Some(ChildEvent::Acquired { fencing_token }) => assert!(fencing_token > token),
            other => panic!("the resumed waiter did not get the lock: {other:?}"),
        }
    });
}

/// A waiter that gives up (its deadline passes) while a release hands it the lock gives
/// the grant back: it is never left holding a lock nobody uses until a TTL ends.
#[test]
fn a_waiter_giving_up_as_the_lock_comes_gives_it_back() {
    distlock_testkit::block_on(async {
        let redis = distlock_testkit::redis_server().unwrap_or_else(|e| panic!("{e}"));
        let mut raw = raw(&redis).await;
        let (a, b) = (
            Client::connect(&url(&redis)).await.unwrap(),
            Client::connect(&url(&redis)).await.unwrap(),
        );
        let long = LockOptions::new().ttl(Duration::from_secs(30));
        for round in 0..30u64 {
            let held = a.mutex("given-back").lock_with(&long).await.unwrap();
            let patience = Duration::from_millis(40);
            let waiting = {
                let b = b.clone();
                let options = long.clone().wait(patience);
                tokio::spawn(async move { b.mutex("given-back").lock_with(&options).await })
            };
            // The release lands around the waiter's deadline, a little before or after.
            tokio::time::sleep(
                patience - Duration::from_millis(5) + Duration::from_micros(round * 400),
            )
            .await;
            held.release().await.unwrap();
            match waiting.await.unwrap() {
                Ok(guard) => guard.release().await.unwrap(),
                Err(err) => assert_eq!(err.kind(), ErrorKind::Timeout, "{err}"),
            }
            // Whoever had it, the lock is free again within the claim.
            let mut free = false;
            for _ in 0..50 {
                let held: bool = redis::cmd("EXISTS")
                    .arg("given-back")
                    .query_async(&mut raw)
                    .await
                    .unwrap();
                if !held {
                    free = true;
                    break;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            assert!(free, "round {round}: the lock stayed held");
        }
    });
}

/// A writer's release grants every reader queued behind it at once, up to the next
/// writer, which is told to watch their claims and gets the lock from the last reader's
/// release.
#[test]
fn a_writers_release_hands_the_lock_to_the_readers_behind_it() {
    distlock_testkit::block_on(async {
        let redis = distlock_testkit::redis_server().unwrap_or_else(|e| panic!("{e}"));
        let mut raw = raw(&redis).await;
        let a = Client::connect(&url(&redis)).await.unwrap();
        let writer = a.rwlock("shared").write().await.unwrap();
        let mut readers = Vec::new();
        for n in 1..=3 {
            let client = Client::connect(&url(&redis)).await.unwrap();
            readers.push(tokio::spawn(async move {
                client
                    .rwlock("shared")
                    .read()
                    .await
                    .map(|guard| (guard, client))
            }));
            wait_for_waiters(&a, "shared", n).await;
        }
        let next_writer = {
            let client = Client::connect(&url(&redis)).await.unwrap();
            tokio::spawn(async move { client.rwlock("shared").write().await })
        };
        wait_for_waiters(&a, "shared", 4).await;
        reset_stats(&mut raw).await;
        let token = writer.fencing_token();
        writer.release().await.unwrap();
        let mut held = Vec::new();
        for reader in readers {
            let (guard, client) = reader.await.unwrap().unwrap();
            assert!(guard.fencing_token() > token);
            held.push((guard, client));
        }
        // The writer's release (its fast path, then the full script): no reader ran one.
        assert_eq!(script_calls(&mut raw).await, 2);
        assert!(!next_writer.is_finished());
        let mut last = 0;
        for (guard, _client) in held {
            last = last.max(guard.fencing_token());
            guard.release().await.unwrap();
        }
        let writer = tokio::time::timeout(Duration::from_secs(5), next_writer)
            .await
            .expect("the writer behind the readers got the lock")
            .unwrap()
            .unwrap();
        assert!(writer.fencing_token() > last);
        writer.release().await.unwrap();
    });
}

/// Permits given back are handed to the waiters at the head of the queue whose requests
/// fit, in order; the first that does not fit waits for more.
#[test]
fn permits_given_back_are_handed_to_the_waiters_they_fit() {
    distlock_testkit::block_on(async {
        let redis = distlock_testkit::redis_server().unwrap_or_else(|e| panic!("{e}"));
        let mut raw = raw(&redis).await;
        let a = Client::connect(&url(&redis)).await.unwrap();
        let all = a.semaphore("pool", 3).acquire_many(3).await.unwrap();
        let mut waiting = Vec::new();
        for (n, permits) in [1u32, 1, 2].into_iter().enumerate() {
            let client = Client::connect(&url(&redis)).await.unwrap();
            waiting.push(tokio::spawn(async move {
                client
                    .semaphore("pool", 3)
                    .acquire_many(permits)
                    .await
                    .map(|p| (p, client))
            }));
            wait_for_waiters(&a, "pool", n + 1).await;
        }
        reset_stats(&mut raw).await;
        all.release().await.unwrap();
        let third = waiting.pop().unwrap();
        let mut fitted = Vec::new();
        for permit in waiting {
            fitted.push(permit.await.unwrap().unwrap());
        }
        // The release alone: the two that fit ran no script to take their permits.
        assert_eq!(script_calls(&mut raw).await, 1);
        assert!(!third.is_finished());
        for (permit, _client) in fitted {
            permit.release().await.unwrap();
        }
        let (permit, _client) = tokio::time::timeout(Duration::from_secs(5), third)
            .await
            .expect("the request for two permits got them")
            .unwrap()
            .unwrap();
        permit.release().await.unwrap();
    });
}
