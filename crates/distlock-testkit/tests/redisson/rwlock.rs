//! The read-write lock in Redisson's layout, key by key and message by message, beside
//! Java readers and writers written as Redisson writes them.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use redis::aio::MultiplexedConnection;

use super::{JAVA, raw, wait_for_listeners};

const CHANNEL: &str = "redisson_rwlock:{doc}";
/// How soon a waiter takes the lock after the release it hears: far below the lease it
/// would sleep otherwise, with room for a loaded machine.
const WOKEN_WITHIN: Duration = Duration::from_millis(200);

async fn fields(conn: &mut MultiplexedConnection) -> HashMap<String, String> {
    redis::cmd("HGETALL")
        .arg("doc")
        .query_async(conn)
        .await
        .unwrap()
}

async fn pttl(conn: &mut MultiplexedConnection, key: &str) -> i64 {
    redis::cmd("PTTL").arg(key).query_async(conn).await.unwrap()
}

/// Waits (up to 10 s) until one distlock writer says it waits for `doc`.
async fn writer_waits(conn: &mut MultiplexedConnection) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let waiting: u64 = redis::cmd("ZCARD")
            .arg("distlock_writers:{doc}")
            .query_async(&mut *conn)
            .await
            .unwrap();
        if waiting == 1 {
            return;
        }
        assert!(Instant::now() < deadline, "the writer never said it waits");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The field of the one holder in `fields` (besides `mode`).
fn holder_field(fields: &HashMap<String, String>) -> String {
    let mut holders = fields.keys().filter(|f| *f != "mode");
    let field = holders.next().expect("a holder's field").clone();
    assert!(holders.next().is_none(), "{fields:?}");
    field
}

/// Read holds are Redisson's: the hash in `read` mode with each reader's field and a hold
/// count of 1, a key per hold whose TTL is its lease, the hash living as long as the
/// longest; distlock's records beside the hash, none in it (Java's write unlock counts the
/// hash's fields); a Java reader shares with distlock's; a renewal moves the hold's TTL; a
/// reader's release with others left publishes nothing; a waiting distlock writer keeps
/// new distlock readers out; the last reader's release deletes the hash and publishes
/// `0`, which wakes the writer at once; the writer's hold is `<field>:write` in `write`
/// mode, and its release publishes `1`; every grant counts one in the fenced counter.
#[test]
fn read_and_write_holds_are_written_as_redissons_read_write_lock() {
    distlock_testkit::block_on(async {
        let redis = distlock_testkit::redis_server().unwrap_or_else(|e| panic!("{e}"));
        let url = format!("redis://{}/0?layout=redisson&uuid=rust-rw", redis.addr());
        let client = distlock::Client::connect(&url).await.unwrap();
        let mut conn = raw(&redis).await;
        let subscriber = redis::Client::open(format!("redis://{}/0", redis.addr())).unwrap();
        let mut pubsub = subscriber.get_async_pubsub().await.unwrap();
        pubsub.subscribe(CHANNEL).await.unwrap();

        let options = distlock::LockOptions::new().ttl(Duration::from_secs(20));
        let lock = client.rwlock("doc");
        let first = lock.read_with(&options).await.unwrap();
        let held = fields(&mut conn).await;
        assert_eq!(held.len(), 2, "mode and one reader: {held:?}");
        assert_eq!(held["mode"], "read");
        let first_field = holder_field(&held);
        assert!(first_field.starts_with("rust-rw:"), "{first_field}");
        assert_eq!(held[&first_field], "1");
        let first_hold = format!("{{doc}}:{first_field}:rwlock_timeout:1");
        let hold_left = pttl(&mut conn, &first_hold).await;
        assert!((15_000..=20_000).contains(&hold_left), "{hold_left}");
        assert!(pttl(&mut conn, "doc").await >= hold_left - 50);
        let record: String = redis::cmd("HGET")
            .arg("distlock_holders:{doc}")
            .arg(&first_field)
            .query_async(&mut conn)
            .await
            .unwrap();
        assert!(
            record.contains(&format!("\"f\":\"{}\"", first.fencing_token())),
            "{record}"
        );
        let counted: u64 = redis::cmd("GET")
            .arg("redisson_lock_token:{doc}")
            .query_async(&mut conn)
            .await
            .unwrap();
        assert_eq!(counted, first.fencing_token());

        // A Java reader joins, as Redisson's read lock writes one.
        let java = format!("{JAVA}:5");
        let java_hold = format!("{{doc}}:{java}:rwlock_timeout:1");
        let _: () = redis::pipe()
            .hincr("doc", &java, 1)
            .set(&java_hold, 1)
            .pexpire(&java_hold, 60_000)
            .pexpire("doc", 60_000)
            .query_async(&mut conn)
            .await
            .unwrap();
        let second = lock.read_with(&options).await.unwrap();
        let second_token = second.fencing_token();
        assert!(second_token > first.fencing_token());
        let states = client.status(Some("doc")).await.unwrap();
        let kinds: Vec<(String, distlock::LockKind)> = states[0]
            .holders
            .iter()
            .map(|h| (h.owner.clone(), h.kind))
            .collect();
        assert_eq!(kinds.len(), 3, "{kinds:?}");
        assert!(
            kinds.contains(&(java.clone(), distlock::LockKind::Read)),
            "{kinds:?}"
        );
        assert!(
            kinds
                .iter()
                .all(|(_, kind)| *kind == distlock::LockKind::Read)
        );
        // distlock's holders show their fields in the hash (Java's field is its owner),
        // and each reader its own hold's time left, not the hash's.
        let in_hash = fields(&mut conn).await;
        for holder in &states[0].holders {
            let left = holder.remaining_ms.unwrap_or(0);
            match &holder.stored_as {
                Some(field) => {
                    assert!(in_hash.contains_key(field), "{field} in {in_hash:?}");
                    assert!((10_000..=20_000).contains(&left), "{holder:?}");
                }
                None => {
                    assert_eq!(holder.owner, java);
                    assert!(left > 50_000, "{holder:?}");
                }
            }
        }

        let _: () = redis::cmd("PEXPIRE")
            .arg(&first_hold)
            .arg(2_000)
            .query_async(&mut conn)
            .await
            .unwrap();
        first.renew().await.unwrap();
        assert!(pttl(&mut conn, &first_hold).await > 15_000, "renewed");

        // A distlock writer waits and says so beside the lock; distlock's readers let it go
        // first.
        let writer = tokio::spawn({
            let client = client.clone();
            async move {
                let guard = client
                    .rwlock("doc")
                    .write_with(&distlock::LockOptions::new().wait(Duration::from_secs(20)))
                    .await
                    .unwrap();
                (guard, Instant::now())
            }
        });
        writer_waits(&mut conn).await;
        assert!(
            lock.try_read().await.unwrap().is_none(),
            "a reader jumped the writer"
        );

        // Readers leave; only the last release deletes the hash and publishes.
        first.release().await.unwrap();
        let _: () = redis::pipe()
            .hdel("doc", &java)
            .del(&java_hold)
            .query_async(&mut conn)
            .await
            .unwrap();
        let left = fields(&mut conn).await;
        assert_eq!(left.len(), 2, "mode and the second reader: {left:?}");
        wait_for_listeners(&mut conn, CHANNEL).await;
        let released = Instant::now();
        second.release().await.unwrap();
        let message = tokio::time::timeout(Duration::from_secs(1), pubsub.on_message().next())
            .await
            .expect("the last reader's release is published")
            .unwrap();
        assert_eq!(message.get_payload::<String>().unwrap(), "0");
        let (write, granted) = writer.await.unwrap();
        assert!(
            granted.duration_since(released) < WOKEN_WITHIN,
            "the writer took {:?}",
            granted.duration_since(released)
        );
        let waiting: u64 = redis::cmd("ZCARD")
            .arg("distlock_waiting:{doc}")
            .query_async(&mut conn)
            .await
            .unwrap();
        assert_eq!(
            waiting, 0,
            "the grant dropped the waiter's record for status"
        );
        let held = fields(&mut conn).await;
        assert_eq!(held["mode"], "write", "{held:?}");
        let writer_field = holder_field(&held);
        assert!(writer_field.ends_with(":write"), "{writer_field}");
        assert_eq!(held[&writer_field], "1");
        assert!(write.fencing_token() > second_token);
        let states = client.status(Some("doc")).await.unwrap();
        assert_eq!(states[0].holders[0].kind, distlock::LockKind::Write);

        write.release().await.unwrap();
        let message = tokio::time::timeout(Duration::from_secs(1), pubsub.on_message().next())
            .await
            .expect("the writer's release is published")
            .unwrap();
        assert_eq!(message.get_payload::<String>().unwrap(), "1");
        let exists: i64 = redis::cmd("EXISTS")
            .arg("doc")
            .query_async(&mut conn)
            .await
            .unwrap();
        assert_eq!(exists, 0);
    });
}

/// A Java writer (its hash written as Redisson's write lock writes it) keeps distlock's
/// readers and writers out and shows in `status` as a writer; its release (the hash
/// deleted, `1` published) wakes both of a client's waiting readers at once; a Java writer whose lease ends
/// without a release is re-granted at the lease's end, as the acquire's PTTL bounds the
/// sleep; a plain lock's hash under the name is an error that says so, and so is a
/// read-write lock's hash under a lock.
#[test]
fn a_java_writer_excludes_distlock_and_its_release_or_expiry_lets_a_reader_in() {
    distlock_testkit::block_on(async {
        let redis = distlock_testkit::redis_server().unwrap_or_else(|e| panic!("{e}"));
        let url = format!("redis://{}/0?layout=redisson", redis.addr());
        let client = distlock::Client::connect(&url).await.unwrap();
        let mut conn = raw(&redis).await;
        let java = format!("{JAVA}:9:write");
        let write_java = |conn: &mut MultiplexedConnection, lease: u64| {
            let java = java.clone();
            let mut conn = conn.clone();
            async move {
                let _: () = redis::pipe()
                    .hset("doc", "mode", "write")
                    .hset("doc", &java, 1)
                    .pexpire("doc", lease as i64)
                    .query_async(&mut conn)
                    .await
                    .unwrap();
            }
        };
        write_java(&mut conn, 20_000).await;
        let lock = client.rwlock("doc");
        assert!(lock.try_read().await.unwrap().is_none());
        assert!(lock.try_write().await.unwrap().is_none());
        let states = client.status(Some("doc")).await.unwrap();
        let holder = &states[0].holders[0];
        assert_eq!(
            (holder.owner.as_str(), holder.kind),
            (java.as_str(), distlock::LockKind::Write)
        );

        let readers: Vec<_> = (0..2)
            .map(|_| {
                let client = client.clone();
                tokio::spawn(async move {
                    let guard = client.rwlock("doc").read().await.unwrap();
                    let at = Instant::now();
                    tokio::time::sleep(WOKEN_WITHIN).await;
                    guard.release().await.unwrap();
                    at
                })
            })
            .collect();
        wait_for_listeners(&mut conn, CHANNEL).await;
        let deadline = Instant::now() + Duration::from_secs(10);
        while client.status(Some("doc")).await.unwrap()[0].waiters.len() < 2 {
            assert!(Instant::now() < deadline, "the readers never waited");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let released = Instant::now();
        let _: () = redis::pipe()
            .del("doc")
            .publish(CHANNEL, "1")
            .query_async(&mut conn)
            .await
            .unwrap();
        for reader in readers {
            let granted = reader.await.unwrap();
            assert!(
                granted.duration_since(released) < WOKEN_WITHIN,
                "woken {:?} after the release",
                granted.duration_since(released)
            );
        }

        write_java(&mut conn, 600).await;
        let written = Instant::now();
        let guard = lock
            .read_with(&distlock::LockOptions::new().wait(Duration::from_secs(10)))
            .await
            .unwrap();
        let waited = written.elapsed();
        assert!(
            waited >= Duration::from_millis(500) && waited < Duration::from_millis(1_500),
            "granted {waited:?} after a 600 ms lease was written"
        );
        guard.release().await.unwrap();

        let _: () = redis::pipe()
            .hset("plain", format!("{JAVA}:3"), 1)
            .pexpire("plain", 20_000)
            .query_async(&mut conn)
            .await
            .unwrap();
        let err = client.rwlock("plain").try_read().await.unwrap_err();
        assert!(err.to_string().contains("RLock"), "{err}");
        // And the other way: a lock on a read-write lock's hash.
        let _: () = redis::pipe()
            .hset("shared", "mode", "read")
            .hset("shared", format!("{JAVA}:4"), 1)
            .pexpire("shared", 20_000)
            .query_async(&mut conn)
            .await
            .unwrap();
        for fair in [false, true] {
            let options = distlock::LockOptions::new()
                .fair(fair)
                .wait(Duration::from_secs(5));
            let err = client
                .mutex("shared")
                .lock_with(&options)
                .await
                .unwrap_err();
            assert!(err.to_string().contains("getReadWriteLock"), "{err}");
        }
    });
}

/// A distlock writer that gives up waiting (behind a Java reader) takes its record out of
/// the waiting writers and tells the distlock readers that waited behind it, which go in
/// at once rather than at their next poll.
#[test]
fn a_writer_that_stops_waiting_lets_the_readers_behind_it_in_at_once() {
    distlock_testkit::block_on(async {
        let redis = distlock_testkit::redis_server().unwrap_or_else(|e| panic!("{e}"));
        let url = format!("redis://{}/0?layout=redisson", redis.addr());
        let client = distlock::Client::connect(&url).await.unwrap();
        let mut conn = raw(&redis).await;
        let java = format!("{JAVA}:6");
        let _: () = redis::pipe()
            .hset("doc", "mode", "read")
            .hset("doc", &java, 1)
            .set(format!("{{doc}}:{java}:rwlock_timeout:1"), 1)
            .pexpire(format!("{{doc}}:{java}:rwlock_timeout:1"), 20_000)
            .pexpire("doc", 20_000)
            .query_async(&mut conn)
            .await
            .unwrap();
        let writer = tokio::spawn({
            let client = client.clone();
            async move {
                let options = distlock::LockOptions::new().wait(Duration::from_millis(800));
                let started = Instant::now();
                let gave_up = client.rwlock("doc").write_with(&options).await;
                assert!(gave_up.is_err(), "the Java reader holds on");
                (started, Instant::now())
            }
        });
        writer_waits(&mut conn).await;
        let reader = tokio::spawn({
            let client = client.clone();
            async move {
                let options = distlock::LockOptions::new().wait(Duration::from_secs(10));
                let guard = client.rwlock("doc").read_with(&options).await.unwrap();
                let at = Instant::now();
                guard.release().await.unwrap();
                at
            }
        });
        let (started, gave_up) = writer.await.unwrap();
        let read = reader.await.unwrap();
        assert!(
            read.duration_since(started) >= Duration::from_millis(700),
            "the reader went in while the writer waited"
        );
        assert!(
            read.saturating_duration_since(gave_up) < WOKEN_WITHIN,
            "the reader went in {:?} after the writer left",
            read.saturating_duration_since(gave_up)
        );
    });
}
