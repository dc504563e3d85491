//! RedLock waiters: they wait in every master's queue, at the same place in each, and are
//! woken by releases, which hand the lock to the head; a head that never confirms holds it
//! up no longer than its claim. Three real Redis masters per test.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[path = "redis_common/masters.rs"]
mod masters;
#[path = "redis_common/queue.rs"]
mod queue;
#[path = "redis_common/stats.rs"]
mod stats;

use masters::{masters_with, raw_connections};
use queue::{ByHand, queue_by_hand};
use stats::{reset_stats, script_calls};

type Raw = redis::aio::MultiplexedConnection;

/// How many requests wait in lock `name`'s queue on the master behind `raw`.
async fn queued(raw: &mut Raw, name: &str) -> u64 {
    redis::cmd("ZCARD")
        .arg(format!("{{{name}}}:queue"))
        .query_async(raw)
        .await
        .unwrap()
}

/// Waits (bounded) until `counts[i]` requests wait for `name` on master `i`.
async fn until_queued(raws: &mut [Raw], name: &str, counts: &[u64]) {
    for tries in 0.. {
        assert!(tries < 250, "the waiters never queued on every master");
        let mut now = Vec::new();
        for raw in raws.iter_mut() {
            now.push(queued(raw, name).await);
        }
        if now == counts {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A waiter costs the masters nothing while it waits (no polls: a release wakes it), and
/// takes the lock once the holder releases it.
#[test]
fn a_waiter_sleeps_until_a_release_wakes_it() {
    distlock_testkit::block_on(async {
        let (servers, url) = masters_with("");
        let mut raws = raw_connections(&servers).await;
        let holder = distlock::Client::connect(&url).await.unwrap();
        let waiter = distlock::Client::connect(&url).await.unwrap();
        // Every master connected (a client starts once a majority answered).
        tokio::time::sleep(Duration::from_millis(200)).await;
        let held = holder.mutex("sleep").lock().await.unwrap();
        let first = held.fencing_token();
        let waiting = tokio::spawn(async move {
            let guard = waiter.mutex("sleep").lock().await.unwrap();
            let granted = (guard.fencing_token(), Instant::now());
            guard.release().await.unwrap();
            granted
        });
        until_queued(&mut raws, "sleep", &[1, 1, 1]).await;
        for raw in &mut raws {
            reset_stats(raw).await;
        }
        tokio::time::sleep(Duration::from_millis(600)).await;
        let mut calls = Vec::new();
        for raw in &mut raws {
            calls.push(script_calls(raw).await);
        }
        // None: a waiter refreshes its place every two seconds.
        assert!(
            calls.iter().all(|calls| *calls == 0),
            "the waiter polled while it waited: {calls:?} script calls"
        );
        let released = Instant::now();
        held.release().await.unwrap();
        let (token, granted) = tokio::time::timeout(Duration::from_secs(5), waiting)
            .await
            .expect("the release woke the waiter")
            .unwrap();
        assert!(token > first, "{token} after {first}");
        assert!(
            granted - released < Duration::from_secs(1),
            "granted {:?} after the release",
            granted - released
        );
        for raw in &mut raws {
            assert_eq!(queued(raw, "sleep").await, 0, "a queue entry was left");
        }
    });
}

/// Every master orders the waiters by when each first tried (on the client's clock), so a
/// release hands the lock to the same head everywhere: waiters are granted in the order
/// they came.
#[test]
fn waiters_are_granted_in_the_order_they_came() {
    const WAITERS: usize = 4;
    distlock_testkit::block_on(async {
        let (servers, url) = masters_with("");
        let mut raws = raw_connections(&servers).await;
        let mut clients = Vec::new();
        for _ in 0..=WAITERS {
            clients.push(distlock::Client::connect(&url).await.unwrap());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
        let held = clients[0].mutex("fifo").lock().await.unwrap();
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut tasks = Vec::new();
        for (at, client) in clients.iter().enumerate().skip(1) {
            let (client, order) = (client.clone(), order.clone());
            tasks.push(tokio::spawn(async move {
                let guard = client.mutex("fifo").lock().await.unwrap();
                order.lock().unwrap().push(at);
                tokio::time::sleep(Duration::from_millis(20)).await;
                guard.release().await.unwrap();
            }));
            let waiting = at as u64;
            until_queued(&mut raws, "fifo", &[waiting; 3]).await;
        }
        held.release().await.unwrap();
        for task in tasks {
            tokio::time::timeout(Duration::from_secs(10), task)
                .await
                .expect("every waiter was granted")
                .unwrap();
        }
        let order = order.lock().unwrap().clone();
        assert_eq!(order, (1..=WAITERS).collect::<Vec<_>>());
    });
}

/// Where the masters' heads differ, a release hands the lock to different waiters: a head
/// that got a majority but never confirms (stopped) holds the lock up for its claim, and no
/// longer; the waiter that got a minority gives its grant back and tries again until the
/// claims lapse, and is then granted. It is never granted while the silent head's claims
/// stand on a majority.
#[test]
fn a_head_that_never_confirms_holds_the_lock_up_only_for_its_claim() {
    const CLAIM: Duration = Duration::from_millis(300);
    distlock_testkit::block_on(async {
        let (servers, url) = masters_with("?handoff_claim=300ms");
        let mut raws = raw_connections(&servers).await;
        let holder = distlock::Client::connect(&url).await.unwrap();
        let waiter = distlock::Client::connect(&url).await.unwrap();
        tokio::time::sleep(Duration::from_millis(200)).await;
        let held = holder.mutex("split").lock().await.unwrap();
        let mut listening = Vec::new();
        for (server, raw) in servers.iter().zip(&mut raws).skip(1) {
            let client = redis::Client::open(format!("redis://{}/0", server.addr())).unwrap();
            let mut pubsub = client.get_async_pubsub().await.unwrap();
            pubsub.subscribe("silent-client").await.unwrap();
            listening.push(pubsub);
            // At the head (place 1, before any client's clock), listening but never
            // confirming a grant.
            let silent = ByHand {
                token: "silent-head",
                channel: "silent-client",
                place: 1,
                since_ms: 0,
                claim_ms: CLAIM.as_millis() as u64,
            };
            queue_by_hand(raw, "split", silent).await;
        }
        let waiting = tokio::spawn(async move {
            let guard = waiter.mutex("split").lock().await.unwrap();
            let granted = Instant::now();
            guard.release().await.unwrap();
            granted
        });
        until_queued(&mut raws, "split", &[1, 2, 2]).await;
        let released = Instant::now();
        held.release().await.unwrap();
        let handed: Option<String> = redis::cmd("GET")
            .arg("split")
            .query_async(&mut raws[1])
            .await
            .unwrap();
        assert!(
            handed.is_some_and(|record| record.starts_with(r#"{"t":"silent-head""#)),
            "the release handed the lock to the head"
        );
        let granted = tokio::time::timeout(Duration::from_secs(5), waiting)
            .await
            .expect("the waiter was granted once the claims lapsed")
            .unwrap();
        let waited = granted - released;
        assert!(
            waited >= CLAIM - Duration::from_millis(50),
            "granted after {waited:?}, while the silent head's claims stood"
        );
        assert!(
            waited < CLAIM * 4,
            "held up {waited:?} by a claim of {CLAIM:?}"
        );
        drop(listening);
    });
}
