//! The conformance suite, cross-process tests and quorum faults against RedLock over three
//! real Redis masters started for each test.

use std::time::{Duration, Instant};

use distlock::{ErrorKind, LockOptions};
use distlock_testkit::Server;

#[path = "redis_common/masters.rs"]
mod masters;
#[path = "redis_common/stats.rs"]
mod stats;

use masters::{masters_with, raw_connections};
use stats::{reset_stats, script_calls};

/// Three masters and the `redlock://` URL naming them.
fn masters() -> (Vec<Server>, String) {
    masters_with("")
}

async fn target() -> distlock_testkit::Target {
    let (servers, url) = masters();
    distlock_testkit::Target::new(url).keep(servers)
}

distlock_testkit::conformance_suite!(target, liveness = Lease, lacks = [rwlock, semaphore, fair]);
distlock_testkit::process_suite!(target);

/// Masters that lost their counters (a replica promoted before it had the last grants)
/// still give a token above every one granted before: each grant's token is raised to the
/// client's clock where a master's counter is behind it.
#[test]
fn masters_whose_counters_fell_behind_still_give_a_greater_token() {
    distlock_testkit::block_on(async {
        let (servers, url) = masters();
        let client = distlock::Client::connect(&url).await.unwrap();
        let held = client.mutex("job").lock().await.unwrap();
        let first = held.fencing_token();
        held.release().await.unwrap();
        let mut raws = raw_connections(&servers).await;
        set_counters(&mut raws, first - 100, &["KEEPTTL"]).await;
        let next = client.mutex("job").lock().await.unwrap();
        assert!(
            next.fencing_token() > first,
            "{} after {first}",
            next.fencing_token()
        );
        next.release().await.unwrap();
    });
}

/// Masters whose counters ran ahead of this client's clock (another client's clock is
/// ahead, or a master's counter was bumped by breaks) count on from their counters: the
/// token is above every counter, the counters are left at it, and a counter's lifetime is
/// kept. A counter never seeded (below 10^12) is seeded from the clock.
#[test]
fn masters_whose_counters_ran_ahead_of_the_clock_count_on_from_them() {
    distlock_testkit::block_on(async {
        let (servers, url) = masters();
        let client = distlock::Client::connect(&url).await.unwrap();
        let held = client.mutex("job").lock().await.unwrap();
        let first = held.fencing_token();
        held.release().await.unwrap();
        let counter = distlock::redis::fencing_counter_key("", "job").unwrap();
        // An hour ahead on every master.
        let ahead = first + 3_600_000_000;
        let mut raws = raw_connections(&servers).await;
        set_counters(&mut raws, ahead, &["PX", "86400000"]).await;
        let next = client.mutex("job").lock().await.unwrap();
        let token = next.fencing_token();
        assert_eq!(token, ahead + 1, "counted on from counters at {ahead}");
        // The acquire's call to a master that answered after the majority.
        assert!(client.settle(Duration::from_secs(5)).await);
        for raw in &mut raws {
            let (count, ttl): (u64, i64) = redis::pipe()
                .get(&counter)
                .pttl(&counter)
                .query_async(raw)
                .await
                .unwrap();
            assert_eq!(count, token, "each master's counter is left at the token");
            assert!(ttl > 80_000_000, "the counter's lifetime is kept: {ttl} ms");
        }
        next.release().await.unwrap();
        // Never seeded: counted afresh from the clock, not from 5.
        set_counters(&mut raws, 5, &[]).await;
        let seeded = client.mutex("job").lock().await.unwrap();
        assert!(
            seeded.fencing_token() >= first,
            "{} after {first}",
            seeded.fencing_token()
        );
        seeded.release().await.unwrap();
    });
}

/// One acquire tries every master with one least token (the client's clock), so masters
/// whose counters are behind it give the same token and none needs stamping with the
/// agreed one afterwards: an uncontended cycle costs each master two script calls, its
/// acquire and its release (a few more where a try must start again).
#[test]
fn an_uncontended_cycle_costs_each_master_two_calls() {
    const CYCLES: u64 = 100;
    distlock_testkit::block_on(async {
        let (servers, url) = masters();
        let client = distlock::Client::connect(&url).await.unwrap();
        let mut raws = raw_connections(&servers).await;
        // Until every master took part in whole cycles (a client starts once a majority
        // answered and connects the rest on the side; taking part sends a master the
        // acquire's and the release's scripts).
        for tries in 0.. {
            assert!(tries < 100, "a master never took part");
            let guard = client.mutex("cycle").lock().await.unwrap();
            guard.release().await.unwrap();
            let mut all = true;
            for raw in &mut raws {
                all &= script_calls(raw).await >= 4;
            }
            if all {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        // A late master's stamp of the last lands before the count starts.
        tokio::time::sleep(Duration::from_millis(200)).await;
        for raw in &mut raws {
            reset_stats(raw).await;
        }
        let mut tokens = Vec::new();
        for _ in 0..CYCLES {
            let guard = client.mutex("cycle").lock().await.unwrap();
            tokens.push(guard.fencing_token());
            guard.release().await.unwrap();
        }
        assert!(
            tokens.windows(2).all(|pair| pair[0] < pair[1]),
            "{tokens:?}"
        );
        // Late answers are stamped on a task of their own: give them a moment.
        tokio::time::sleep(Duration::from_millis(200)).await;
        let mut calls = Vec::new();
        for raw in &mut raws {
            calls.push(script_calls(raw).await);
        }
        // Two a cycle on each master, and a few more where a loaded machine made a try
        // run out of time and start again; stamping the masters that gave another token
        // took one more a cycle on most cycles.
        let ideal = 2 * CYCLES * raws.len() as u64;
        assert!(
            calls.iter().sum::<u64>() <= ideal + ideal / 12,
            "{calls:?} script calls for {CYCLES} cycles"
        );
    });
}

/// A release answers once a majority released; its call to a slower master goes on in the
/// background, and `settle` (which `close` and `distlock run` call before they end) waits
/// for it, so a program that exits then does not drop it and leave that master holding
/// the lock for its TTL.
#[test]
fn settle_waits_for_the_release_on_a_slower_master() {
    distlock_testkit::block_on(async {
        let (servers, url) = masters();
        let client = distlock::Client::connect(&url).await.unwrap();
        // Every master connected (a client starts once a majority answered).
        tokio::time::sleep(Duration::from_millis(200)).await;
        let guard = client.mutex("tail").lock().await.unwrap();
        let raw = redis::Client::open(format!("redis://{}/0", servers[2].addr())).unwrap();
        let mut raw = raw.get_multiplexed_async_connection().await.unwrap();
        // The third master answers nobody for a while.
        let _: () = redis::cmd("CLIENT")
            .arg("PAUSE")
            .arg(400)
            .query_async(&mut raw)
            .await
            .unwrap();
        guard.release().await.unwrap();
        let settling = Instant::now();
        assert!(client.settle(Duration::from_secs(5)).await);
        assert!(
            settling.elapsed() >= Duration::from_millis(100),
            "settle waited for the third master's release: {:?}",
            settling.elapsed()
        );
        client.close().await.unwrap();
    });
}

/// A client that starts once a majority of masters answered connects the rest on the
/// side, and no call waits for that connect: calls queued behind it could reach the master
/// in another order than made (a release before its acquire), leaving it holding a grant
/// nobody has until its TTL. New clients each take a lock a few times at once after
/// connecting: every master is free after each.
#[test]
fn a_master_connected_late_is_left_no_grant() {
    distlock_testkit::block_on(async {
        let (servers, url) = masters();
        let mut raws = raw_connections(&servers).await;
        for round in 0..10 {
            let client = distlock::Client::connect(&url).await.unwrap();
            let name = format!("first/{round}");
            for _ in 0..5 {
                client
                    .mutex(&name)
                    .lock()
                    .await
                    .unwrap()
                    .release()
                    .await
                    .unwrap();
            }
            assert!(client.settle(Duration::from_secs(5)).await);
            for (at, raw) in raws.iter_mut().enumerate() {
                let left: bool = redis::cmd("EXISTS")
                    .arg(&name)
                    .query_async(raw)
                    .await
                    .unwrap();
                assert!(!left, "round {round}: master {at} kept a released grant");
            }
            client.close().await.unwrap();
        }
    });
}

#[test]
fn semaphores_and_fair_mode_are_refused_as_unsupported() {
    distlock_testkit::block_on(async {
        let (_servers, url) = masters();
        let client = distlock::Client::connect(&url).await.unwrap();
        let err = client.semaphore("pool", 2).try_acquire().await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Unsupported, "{err}");
        let fair = LockOptions::new().fair(true);
        let err = client.mutex("m").lock_with(&fair).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Unsupported, "{err}");
    });
}

/// Sets the fencing counter of lock `job` to `value` on every master of `raws`, with the
/// `SET` options `options`.
async fn set_counters(
    raws: &mut [redis::aio::MultiplexedConnection],
    value: u64,
    options: &[&str],
) {
    let counter = distlock::redis::fencing_counter_key("", "job").unwrap();
    for raw in raws {
        redis::cmd("SET")
            .arg(&counter)
            .arg(value)
            .arg(options)
            .query_async::<()>(raw)
            .await
            .unwrap();
    }
}

/// Waits until each of `clients` has every master connected. A client starts once a
/// majority answered and connects the rest on the side: a test that stops a master must
/// not, on a busy machine, leave a client one master short of a majority.
async fn connect_every_master(clients: &[&distlock::Client]) {
    for client in clients {
        let backend = distlock::backend::backend_of(client);
        backend.floor().unwrap().round().await.unwrap();
    }
}

#[test]
fn a_minority_of_masters_down_still_grants_and_excludes() {
    distlock_testkit::block_on(async {
        let (mut servers, url) = masters();
        let (a, b) = (
            distlock::Client::connect(&url).await.unwrap(),
            distlock::Client::connect(&url).await.unwrap(),
        );
        connect_every_master(&[&a, &b]).await;
        let before = a.mutex("job").lock().await.unwrap();
        let first = before.fencing_token();
        before.release().await.unwrap();
        servers[0].kill();
        let held = a.mutex("job").lock().await.unwrap();
        assert!(held.fencing_token() > first);
        assert!(b.mutex("job").try_lock().await.unwrap().is_none());
        held.renew().await.unwrap();
        held.release().await.unwrap();
        let next = b
            .mutex("job")
            .try_lock()
            .await
            .unwrap()
            .expect("free again");
        assert!(next.fencing_token() > first);
        next.release().await.unwrap();
    });
}

#[test]
fn a_majority_of_masters_down_fails_with_quorum_not_reached_within_the_deadline() {
    distlock_testkit::block_on(async {
        let (mut servers, url) = masters();
        let client = distlock::Client::connect(&url).await.unwrap();
        let held = client.mutex("job").lock().await.unwrap();
        servers[0].kill();
        servers[1].kill();
        let started = Instant::now();
        let wait = LockOptions::new().wait(Duration::from_secs(3));
        let err = client.mutex("other").lock_with(&wait).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::QuorumNotReached, "{err}");
        assert!(started.elapsed() < Duration::from_secs(3));
        let renewed = held.renew().await.unwrap_err();
        assert!(
            matches!(
                renewed.kind(),
                ErrorKind::QuorumNotReached | ErrorKind::LockLost
            ),
            "{renewed}"
        );
    });
}

#[test]
fn a_master_paused_past_the_ttl_and_resumed_gives_no_second_holder() {
    distlock_testkit::block_on(async {
        let (servers, url) = masters();
        let (a, b) = (
            distlock::Client::connect(&url).await.unwrap(),
            distlock::Client::connect(&url).await.unwrap(),
        );
        connect_every_master(&[&a, &b]).await;
        let ttl = LockOptions::new().ttl(Duration::from_millis(800));
        let held = a.mutex("job").lock_with(&ttl).await.unwrap();
        servers[2].pause();
        tokio::time::sleep(Duration::from_millis(1500)).await;
        assert!(
            held.health().is_valid(),
            "renewed by the two live masters: {:?}",
            held.health()
        );
        servers[2].resume();
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(b.mutex("job").try_lock().await.unwrap().is_none());
        let token = held.fencing_token();
        held.release().await.unwrap();
        let next = b.mutex("job").lock_with(&ttl).await.unwrap();
        assert!(next.fencing_token() > token);
        next.release().await.unwrap();
    });
}

#[test]
fn redlocks_reaches_every_master_over_tls_and_passwords_stay_hidden() {
    distlock_testkit::block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let certs =
            distlock_testkit::TestCertificates::make(dir.path()).unwrap_or_else(|e| panic!("{e}"));
        let masters: Vec<Server> = (0..3)
            .map(|_| distlock_testkit::redis_tls_server(&certs).unwrap_or_else(|e| panic!("{e}")))
            .collect();
        let hosts: Vec<String> = masters.iter().map(|s| s.addr().to_string()).collect();
        let url = format!(
            "redlocks://{}/0?tls_ca={}",
            hosts.join(","),
            certs.ca.display()
        );
        let client = distlock::Client::connect(&url).await.unwrap();
        let guard = client.mutex("tls").lock().await.unwrap();
        assert!(client.mutex("tls").try_lock().await.unwrap().is_none());
        guard.release().await.unwrap();

        let untrusted = format!("redlocks://:hunter2@{}/0", hosts.join(","));
        let err = distlock::Client::connect(&untrusted).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::QuorumNotReached, "{err}");
        assert!(!format!("{err} {err:?}").contains("hunter2"), "{err:?}");
    });
}

/// A master that lost its scripts (restarted, or flushed) is given them all back by the
/// first call that meets the loss, which is then sent again; a release on that master
/// waits for that acquire to end: sent after it, the acquire could reach the master after
/// the release, and leave it holding a grant nobody has until its TTL. The masters take
/// part in every cycle after.
#[test]
fn a_master_that_lost_its_scripts_is_left_no_grant() {
    distlock_testkit::block_on(async {
        let (servers, url) = masters();
        let mut raws = raw_connections(&servers).await;
        let client = distlock::Client::connect(&url).await.unwrap();
        // Every master connected (a client starts once a majority answered).
        tokio::time::sleep(Duration::from_millis(200)).await;
        for round in 0..6 {
            for raw in &mut raws[round % 2..round % 2 + 2] {
                let _: () = redis::cmd("SCRIPT")
                    .arg("FLUSH")
                    .query_async(raw)
                    .await
                    .unwrap();
            }
            let names: Vec<String> = (0..4).map(|n| format!("flushed/{round}/{n}")).collect();
            let cycles = names.iter().map(|name| {
                let client = client.clone();
                async move {
                    for _ in 0..3 {
                        let guard = client.mutex(name).lock().await.unwrap();
                        guard.release().await.unwrap();
                    }
                }
            });
            futures_util::future::join_all(cycles).await;
            assert!(client.settle(Duration::from_secs(5)).await);
            for (at, raw) in raws.iter_mut().enumerate() {
                for name in &names {
                    let left: bool = redis::cmd("EXISTS")
                        .arg(name)
                        .query_async(raw)
                        .await
                        .unwrap();
                    assert!(!left, "round {round}: master {at} kept a grant of {name}");
                }
            }
        }
        // The masters take part again: one cycle runs its acquire and release on each.
        for raw in &mut raws {
            reset_stats(raw).await;
        }
        client
            .mutex("after")
            .lock()
            .await
            .unwrap()
            .release()
            .await
            .unwrap();
        assert!(client.settle(Duration::from_secs(5)).await);
        for raw in &mut raws {
            assert!(script_calls(raw).await >= 2);
        }
        client.close().await.unwrap();
    });
}
