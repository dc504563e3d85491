//! distlock and redis-py's `Lock` exclude each other on the same key: a counter updated
//! non-atomically inside the critical section by both loses no update.
//!
//! The Python interpreter comes from `DISTLOCK_TEST_PYTHON` (scripts/test points it at a
//! virtual environment with redis-py installed), else `python3`.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

const ROUNDS: u32 = 40;

fn python() -> String {
    std::env::var("DISTLOCK_TEST_PYTHON").unwrap_or_else(|_| "python3".to_owned())
}

fn require_redis_py(python: &str) {
    let ok = Command::new(python)
        .args(["-c", "import redis"])
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        ok,
        "{python} cannot import redis-py; run scripts/test (it installs redis-py into a virtual \
         environment) or `pip install redis` and set DISTLOCK_TEST_PYTHON"
    );
}

fn read_counter(path: &Path) -> u32 {
    std::fs::read_to_string(path)
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

#[test]
fn distlock_and_redis_py_exclude_each_other_on_one_key() {
    let python = python();
    require_redis_py(&python);
    let redis = distlock_testkit::redis_server().unwrap_or_else(|e| panic!("{e}"));
    let dir = tempfile::tempdir().unwrap();
    let counter = dir.path().join("counter");
    std::fs::write(&counter, "0").unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/interop/redis_py_lock.py");

    let mut py = Command::new(&python)
        .arg(&script)
        .arg(redis.port().to_string())
        .args(["shared/job", &ROUNDS.to_string()])
        .arg(&counter)
        .spawn()
        .unwrap();

    distlock_testkit::block_on(async {
        let url = format!("redis://{}/0", redis.addr());
        let mut tasks = Vec::new();
        for _ in 0..2 {
            let client = distlock::Client::connect(&url).await.unwrap();
            let counter = counter.clone();
            tasks.push(tokio::spawn(async move {
                let mutex = client.mutex("shared/job");
                for _ in 0..ROUNDS {
                    let guard = mutex.lock_timeout(Duration::from_secs(60)).await.unwrap();
                    let value = read_counter(&counter);
                    tokio::time::sleep(Duration::from_millis(1)).await;
                    std::fs::write(&counter, (value + 1).to_string()).unwrap();
                    guard.release().await.unwrap();
                }
            }));
        }
        for task in tasks {
            tokio::time::timeout(Duration::from_secs(120), task)
                .await
                .expect("distlock side finishes")
                .unwrap();
        }
    });
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    let status = loop {
        if let Some(status) = py.try_wait().unwrap() {
            break status;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "redis-py side did not finish"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "redis-py side failed");
    assert_eq!(
        read_counter(&counter),
        3 * ROUNDS,
        "an update was lost: redis-py and distlock held the lock at once"
    );
}

/// redis-py's clients release without a word to distlock's waiters and retry every
/// millisecond: two distlock processes on the same key, polling a foreign holder's lock with a
/// short backoff (the server publishes no keyspace events), still get at least a third of
/// their fair share together, each at least a quarter of its own, and nobody overlaps.
#[test]
fn distlock_gets_its_share_of_a_key_redis_py_clients_hammer() {
    let redis = distlock_testkit::redis_server().unwrap_or_else(|e| panic!("{e}"));
    shares_against_redis_py(&redis, 2);
}

/// Where the server publishes keyspace events, distlock's waiters watch a key a foreign
/// client holds and wake on its release: two distlock processes against two redis-py
/// processes get at least a third of their fair share together, each at least a quarter,
/// though distlock's queue would have them yield to each other.
#[test]
fn with_keyspace_events_distlock_waiters_wake_on_a_foreign_release() {
    let redis = distlock_testkit::redis_server().unwrap_or_else(|e| panic!("{e}"));
    let url = format!("redis://{}/0", redis.addr());
    let client = redis::Client::open(url).unwrap();
    let mut conn = client.get_connection().unwrap();
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("notify-keyspace-events")
        .arg("Kgx")
        .query(&mut conn)
        .unwrap();
    shares_against_redis_py(&redis, 2);
}

/// Two redis-py processes and `ours` distlock processes take one key over and over for
/// the same 5 s, each holding it for a millisecond: nobody overlaps, the distlock processes get at
/// least a third of their fair share together, and each at least a quarter of its own.
fn shares_against_redis_py(redis: &distlock_testkit::Server, ours: usize) {
    const SECONDS: u64 = 5;
    const PY: usize = 2;
    let python = python();
    require_redis_py(&python);
    let dir = tempfile::tempdir().unwrap();
    let inside = dir.path().join("inside");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/interop/redis_py_contend.py");
    // Every side starts together, once all are connected.
    let start = SystemTime::now() + Duration::from_secs(2);
    let end = start + Duration::from_secs(SECONDS);
    let epoch_s = |at: SystemTime| {
        let since = at.duration_since(UNIX_EPOCH).unwrap();
        format!("{:.3}", since.as_secs_f64())
    };
    let py: Vec<_> = (0..PY)
        .map(|_| {
            Command::new(&python)
                .arg(&script)
                .arg(redis.port().to_string())
                .args(["hammered", &epoch_s(start), &epoch_s(end)])
                .arg(&inside)
                .stdout(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let url = format!("redis://{}/0", redis.addr());
    let counts = distlock_testkit::share_from_processes(
        "share_child",
        (&url, "hammered"),
        ours,
        (start, end),
        &inside,
    );
    let theirs: Vec<u64> = py
        .into_iter()
        .map(|child| {
            let out = child.wait_with_output().unwrap();
            let text = String::from_utf8_lossy(&out.stdout).trim().to_owned();
            assert!(out.status.success(), "redis-py side: {text}");
            text.parse().unwrap()
        })
        .collect();
    distlock_testkit::assert_fair_share(&counts, &theirs, "redis-py");
}

/// A waiter that finds a foreign client's lock subscribes to the key's keyspace channel
/// while it waits (where the server publishes the events), is woken by the key's `DEL`, and
/// the subscription ends a second after the last watch of the key.
#[test]
fn a_waiter_on_a_foreign_lock_watches_its_key_while_it_waits() {
    let redis = distlock_testkit::redis_server().unwrap_or_else(|e| panic!("{e}"));
    let url = format!("redis://{}/0", redis.addr());
    let mut conn = redis::Client::open(url.as_str())
        .unwrap()
        .get_connection()
        .unwrap();
    let subscribers = |conn: &mut redis::Connection| -> u64 {
        let counts: Vec<(String, u64)> = redis::cmd("PUBSUB")
            .arg("NUMSUB")
            .arg("__keyspace@0__:watched")
            .query(conn)
            .unwrap();
        counts[0].1
    };
    let _: () = redis::cmd("CONFIG")
        .arg(&["SET", "notify-keyspace-events", "Kgx"])
        .query(&mut conn)
        .unwrap();
    let _: () = redis::cmd("SET")
        .arg(&["watched", "a-foreign-token", "PX", "30000"])
        .query(&mut conn)
        .unwrap();
    distlock_testkit::block_on(async move {
        let client = distlock::Client::connect(&url).await.unwrap();
        let mutex = client.mutex("watched");
        let waiter = tokio::spawn(async move {
            let guard = mutex.lock_timeout(Duration::from_secs(10)).await.unwrap();
            (tokio::time::Instant::now(), guard)
        });
        let mut subscribed = false;
        for _ in 0..200 {
            if subscribers(&mut conn) == 1 {
                subscribed = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(subscribed, "the waiter watches the key");
        let _: () = redis::cmd("DEL").arg("watched").query(&mut conn).unwrap();
        waiter.await.unwrap().1.release().await.unwrap();
        // The DEL wakes the waiter at once: without the event, it would look again only at
        // its next backoff poll (25 to 50 ms apart after 130 ms of one hold), within 10 ms
        // of the DEL about one time in four.
        let mut woken_at_once = 0;
        let mut last_del = tokio::time::Instant::now();
        for _ in 0..8 {
            let _: () = redis::cmd("SET")
                .arg(&["watched", "a-foreign-token", "PX", "30000"])
                .query(&mut conn)
                .unwrap();
            let mutex = client.mutex("watched");
            let waiter = tokio::spawn(async move {
                let guard = mutex.lock_timeout(Duration::from_secs(10)).await.unwrap();
                (tokio::time::Instant::now(), guard)
            });
            tokio::time::sleep(Duration::from_millis(130)).await;
            last_del = tokio::time::Instant::now();
            let _: () = redis::cmd("DEL").arg("watched").query(&mut conn).unwrap();
            let (granted, guard) = waiter.await.unwrap();
            if granted - last_del < Duration::from_millis(10) {
                woken_at_once += 1;
            }
            guard.release().await.unwrap();
        }
        assert!(woken_at_once >= 5, "{woken_at_once} of 8 woken at once");
        // The last watch ended after the last DEL, when its waiter was woken.
        let mut ended = false;
        for _ in 0..300 {
            if subscribers(&mut conn) == 0 {
                ended = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(ended, "the subscription ends after the last watch");
        assert!(
            last_del.elapsed() >= Duration::from_secs(1),
            "it outlives the last watch by a second"
        );
        drop(client);
    });
}

#[test]
#[ignore = "runs only as a helper process of the share tests"]
fn share_child() {
    distlock_testkit::run_child();
}
