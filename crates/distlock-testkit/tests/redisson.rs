//! Redisson's layout (`?layout=redisson`): the conformance suite, process faults and a
//! server paused or a link cut under a holder, the layout key by key and message by
//! message as Java's clients read it (the fair lock's queue in `redisson/fair.rs`, the
//! read-write lock in `redisson/rwlock.rs`, the semaphore in `redisson/semaphore.rs`), and
//! node-redisson (Redisson's layout, from npm) sharing a lock with distlock.
//!
//! node-redisson comes from `DISTLOCK_TEST_NODE_PATH` (scripts/test installs it, with the
//! ioredis it needs, beside the build); `node` from the PATH.

async fn target() -> distlock_testkit::Target {
    let redis = distlock_testkit::redis_server().unwrap_or_else(|e| panic!("{e}"));
    let url = format!("redis://{}/0?layout=redisson", redis.addr());
    distlock_testkit::Target::new(url).keep(redis)
}

distlock_testkit::conformance_suite!(
    target,
    liveness = Lease,
    lacks = [semaphore, force_release, notes, adopt]
);
distlock_testkit::process_suite!(target, lacks = [semaphore, force_release, notes, adopt]);

#[path = "redisson/cluster.rs"]
mod cluster;
#[path = "redisson/fair.rs"]
mod fair;
#[path = "redis_faults/links.rs"]
mod links;
#[path = "redisson/rwlock.rs"]
mod rwlock;
#[path = "redisson/semaphore.rs"]
mod semaphore;

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use futures_util::StreamExt;

/// A Java client's id, as `UUID.randomUUID()` prints one.
const JAVA: &str = "0d3c9e4e-1c51-4c05-8d7f-3d3f9b5c2a10";

async fn raw(redis: &distlock_testkit::Server) -> redis::aio::MultiplexedConnection {
    let client = redis::Client::open(format!("redis://{}/0", redis.addr())).unwrap();
    client.get_multiplexed_async_connection().await.unwrap()
}

fn unix_ms() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis()
}

/// A grant is Redisson's fenced lock: the hash under the name holds the client's uuid and
/// a thread id with a hold count of 1, the lease its TTL, and the counter
/// `redisson_lock_token:{name}` is the guard's token; a renewal moves the TTL; the release
/// deletes the hash and publishes `0` on `redisson_lock__channel:{name}`, keeping its
/// answer in a latch for a few seconds; the next grant counts one more.
#[test]
fn a_grant_is_written_as_redissons_fenced_lock_and_its_release_is_published() {
    distlock_testkit::block_on(async {
        let redis = distlock_testkit::redis_server().unwrap_or_else(|e| panic!("{e}"));
        let url = format!(
            "redis://{}/0?layout=redisson&uuid=rust-billing",
            redis.addr()
        );
        let client = distlock::Client::connect(&url).await.unwrap();
        let mut conn = raw(&redis).await;
        let subscriber = redis::Client::open(format!("redis://{}/0", redis.addr())).unwrap();
        let mut pubsub = subscriber.get_async_pubsub().await.unwrap();
        pubsub
            .subscribe("redisson_lock__channel:{orders}")
            .await
            .unwrap();

        let options = distlock::LockOptions::new().ttl(Duration::from_secs(30));
        let guard = client.mutex("orders").lock_with(&options).await.unwrap();
        let fields: HashMap<String, String> = redis::cmd("HGETALL")
            .arg("orders")
            .query_async(&mut conn)
            .await
            .unwrap();
        // The holder's field and hold count, and beside it distlock's record of the holder
        // (a field no Java thread has; Java clients read only their own).
        assert_eq!(fields.len(), 2, "{fields:?}");
        let (field, count) = fields
            .iter()
            .find(|(field, _)| !field.ends_with(":distlock"))
            .unwrap();
        let (uuid, thread) = field.rsplit_once(':').unwrap();
        assert_eq!(uuid, "rust-billing");
        assert!(thread.parse::<u64>().is_ok(), "{field}");
        assert_eq!(count, "1");
        let record = &fields[&format!("{field}:distlock")];
        assert!(
            record.contains(&format!("\"f\":\"{}\"", guard.fencing_token())),
            "{record}"
        );
        let left: i64 = redis::cmd("PTTL")
            .arg("orders")
            .query_async(&mut conn)
            .await
            .unwrap();
        assert!((25_000..=30_000).contains(&left), "{left}");
        let token: u64 = redis::cmd("GET")
            .arg("redisson_lock_token:{orders}")
            .query_async(&mut conn)
            .await
            .unwrap();
        assert_eq!(token, guard.fencing_token());

        let _: () = redis::cmd("PEXPIRE")
            .arg("orders")
            .arg(5_000)
            .query_async(&mut conn)
            .await
            .unwrap();
        guard.renew().await.unwrap();
        let left: i64 = redis::cmd("PTTL")
            .arg("orders")
            .query_async(&mut conn)
            .await
            .unwrap();
        assert!(left > 25_000, "the renewal moved the TTL: {left}");

        guard.release().await.unwrap();
        let message = tokio::time::timeout(Duration::from_secs(1), pubsub.on_message().next())
            .await
            .expect("the release is published")
            .unwrap();
        assert_eq!(message.get_payload::<String>().unwrap(), "0");
        let exists: i64 = redis::cmd("EXISTS")
            .arg("orders")
            .query_async(&mut conn)
            .await
            .unwrap();
        assert_eq!(exists, 0);
        let latches: Vec<String> = redis::cmd("KEYS")
            .arg("redisson_unlock_latch:{orders}:*")
            .query_async(&mut conn)
            .await
            .unwrap();
        assert_eq!(latches.len(), 1, "{latches:?}");
        let (answer, left): (String, i64) = redis::pipe()
            .get(&latches[0])
            .pttl(&latches[0])
            .query_async(&mut conn)
            .await
            .unwrap();
        assert_eq!(answer, "1", "the latch keeps the release's answer");
        assert!((1..=5_000).contains(&left), "for a few seconds: {left}");
        let next = client.mutex("orders").lock().await.unwrap();
        assert_eq!(next.fencing_token(), token + 1);
        next.release().await.unwrap();
    });
}

/// A Java holder (its hash written as Redisson writes it) keeps distlock out, shows in
/// `status` with its uuid, thread id, hold count and TTL, and its release (the hash
/// deleted, `0` published) wakes a distlock waiter at once, long before its lease ends.
#[test]
fn a_java_holder_excludes_distlock_shows_in_status_and_its_release_wakes_a_waiter() {
    distlock_testkit::block_on(async {
        let redis = distlock_testkit::redis_server().unwrap_or_else(|e| panic!("{e}"));
        let url = format!("redis://{}/0?layout=redisson", redis.addr());
        let client = distlock::Client::connect(&url).await.unwrap();
        let mut conn = raw(&redis).await;
        let java_field = format!("{JAVA}:57");
        let _: () = redis::pipe()
            .hset("stock", &java_field, 2)
            .pexpire("stock", 20_000)
            .query_async(&mut conn)
            .await
            .unwrap();
        assert!(client.mutex("stock").try_lock().await.unwrap().is_none());
        let states = client.status(Some("stock")).await.unwrap();
        let holder = &states[0].holders[0];
        assert_eq!(holder.owner, format!("{java_field} (held 2 times)"));
        assert!(
            holder.remaining_ms.is_some_and(|ms| ms > 15_000),
            "{holder:?}"
        );

        let waiter = tokio::spawn({
            let client = client.clone();
            async move {
                let guard = client
                    .mutex("stock")
                    .lock_timeout(Duration::from_secs(10))
                    .await
                    .unwrap();
                let at = Instant::now();
                guard.release().await.unwrap();
                at
            }
        });
        wait_for_listeners(&mut conn, "redisson_lock__channel:{stock}").await;
        let released = Instant::now();
        let _: () = redis::pipe()
            .del("stock")
            .publish("redisson_lock__channel:{stock}", "0")
            .query_async(&mut conn)
            .await
            .unwrap();
        let granted = waiter.await.unwrap();
        assert!(
            granted.duration_since(released) < Duration::from_millis(50),
            "woken {:?} after the release",
            granted.duration_since(released)
        );
    });
}

/// A lock hash without a TTL (a buggy client, or `PERSIST`) is never taken for a grant:
/// a wait for it times out, and `status` shows it without expiry. A key of another layout
/// under the name is a clear error.
#[test]
fn a_hash_without_a_ttl_is_never_granted_and_another_layouts_key_is_an_error() {
    distlock_testkit::block_on(async {
        let redis = distlock_testkit::redis_server().unwrap_or_else(|e| panic!("{e}"));
        let url = format!("redis://{}/0?layout=redisson", redis.addr());
        let client = distlock::Client::connect(&url).await.unwrap();
        let mut conn = raw(&redis).await;
        let _: () = redis::cmd("HSET")
            .arg("stuck")
            .arg(format!("{JAVA}:1"))
            .arg(1)
            .query_async(&mut conn)
            .await
            .unwrap();
        let waited = client
            .mutex("stuck")
            .lock_timeout(Duration::from_millis(300))
            .await;
        assert_eq!(waited.unwrap_err().kind(), distlock::ErrorKind::Timeout);
        let states = client.status(Some("stuck")).await.unwrap();
        assert!(states[0].holders[0].no_expiry);

        let _: () = redis::cmd("SET")
            .arg("plain")
            .arg("a redis-py token")
            .query_async(&mut conn)
            .await
            .unwrap();
        let err = client.mutex("plain").try_lock().await.unwrap_err();
        assert!(
            err.to_string().contains("not a Redisson lock hash"),
            "{err}"
        );
        let err = client.status(Some("plain")).await.unwrap_err();
        assert!(
            err.to_string().contains("not a Redisson lock hash"),
            "{err}"
        );
    });
}

/// What the layout cannot give yet is refused with a reason, never faked; options that do
/// not fit it are refused at connect.
#[test]
fn what_the_layout_cannot_give_is_refused_with_a_reason() {
    distlock_testkit::block_on(async {
        let redis = distlock_testkit::redis_server().unwrap_or_else(|e| panic!("{e}"));
        let base = format!("redis://{}/0", redis.addr());
        let client = distlock::Client::connect(&format!("{base}?layout=redisson"))
            .await
            .unwrap();
        let fair = distlock::LockOptions::new().fair(true);
        let err = client.rwlock("r").read_with(&fair).await.unwrap_err();
        assert_eq!(err.kind(), distlock::ErrorKind::Unsupported, "{err}");
        assert!(err.to_string().contains("no queue"), "{err}");
        let long = distlock::LockOptions::new().ttl(Duration::from_secs(31));
        let err = client.rwlock("r").read_with(&long).await.unwrap_err();
        assert_eq!(err.kind(), distlock::ErrorKind::Unsupported, "{err}");
        assert!(err.to_string().contains("lease=30s"), "{err}");
        let longer = distlock::Client::connect(&format!("{base}?layout=redisson&lease=1m"))
            .await
            .unwrap();
        let guard = longer.rwlock("r").read_with(&long).await.unwrap();
        guard.release().await.unwrap();
        // Nor is a read hold kept past the lease by a release at a later time.
        let guard = client.rwlock("r").read().await.unwrap();
        let later = Instant::now() + Duration::from_secs(60);
        let err = guard.release_at(later).await.unwrap_err();
        assert_eq!(err.kind(), distlock::ErrorKind::Unsupported, "{err}");
        assert!(err.to_string().contains("lease=30s"), "{err}");
        let err = client.semaphore("s", 2).acquire().await.unwrap_err();
        assert_eq!(err.kind(), distlock::ErrorKind::Unsupported, "{err}");
        assert!(err.to_string().contains("add semaphore=redisson"), "{err}");
        let unleased =
            distlock::Client::connect(&format!("{base}?layout=redisson&semaphore=redisson"))
                .await
                .unwrap();
        let err = unleased
            .semaphore("s", 2)
            .acquire_with(1, &fair)
            .await
            .unwrap_err();
        assert!(err.to_string().contains("keeps no queue"), "{err}");
        for (query, said) in [
            ("layout=redisson&fencing=none", "RFencedLock"),
            ("layout=redisson&uuid=a:b", "cannot name a client"),
            ("layout=redisson&prefix=locks:", "takes no prefix"),
            ("uuid=abc", "add layout=redisson"),
            ("fair_wait_timeout=5m", "add layout=redisson"),
            ("lease=30s", "add layout=redisson"),
            ("semaphore=redisson", "add layout=redisson"),
            (
                "layout=redisson&semaphore=leased",
                "semaphore=redisson takes",
            ),
            ("layout=redisson&lease=0s", "lockWatchdogTimeout"),
            ("layout=redisson&lease=500ms", "below 1s"),
            ("layout=redisson&lease=forever", "lockWatchdogTimeout"),
            (
                "layout=redisson&fair_wait_timeout=0s",
                "fairLockWaitTimeout",
            ),
            ("layout=redisson&fair_wait_timeout=2d", "at most a day"),
            ("layout=jedis", "distlock (the default) or redisson"),
            ("layout=redisson&fence_ttl=1h", "takes no fence_ttl"),
            ("layout=redisson&pubsub=sharded", "is for a Redis Cluster"),
            ("layout=redisson&pubsub=loud", "shardedSubscriptionMode"),
        ] {
            let err = distlock::Client::connect(&format!("{base}?{query}"))
                .await
                .unwrap_err();
            assert!(err.to_string().contains(said), "{query}: {err}");
        }
    });
}

/// Over TLS (`rediss://`) the layout is the same: a grant is a holder's field in the hash,
/// and a release wakes a waiter of another client at once, through its wake-up
/// subscription over TLS.
#[test]
fn over_tls_a_grant_and_the_wake_up_of_its_release_are_the_same() {
    distlock_testkit::block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let certs =
            distlock_testkit::TestCertificates::make(dir.path()).unwrap_or_else(|e| panic!("{e}"));
        let redis = distlock_testkit::redis_tls_server(&certs).unwrap_or_else(|e| panic!("{e}"));
        let url = format!(
            "rediss://{}/0?tls_ca={}&layout=redisson&uuid=rust-tls",
            redis.addr(),
            certs.ca.display()
        );
        let (holder, other) = (
            distlock::Client::connect(&url).await.unwrap(),
            distlock::Client::connect(&url).await.unwrap(),
        );
        let guard = holder.mutex("tls").lock().await.unwrap();
        let states = other.status(Some("tls")).await.unwrap();
        let field = states[0].holders[0].stored_as.clone().unwrap();
        assert!(field.starts_with("rust-tls:"), "{field}");
        let waiter = tokio::spawn(async move {
            let wait = distlock::LockOptions::new().wait(Duration::from_secs(20));
            let next = other.mutex("tls").lock_with(&wait).await.unwrap();
            let at = Instant::now();
            next.release().await.unwrap();
            at
        });
        // The waiter listens (its record shows in status) before the release.
        let deadline = Instant::now() + Duration::from_secs(10);
        while holder.status(Some("tls")).await.unwrap()[0]
            .waiters
            .is_empty()
        {
            assert!(Instant::now() < deadline, "the waiter never waited");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        let released = Instant::now();
        guard.release().await.unwrap();
        let granted = waiter.await.unwrap();
        assert!(
            granted.duration_since(released) < Duration::from_millis(200),
            "woken {:?} after the release",
            granted.duration_since(released)
        );
    });
}

/// A Redisson-layout holder whose server stops answering past its lease loses it before
/// anyone else can get it.
#[test]
fn a_server_paused_past_the_lease_loses_it_before_anyone_else_gets_it() {
    distlock_testkit::block_on(async {
        let redis = distlock_testkit::redis_server().unwrap_or_else(|e| panic!("{e}"));
        let url = format!("redis://{}/0?layout=redisson", redis.addr());
        distlock_testkit::lose_to_a_paused_server(&url, &redis, "paused").await;
    });
}

#[test]
fn a_holder_cut_off_goes_at_risk_then_lost_before_the_hash_expires() {
    distlock_testkit::block_on(links::lost_before_the_server_ttl_ends(
        "?layout=redisson",
        distlock_testkit::ProxyMode::Cut,
    ));
}

#[test]
fn a_black_holed_holder_goes_at_risk_then_lost_before_the_hash_expires() {
    distlock_testkit::block_on(links::lost_before_the_server_ttl_ends(
        "?layout=redisson",
        distlock_testkit::ProxyMode::BlackHole,
    ));
}

/// Waits until someone listens on `channel` (within 10 s).
async fn wait_for_listeners(conn: &mut redis::aio::MultiplexedConnection, channel: &str) {
    listened_on(std::slice::from_mut(conn), channel).await;
}

/// Waits until someone listens on `channel` on one of the servers `conns` reach (within
/// 10 s): a client subscribes on one node of a cluster, where a plain PUBLISH reaches
/// every node.
async fn listened_on(conns: &mut [redis::aio::MultiplexedConnection], channel: &str) {
    listened_on_by(conns, channel, 1).await;
}

/// Waits until at least `listeners` listen on `channel` on one of the servers `conns`
/// reach, plainly or on its shard (within 10 s).
async fn listened_on_by(
    conns: &mut [redis::aio::MultiplexedConnection],
    channel: &str,
    listeners: u64,
) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        for conn in conns.iter_mut() {
            let mut heard_by = 0;
            for numsub in ["NUMSUB", "SHARDNUMSUB"] {
                let (_, count): (String, u64) = redis::cmd("PUBSUB")
                    .arg(numsub)
                    .arg(channel)
                    .query_async(&mut *conn)
                    .await
                    .unwrap();
                heard_by += count;
            }
            if heard_by >= listeners {
                return;
            }
        }
        assert!(
            Instant::now() < deadline,
            "fewer than {listeners} listen on {channel}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// `node_redisson.js` in `mode` with `args`, its output piped.
fn node(mode: &str, args: &[String]) -> Child {
    let node_path = std::env::var("DISTLOCK_TEST_NODE_PATH").unwrap_or_else(|_| {
        panic!(
            "DISTLOCK_TEST_NODE_PATH is not set: run scripts/test (it installs node-redisson and ioredis) or npm install them and point it at their node_modules"
        )
    });
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/interop/node_redisson.js");
    Command::new("node")
        .arg(script)
        .arg(mode)
        .args(args)
        .env("NODE_PATH", node_path)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("node runs")
}

/// The next line `out` prints (within the child's own bounds).
fn line(out: &mut BufReader<ChildStdout>) -> String {
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    line.trim().to_owned()
}

/// Two node-redisson processes and two distlock processes take one lock over and over
/// for the same 5 s, each holding it for a millisecond: nobody overlaps, and each side
/// gets its share.
#[test]
fn distlock_and_node_redisson_exclude_each_other_and_share_one_lock() {
    const SECONDS: u64 = 5;
    let redis = distlock_testkit::redis_server().unwrap_or_else(|e| panic!("{e}"));
    let dir = tempfile::tempdir().unwrap();
    let inside = dir.path().join("inside");
    let start = SystemTime::now() + Duration::from_secs(2);
    let end = start + Duration::from_secs(SECONDS);
    let epoch_s = |at: SystemTime| {
        let since = at.duration_since(UNIX_EPOCH).unwrap();
        format!("{:.3}", since.as_secs_f64())
    };
    let args = [
        redis.port().to_string(),
        "shared".to_owned(),
        epoch_s(start),
        epoch_s(end),
        inside.display().to_string(),
    ];
    let theirs: Vec<Child> = (0..2).map(|_| node("contend", &args)).collect();
    let url = format!("redis://{}/0?layout=redisson", redis.addr());
    let counts = distlock_testkit::share_from_processes(
        "share_child",
        (&url, "shared"),
        2,
        (start, end),
        &inside,
    );
    let theirs: Vec<u64> = theirs
        .into_iter()
        .map(|child| {
            let out = child.wait_with_output().unwrap();
            let text = String::from_utf8_lossy(&out.stdout).trim().to_owned();
            assert!(out.status.success(), "node-redisson side: {text}");
            text.parse().unwrap()
        })
        .collect();
    distlock_testkit::assert_fair_share(&counts, &theirs, "node-redisson");
}

/// A release by node-redisson wakes a distlock waiter, and a release by distlock wakes a
/// node-redisson waiter, each within 50 ms.
#[test]
fn a_release_on_either_side_wakes_a_waiter_of_the_other_within_50ms() {
    distlock_testkit::block_on(async {
        let redis = distlock_testkit::redis_server().unwrap_or_else(|e| panic!("{e}"));
        let url = format!("redis://{}/0?layout=redisson", redis.addr());
        let client = distlock::Client::connect(&url).await.unwrap();
        let mut conn = raw(&redis).await;
        let port = redis.port().to_string();

        // node-redisson holds; distlock waits.
        let mut holder = node("hold", &[port.clone(), "handed".into()]);
        let mut out = BufReader::new(holder.stdout.take().unwrap());
        assert_eq!(line(&mut out), "held");
        let waiter = tokio::spawn({
            let client = client.clone();
            async move {
                let guard = client
                    .mutex("handed")
                    .lock_timeout(Duration::from_secs(20))
                    .await
                    .unwrap();
                let at = unix_ms();
                guard.release().await.unwrap();
                at
            }
        });
        wait_for_listeners(&mut conn, "redisson_lock__channel:{handed}").await;
        writeln!(holder.stdin.as_mut().unwrap(), "go").unwrap();
        let released: u128 = line(&mut out)
            .strip_prefix("releasing ")
            .expect("node prints when it releases")
            .parse()
            .unwrap();
        let granted = waiter.await.unwrap();
        assert!(holder.wait().unwrap().success());
        assert!(
            granted.saturating_sub(released) < 50,
            "distlock woken {} ms after node-redisson's release",
            granted.saturating_sub(released)
        );

        // distlock holds; node-redisson waits (on another name: distlock's subscription
        // to the first outlives its last waiter by a second).
        let guard = client.mutex("handed-back").lock().await.unwrap();
        let mut waiting = node("wait", &[port, "handed-back".into()]);
        let mut out = BufReader::new(waiting.stdout.take().unwrap());
        assert_eq!(line(&mut out), "trying");
        wait_for_listeners(&mut conn, "redisson_lock__channel:{handed-back}").await;
        let released = unix_ms();
        guard.release().await.unwrap();
        let granted: u128 = line(&mut out)
            .strip_prefix("acquired ")
            .expect("node prints when it acquires")
            .parse()
            .unwrap();
        assert!(waiting.wait().unwrap().success());
        assert!(
            granted.saturating_sub(released) < 50,
            "node-redisson woken {} ms after distlock's release",
            granted.saturating_sub(released)
        );
    });
}

#[test]
#[ignore = "runs only as a helper process of the share test"]
fn share_child() {
    distlock_testkit::run_child();
}
