//! The conformance suite, cross-process tests and process faults against a real Redis
//! started for each test.

async fn target() -> distlock_testkit::Target {
    let redis = distlock_testkit::redis_server().unwrap_or_else(|e| panic!("{e}"));
    let url = format!("redis://{}/0", redis.addr());
    distlock_testkit::Target::new(url).keep(redis)
}

distlock_testkit::conformance_suite!(target, liveness = Lease);
distlock_testkit::process_suite!(target);

#[path = "redis_faults/links.rs"]
mod links;
#[path = "redis_common/queue.rs"]
mod queue;

use std::time::Duration;

use futures_util::StreamExt;

use distlock::{ErrorKind, Health, LockOptions};
use queue::{ByHand, queue_by_hand};

/// A resource that applies a write only with a fencing token newer than the last one it
/// applied — what a store guarded by distlock should do.
#[derive(Debug, Default)]
struct FencedResource {
    last_token: u64,
    writes: Vec<&'static str>,
}

impl FencedResource {
    fn write(&mut self, token: u64, what: &'static str) -> bool {
        if token <= self.last_token {
            return false;
        }
        self.last_token = token;
        self.writes.push(what);
        true
    }
}

#[test]
fn redis_paused_past_the_ttl_loses_the_lease_before_anyone_else_gets_it() {
    distlock_testkit::block_on(async {
        let redis = distlock_testkit::redis_server().unwrap_or_else(|e| panic!("{e}"));
        let url = format!("redis://{}/0", redis.addr());
        distlock_testkit::lose_to_a_paused_server(&url, &redis, "paused").await;
    });
}

#[test]
fn redis_restarted_without_persistence_can_grant_twice_and_fencing_rejects_the_stale_write() {
    distlock_testkit::block_on(async {
        let mut redis = distlock_testkit::redis_server().unwrap_or_else(|e| panic!("{e}"));
        let url = format!("redis://{}/0", redis.addr());
        let a = distlock::Client::connect(&url).await.unwrap();
        let b = distlock::Client::connect(&url).await.unwrap();
        let stale = a.mutex("restart").lock().await.unwrap();

        redis.restart().unwrap();

        // Redis forgot the lock: a second client is granted it while the first still holds
        // its guard. This is the documented hazard of a Redis without persistence.
        let fresh = b
            .mutex("restart")
            .lock_timeout(Duration::from_secs(10))
            .await
            .expect("the restarted server grants the lock again");
        assert!(
            fresh.fencing_token() > stale.fencing_token(),
            "tokens keep increasing across the restart: {} then {}",
            stale.fencing_token(),
            fresh.fencing_token()
        );

        let mut resource = FencedResource::default();
        assert!(resource.write(fresh.fencing_token(), "new holder"));
        assert!(
            !resource.write(stale.fencing_token(), "stale holder"),
            "the stale holder's write is rejected by its older token"
        );
        assert_eq!(resource.writes, ["new holder"]);

        assert_eq!(stale.renew().await.unwrap_err().kind(), ErrorKind::NotHeld);
        assert_eq!(stale.health(), Health::Lost);
        fresh.release().await.unwrap();
    });
}

#[test]
fn a_client_cut_off_goes_at_risk_then_lost_before_the_server_ttl_ends() {
    distlock_testkit::block_on(links::lost_before_the_server_ttl_ends(
        "",
        distlock_testkit::ProxyMode::Cut,
    ));
}

#[test]
fn a_black_holed_client_goes_at_risk_then_lost_before_the_server_ttl_ends() {
    distlock_testkit::block_on(links::lost_before_the_server_ttl_ends(
        "",
        distlock_testkit::ProxyMode::BlackHole,
    ));
}

#[test]
fn acl_users_connect_and_passwords_never_show() {
    distlock_testkit::block_on(async {
        let redis = distlock_testkit::redis_server_with(&[
            "--user",
            "default",
            "off",
            "--user",
            "locker",
            "on",
            ">s3cret-pw",
            "~*",
            "&*",
            "+@all",
        ])
        .unwrap_or_else(|e| panic!("{e}"));
        let good = format!("redis://locker:s3cret-pw@{}/0", redis.addr());
        let client = distlock::Client::connect(&good).await.unwrap();
        assert!(!format!("{client:?}").contains("s3cret-pw"), "{client:?}");
        let guard = client.mutex("acl").lock().await.unwrap();
        guard.release().await.unwrap();

        let bad = format!("redis://locker:wrong-pw@{}/0", redis.addr());
        let err = distlock::Client::connect(&bad).await.unwrap_err();
        let shown = format!("{err} {err:?}");
        assert!(!shown.contains("wrong-pw"), "{shown}");
        // The server answered and refused the URL's credentials: bad input, not an outage.
        assert_eq!(err.kind(), ErrorKind::InvalidInput, "{shown}");
    });
}

#[test]
fn bookkeeping_of_abandoned_locks_expires() {
    distlock_testkit::block_on(async {
        let redis = distlock_testkit::redis_server().unwrap_or_else(|e| panic!("{e}"));
        // Fencing counters too, a second after they were seeded.
        let url = format!("redis://{}/0?fence_ttl=1s", redis.addr());
        let client = distlock::Client::connect(&url).await.unwrap();
        let short = LockOptions::new()
            .ttl(Duration::from_millis(300))
            .auto_renew(false);
        std::mem::forget(
            client
                .semaphore("left", 2)
                .acquire_with(1, &short)
                .await
                .unwrap(),
        );
        let reader = client.rwlock("left-read").with_options(short.clone());
        std::mem::forget(reader.try_read().await.unwrap().expect("a free lock"));
        // A holder abandoned without renewal, then a waiter queued behind it that gives up.
        let holder = client.mutex("queued").lock_with(&short).await.unwrap();
        let gave_up = client
            .mutex("queued")
            .lock_timeout(Duration::from_millis(200))
            .await;
        assert_eq!(gave_up.unwrap_err().kind(), ErrorKind::Timeout);
        std::mem::forget(holder);

        let raw = redis::Client::open(url.as_str()).unwrap();
        let mut conn = raw.get_multiplexed_async_connection().await.unwrap();
        let mut left: Vec<String> = Vec::new();
        for _ in 0..150 {
            left = redis::cmd("KEYS")
                .arg("*")
                .query_async(&mut conn)
                .await
                .unwrap();
            if left.is_empty() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(
            left.is_empty(),
            "keys outlived every lease and waiter: {left:?}"
        );
    });
}

/// The fencing counter a name counts on (its slot's) lives `fence_ttl` after it was seeded,
/// and tokens still only grow across the counter's expiry, a restart that lost it, and its
/// deletion by hand (each time it is seeded again from the server's clock).
#[test]
fn fencing_counters_expire_and_tokens_still_only_grow() {
    distlock_testkit::block_on(async {
        let mut redis = distlock_testkit::redis_server().unwrap_or_else(|e| panic!("{e}"));
        let url = format!("redis://{}/0?fence_ttl=2s", redis.addr());
        let counter = distlock::redis::fencing_counter_key("", "orders/1").unwrap();
        let counter = counter.as_str();
        let mut tokens = Vec::new();
        for step in ["first", "expired", "restarted", "deleted"] {
            let raw = redis::Client::open(format!("redis://{}/0", redis.addr())).unwrap();
            let mut conn = raw.get_multiplexed_async_connection().await.unwrap();
            match step {
                "expired" => {
                    let mut exists = true;
                    for _ in 0..50 {
                        exists = redis::cmd("EXISTS")
                            .arg(counter)
                            .query_async(&mut conn)
                            .await
                            .unwrap();
                        if !exists {
                            break;
                        }
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                    assert!(!exists, "the idle counter expired");
                }
                "restarted" => redis.restart().unwrap(),
                "deleted" => {
                    let _: () = redis::cmd("DEL")
                        .arg(counter)
                        .query_async(&mut conn)
                        .await
                        .unwrap();
                }
                _ => {}
            }
            let client = distlock::Client::connect(&url).await.unwrap();
            let guard = client.mutex("orders/1").lock().await.unwrap();
            tokens.push((step, "mutex", guard.fencing_token()));
            guard.release().await.unwrap();
            let reader = client.rwlock("orders/1").read().await.unwrap();
            tokens.push((step, "read", reader.fencing_token()));
            reader.release().await.unwrap();
            if step == "first" {
                let raw = redis::Client::open(format!("redis://{}/0", redis.addr())).unwrap();
                let mut conn = raw.get_multiplexed_async_connection().await.unwrap();
                let pttl: i64 = redis::cmd("PTTL")
                    .arg(counter)
                    .query_async(&mut conn)
                    .await
                    .unwrap();
                assert!(
                    (1..=2000).contains(&pttl),
                    "the counter has a lifetime: {pttl}"
                );
            }
        }
        assert!(
            tokens.windows(2).all(|w| w[0].2 < w[1].2),
            "tokens of one name only grow: {tokens:?}"
        );
    });
}

#[test]
fn rediss_connects_over_tls_trusting_the_given_authority() {
    distlock_testkit::block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let certs =
            distlock_testkit::TestCertificates::make(dir.path()).unwrap_or_else(|e| panic!("{e}"));
        let redis = distlock_testkit::redis_tls_server(&certs).unwrap_or_else(|e| panic!("{e}"));
        let url = format!("rediss://{}/0?tls_ca={}", redis.addr(), certs.ca.display());
        let client = distlock::Client::connect(&url).await.unwrap();
        let guard = client.mutex("tls").lock().await.unwrap();
        assert!(client.mutex("tls").try_lock().await.unwrap().is_none());
        guard.release().await.unwrap();

        let untrusted = distlock::Client::connect(&format!("rediss://{}/0", redis.addr())).await;
        assert!(
            untrusted.is_err(),
            "a server no trusted authority signed is refused"
        );
        let plain = distlock::Client::connect(&format!("redis://{}/0", redis.addr())).await;
        assert!(plain.is_err(), "plain text to a TLS port fails");
    });
}

/// The `HGET` calls the server ran since its statistics were last reset: the acquire and
/// release scripts read a waiter's record with one each.
async fn record_reads(conn: &mut redis::aio::MultiplexedConnection) -> u64 {
    let stats: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(conn)
        .await
        .unwrap();
    stats
        .lines()
        .find_map(|line| line.strip_prefix("cmdstat_hget:calls="))
        .and_then(|rest| rest.split(',').next())
        .map_or(0, |calls| calls.parse().unwrap())
}

/// Queues `waiters` requests behind a held grant of lock `name`, made by `acquire`; then
/// releases it and lets every waiter take its turn. Answers the waiter records the server
/// read for those hand-offs, after checking each waiter got a fencing token of its own.
async fn records_read_for_hand_offs<F, Fut>(name: &str, waiters: usize, acquire: F) -> u64
where
    F: Fn(distlock::Client, LockOptions) -> Fut,
    Fut: std::future::Future<Output = distlock::Result<distlock::Guard>> + Send + 'static,
{
    let redis = distlock_testkit::redis_server().unwrap_or_else(|e| panic!("{e}"));
    let url = format!("redis://{}/0", redis.addr());
    let client = distlock::Client::connect(&url).await.unwrap();
    let raw = redis::Client::open(url.as_str()).unwrap();
    let mut conn = raw.get_multiplexed_async_connection().await.unwrap();
    let holder = acquire(client.clone(), LockOptions::new()).await.unwrap();
    let patient = LockOptions::new().wait(Duration::from_secs(20));
    let tasks: Vec<_> = (0..waiters)
        .map(|_| {
            let granted = acquire(client.clone(), patient.clone());
            tokio::spawn(async move {
                let guard = granted.await?;
                let token = guard.fencing_token();
                guard.release().await.map(|()| token)
            })
        })
        .collect();
    let mut queued = 0;
    for _ in 0..200 {
        let state = client.status(Some(name)).await.unwrap();
        queued = state.first().map_or(0, |s| s.waiters.len());
        if queued == waiters {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert_eq!(queued, waiters, "every waiter queued before the hand-offs");
    let _: () = redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query_async(&mut conn)
        .await
        .unwrap();
    holder.release().await.unwrap();
    let mut tokens = Vec::new();
    for task in tasks {
        tokens.push(task.await.unwrap().unwrap());
    }
    tokens.sort_unstable();
    tokens.dedup();
    assert_eq!(tokens.len(), waiters, "every waiter got a token of its own");
    record_reads(&mut conn).await
}

#[test]
fn a_hand_off_costs_the_same_however_long_the_queue() {
    distlock_testkit::block_on(async {
        let waiters = 40;
        // A hand-off reads the head's record when the holder releases and when the head
        // polls; a semaphore grant also wakes the next waiter, which finds no room and
        // refreshes its place: about 5 reads. Reading the queue up to the poller, as
        // before, cost about 29 per hand-off here.
        let bound = 8 * waiters as u64 + 10;
        let reads = records_read_for_hand_offs("queue-m", waiters, |client, options| async move {
            client.mutex("queue-m").lock_with(&options).await
        })
        .await;
        assert!(
            reads <= bound,
            "mutex: {reads} records read for {waiters} hand-offs"
        );
        let reads = records_read_for_hand_offs("queue-s", waiters, |client, options| async move {
            client
                .semaphore("queue-s", 1)
                .acquire_with(1, &options)
                .await
        })
        .await;
        assert!(
            reads <= bound,
            "semaphore: {reads} records read for {waiters} hand-offs"
        );
    });
}

/// A distlock client of `redis`, and a plain connection to look at its keys with.
async fn client_and_raw_connection(
    redis: &distlock_testkit::Server,
) -> (distlock::Client, redis::aio::MultiplexedConnection) {
    client_with_and_raw_connection(redis, "").await
}

/// [`client_and_raw_connection`] with the client's URL query `query`.
async fn client_with_and_raw_connection(
    redis: &distlock_testkit::Server,
    query: &str,
) -> (distlock::Client, redis::aio::MultiplexedConnection) {
    let url = format!("redis://{}/0", redis.addr());
    let client = distlock::Client::connect(&format!("{url}{query}"))
        .await
        .unwrap();
    let raw = redis::Client::open(url.as_str()).unwrap();
    (
        client,
        raw.get_multiplexed_async_connection().await.unwrap(),
    )
}

/// The lock's key holds our holder record, our request token first: one key per grant, read
/// by `status`, renewed and deleted as ours. A key another Redis lock client set holds its
/// bare token, and `status` shows it as a foreign holder that excludes us.
#[test]
fn the_lock_key_holds_our_holder_record_and_a_foreign_token_shows_as_foreign() {
    distlock_testkit::block_on(async {
        let redis = distlock_testkit::redis_server().unwrap_or_else(|e| panic!("{e}"));
        let (client, mut conn) = client_and_raw_connection(&redis).await;

        let guard = client
            .mutex("record")
            .lock_with(&LockOptions::new().ttl(Duration::from_secs(2)))
            .await
            .unwrap();
        let value: String = redis::cmd("GET")
            .arg("record")
            .query_async(&mut conn)
            .await
            .unwrap();
        assert!(value.starts_with("{\"t\":\""), "{value}");
        let record: serde_json::Value = serde_json::from_str(&value).unwrap();
        assert_eq!(record["f"], guard.fencing_token().to_string());
        assert_eq!(record["k"], "mutex");
        guard.renew().await.unwrap();
        let pttl: i64 = redis::cmd("PTTL")
            .arg("record")
            .query_async(&mut conn)
            .await
            .unwrap();
        assert!(
            pttl > 1000,
            "the renewal extended the record's key: {pttl} ms left"
        );
        let state = &client.status(Some("record")).await.unwrap()[0];
        assert_eq!(state.holders.len(), 1);
        assert_eq!(state.holders[0].fencing_token, guard.fencing_token());
        assert_eq!(state.holders[0].owner, guard.owner().as_str());
        guard.release().await.unwrap();
        let gone: Option<String> = redis::cmd("GET")
            .arg("record")
            .query_async(&mut conn)
            .await
            .unwrap();
        assert_eq!(gone, None, "release deleted the key");

        let _: () = redis::cmd("SET")
            .arg("record")
            .arg("redis-py-token")
            .arg("PX")
            .arg(5000)
            .query_async(&mut conn)
            .await
            .unwrap();
        assert!(client.mutex("record").try_lock().await.unwrap().is_none());
        let state = &client.status(Some("record")).await.unwrap()[0];
        assert_eq!(state.holders.len(), 1);
        assert_eq!(
            state.holders[0].owner,
            "foreign client (token redis-py-token)"
        );
    });
}

/// A grant's fencing token goes into its record in whole decimal digits, whatever its
/// size (a first try of plain commands' at the first renewal), and the record shows the
/// token the holder was given. A counter below 10^12 was never seeded: the grant seeds it
/// from the server's clock.
#[test]
fn a_grant_records_its_fencing_token_whole_whatever_its_size() {
    distlock_testkit::block_on(async {
        let redis = distlock_testkit::redis_server().unwrap_or_else(|e| panic!("{e}"));
        for query in ["", "?first_try=commands"] {
            grant_records_its_fencing_token_whole(&redis, query).await;
        }
    });
}

async fn grant_records_its_fencing_token_whole(redis: &distlock_testkit::Server, query: &str) {
    let (client, mut conn) = client_with_and_raw_connection(redis, query).await;
    let before_us = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_micros() as u64;
    let counters = [
        41_u64,
        999_999_999_990,
        999_999_999_999,
        4_000_000_000_000_000,
        9_007_199_254_740_000,
    ];
    for last in counters {
        let _: () = redis::cmd("SET")
            .arg(distlock::redis::fencing_counter_key("", "sized").unwrap())
            .arg(last)
            .query_async(&mut conn)
            .await
            .unwrap();
        let guard = client.mutex("sized").lock().await.unwrap();
        if last + 1 < 1_000_000_000_000 {
            // Never seeded: seeded at the server's clock, a second's slack for a machine
            // whose clocks differ.
            assert!(guard.fencing_token() > before_us - 1_000_000, "seeded");
        } else {
            assert_eq!(guard.fencing_token(), last + 1);
        }
        guard.renew().await.unwrap();
        let record = record_of(&mut conn, "sized").await;
        assert_eq!(record["f"], guard.fencing_token().to_string(), "{record}");
        guard.release().await.unwrap();
    }
}

/// The holder record under lock key `key`.
async fn record_of(conn: &mut redis::aio::MultiplexedConnection, key: &str) -> serde_json::Value {
    let value: String = redis::cmd("GET").arg(key).query_async(conn).await.unwrap();
    serde_json::from_str(&value).unwrap()
}

/// Queues a waiter for `name` by hand, as a distlock client would: not fair, waiting since
/// `since_ms` (server clock), listening on channel `nobody-listens`, taking no hand-offs.
async fn queue_waiter(conn: &mut redis::aio::MultiplexedConnection, name: &str, since_ms: u64) {
    let place: u64 = redis::cmd("INCR")
        .arg(format!("{{{name}}}:seq"))
        .query_async(&mut *conn)
        .await
        .unwrap();
    let waiter = ByHand {
        token: "queued-by-hand",
        channel: "nobody-listens",
        place,
        since_ms,
        claim_ms: 0,
    };
    queue_by_hand(conn, name, waiter).await;
}

/// A first try of plain commands (`first_try=commands`) writes the holder record without
/// the fencing token, counted after it: `status` shows token 0 until the first renewal
/// writes it in, once; a note written under the grant writes it in too.
#[test]
fn a_first_try_of_commands_writes_the_token_in_at_the_first_renewal_or_note() {
    distlock_testkit::block_on(async {
        let redis = distlock_testkit::redis_server().unwrap_or_else(|e| panic!("{e}"));
        let (client, mut conn) =
            client_with_and_raw_connection(&redis, "?first_try=commands").await;
        let guard = client.mutex("renewed").lock().await.unwrap();
        let record = record_of(&mut conn, "renewed").await;
        assert!(record.get("f").is_none(), "counted after the SET: {record}");
        let state = &client.status(Some("renewed")).await.unwrap()[0];
        assert_eq!(state.holders[0].fencing_token, 0, "not written in yet");
        guard.renew().await.unwrap();
        let record = record_of(&mut conn, "renewed").await;
        assert_eq!(record["f"], guard.fencing_token().to_string());
        guard.renew().await.unwrap();
        assert_eq!(
            record_of(&mut conn, "renewed").await,
            record,
            "written in once"
        );
        let state = &client.status(Some("renewed")).await.unwrap()[0];
        assert_eq!(state.holders[0].fencing_token, guard.fencing_token());
        guard.release().await.unwrap();

        let election = client.election("noted").identity("first");
        let leading = election.campaign().await.unwrap();
        let leader = election
            .leader()
            .await
            .unwrap()
            .expect("its note names its token");
        assert_eq!(leader.term, leading.term());
        let record = record_of(&mut conn, "noted").await;
        assert_eq!(record["f"], leading.term().to_string());
    });
}

/// A first try of plain commands takes a free lock and keeps it only where nobody queued
/// for it; where someone did, the full script takes the try's record back and decides: a
/// fair request, or any request behind a starving waiter, is refused and leaves the lock
/// free for the waiter; a request that may overtake a waiter that is not starving gets the
/// lock, with its token in its record at once.
#[test]
fn a_first_try_that_finds_a_queue_lets_the_queue_decide() {
    distlock_testkit::block_on(async {
        let redis = distlock_testkit::redis_server().unwrap_or_else(|e| panic!("{e}"));
        let (client, mut conn) =
            client_with_and_raw_connection(&redis, "?first_try=commands").await;
        let (secs, _): (u64, u64) = redis::cmd("TIME").query_async(&mut conn).await.unwrap();
        let now_ms = secs * 1000;

        // The waiter's channel, where a release (or a lock taken back) wakes it.
        let subscriber = redis::Client::open(format!("redis://{}/0", redis.addr())).unwrap();
        let mut pubsub = subscriber.get_async_pubsub().await.unwrap();
        pubsub.subscribe("nobody-listens").await.unwrap();
        queue_waiter(&mut conn, "fair", now_ms).await;
        let fair = LockOptions::new().fair(true);
        let tried = client.mutex("fair").with_options(fair).try_lock().await;
        assert!(tried.unwrap().is_none(), "the waiter goes first");
        let woken = tokio::time::timeout(Duration::from_secs(2), pubsub.on_message().next())
            .await
            .expect("the lock taken back goes to the waiter")
            .unwrap();
        assert_eq!(woken.get_payload::<String>().unwrap(), "queued-by-hand");
        let left: Option<String> = redis::cmd("GET")
            .arg("fair")
            .query_async(&mut conn)
            .await
            .unwrap();
        assert_eq!(left, None, "the try's record was taken back");

        // Waiting since an hour ago: past the starvation limit.
        queue_waiter(&mut conn, "starving", now_ms - 3_600_000).await;
        let plain = client
            .mutex("starving")
            .lock_with(&LockOptions::new().wait(Duration::from_millis(30)))
            .await;
        assert_eq!(plain.unwrap_err().kind(), ErrorKind::Timeout);

        // Waiting since an hour from now: not starving for a while.
        queue_waiter(&mut conn, "overtaken", now_ms + 3_600_000).await;
        let guard = client.mutex("overtaken").try_lock().await.unwrap().unwrap();
        let record = record_of(&mut conn, "overtaken").await;
        assert_eq!(record["f"], guard.fencing_token().to_string(), "{record}");
        guard.release().await.unwrap();
    });
}

/// The server frozen (SIGSTOP) mid-use: acquire, release, `status` and `forget` each
/// return within their bounds.
#[test]
fn a_hung_server_bounds_every_call_by_its_deadline() {
    distlock_testkit::block_on(async {
        let server = distlock_testkit::redis_server().unwrap_or_else(|e| panic!("{e}"));
        let url = format!("redis://{}/0", server.addr());
        distlock_testkit::a_hung_server_bounds_every_call(&url, &server).await;
    });
}

/// Opening a connection is bounded by `connect_timeout` (1 s by default): a server that
/// accepts and never answers fails the connect as unavailable after it, not before.
#[test]
fn connecting_is_bounded_by_connect_timeout() {
    distlock_testkit::block_on(async {
        let black_hole = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = black_hole.local_addr().unwrap();
        for (query, at_least, at_most) in [("", 0.8, 1.8), ("?connect_timeout=2s", 1.8, 3.5)] {
            let started = std::time::Instant::now();
            let failed = distlock::Client::connect(&format!("redis://{addr}/0{query}")).await;
            let took = started.elapsed().as_secs_f64();
            assert_eq!(
                failed.unwrap_err().kind(),
                ErrorKind::Unavailable,
                "{query}"
            );
            assert!(
                (at_least..at_most).contains(&took),
                "{query}: the connect gave up after {took:.2} s"
            );
        }
    });
}

/// A server that lost its scripts (a restart, `SCRIPT FLUSH`) answers the first call
/// NOSCRIPT; that call gives it every script at once, so no other operation meets it again.
#[test]
fn a_server_that_lost_its_scripts_gets_them_all_back_at_once() {
    distlock_testkit::block_on(async {
        let redis = distlock_testkit::redis_server().unwrap_or_else(|e| panic!("{e}"));
        let (client, mut raw) = client_and_raw_connection(&redis).await;
        client
            .mutex("warm")
            .lock()
            .await
            .unwrap()
            .release()
            .await
            .unwrap();
        let _: () = redis::cmd("SCRIPT")
            .arg("FLUSH")
            .query_async(&mut raw)
            .await
            .unwrap();
        let _: () = redis::cmd("CONFIG")
            .arg("RESETSTAT")
            .query_async(&mut raw)
            .await
            .unwrap();
        let held = client.mutex("flushed").lock().await.unwrap();
        let quick = LockOptions::new().wait(Duration::from_millis(50));
        let refused = client.mutex("flushed").lock_with(&quick).await;
        assert_eq!(refused.unwrap_err().kind(), ErrorKind::Timeout);
        held.renew().await.unwrap();
        client.status(Some("flushed")).await.unwrap();
        held.release().await.unwrap();
        let reader = client.rwlock("flushed-rw").read().await.unwrap();
        reader.release().await.unwrap();
        let errors: String = redis::cmd("INFO")
            .arg("errorstats")
            .query_async(&mut raw)
            .await
            .unwrap();
        let noscript = errors
            .lines()
            .find_map(|line| line.strip_prefix("errorstat_NOSCRIPT:count="))
            .map_or(0, |count| count.trim().parse::<u64>().unwrap());
        assert_eq!(noscript, 1, "{errors}");
    });
}
