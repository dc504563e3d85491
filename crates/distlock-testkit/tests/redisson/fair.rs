//! The fair lock in Redisson's layout, key by key and message by message, beside Java
//! waiters written as Redisson writes them.

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use redis::aio::MultiplexedConnection;

use super::{JAVA, raw, unix_ms, wait_for_listeners};

const QUEUE: &str = "redisson_lock_queue:{fq}";
const DEADLINES: &str = "redisson_lock_timeout:{fq}";
const HEARD: &str = "distlock_fair_heard:{fq}";
/// How soon a waiter told on its channel takes the lock: far below the 2 s at which it
/// would poll anyway, with room for a loaded machine.
const WOKEN_WITHIN: Duration = Duration::from_millis(200);
/// A turn: the URL's `fair_wait_timeout` (the Java clients' `fairLockWaitTimeout`).
const TURN: u64 = 5_000;

async fn queue(conn: &mut MultiplexedConnection) -> Vec<String> {
    redis::cmd("LRANGE")
        .arg(QUEUE)
        .arg(0)
        .arg(-1)
        .query_async(conn)
        .await
        .unwrap()
}

async fn deadline(conn: &mut MultiplexedConnection, field: &str) -> Option<u64> {
    redis::cmd("ZSCORE")
        .arg(DEADLINES)
        .arg(field)
        .query_async(conn)
        .await
        .unwrap()
}

/// Queues a Java waiter as Redisson's fair lock does: its field at the tail of the queue,
/// its deadline beside it.
async fn queue_java(conn: &mut MultiplexedConnection, field: &str, deadline_ms: u64) {
    let _: () = redis::pipe()
        .rpush(QUEUE, field)
        .zadd(DEADLINES, field, deadline_ms)
        .query_async(conn)
        .await
        .unwrap();
}

/// Waits until the queue holds `n` waiters (within 10 s) and answers it.
async fn queued(conn: &mut MultiplexedConnection, n: usize) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let fields = queue(conn).await;
        if fields.len() == n {
            return fields;
        }
        assert!(
            Instant::now() < deadline,
            "queue {fields:?}, not {n} waiters"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A distlock waiter queues behind a Java waiter in Redisson's queue, its deadline a turn
/// after the Java waiter's; a Java release tells the Java head alone, and distlock does
/// not jump the queue; the Java waiter's turn (it takes the lock, moves the queue up a
/// turn, releases telling the next head on its channel) wakes distlock at once; a
/// distlock release tells the head on its own channel; a Java waiter past its deadline is
/// passed over; a distlock waiter that gives up leaves the queue, and one nobody hears
/// that is overdue for a poll leaves it at the release. `status` shows the queue in its order, Java's waiters by
/// their fields.
#[test]
fn a_fair_lock_keeps_redissons_queue_and_wakes_only_its_head() {
    distlock_testkit::block_on(async {
        let redis = distlock_testkit::redis_server().unwrap_or_else(|e| panic!("{e}"));
        let url = format!(
            "redis://{}/0?layout=redisson&uuid=rust-fair&fair_wait_timeout=5s",
            redis.addr()
        );
        let client = distlock::Client::connect(&url).await.unwrap();
        let mut conn = raw(&redis).await;
        let fair = distlock::LockOptions::new()
            .fair(true)
            .wait(Duration::from_secs(20));
        let (java_holder, java_waiter) = (format!("{JAVA}:1"), format!("{JAVA}:2"));
        let java_deadline = unix_ms() as u64 + 20_000 + TURN;
        let _: () = redis::pipe()
            .hset("fq", &java_holder, 1)
            .pexpire("fq", 20_000)
            .query_async(&mut conn)
            .await
            .unwrap();
        queue_java(&mut conn, &java_waiter, java_deadline).await;

        let waiter = tokio::spawn({
            let (client, fair) = (client.clone(), fair.clone());
            async move {
                let guard = client.mutex("fq").lock_with(&fair).await.unwrap();
                let at = Instant::now();
                (guard, at)
            }
        });
        let fields = queued(&mut conn, 2).await;
        assert_eq!(fields[0], java_waiter);
        let ours = fields[1].clone();
        assert!(ours.starts_with("rust-fair:"), "{ours}");
        assert_eq!(deadline(&mut conn, &ours).await, Some(java_deadline + TURN));
        let heard: Option<u64> = redis::cmd("ZSCORE")
            .arg(HEARD)
            .arg(&ours)
            .query_async(&mut conn)
            .await
            .unwrap();
        assert!(
            heard.is_some(),
            "distlock's waiter keeps its own record of life"
        );
        let states = client.status(Some("fq")).await.unwrap();
        let waiters = &states[0].waiters;
        assert_eq!(waiters.len(), 2, "{waiters:?}");
        assert_eq!(
            waiters[0].owner, java_waiter,
            "status shows the queue's order"
        );
        assert!(waiters.iter().all(|w| w.fair));

        // The Java holder releases as Redisson's fair lock does: the Java head's turn.
        let _: () = redis::pipe()
            .del("fq")
            .publish(format!("redisson_lock__channel:{{fq}}:{java_waiter}"), "0")
            .query_async(&mut conn)
            .await
            .unwrap();
        // Woken on its own channel, the distlock waiter tries again: the Java head's turn.
        let _: () = redis::cmd("PUBLISH")
            .arg(format!("redisson_lock__channel:{{fq}}:{ours}"))
            .arg("0")
            .query_async(&mut conn)
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(!waiter.is_finished(), "distlock jumped the queue");
        let exists: i64 = redis::cmd("EXISTS")
            .arg("fq")
            .query_async(&mut conn)
            .await
            .unwrap();
        assert_eq!(exists, 0, "the lock stays free for the Java head");
        // The Java waiter takes its turn, moving the queue up, then releases.
        let _: () = redis::pipe()
            .lpop(QUEUE, None)
            .zrem(DEADLINES, &java_waiter)
            .zincr(DEADLINES, &ours, -(TURN as i64))
            .hset("fq", &java_waiter, 1)
            .pexpire("fq", 20_000)
            .query_async(&mut conn)
            .await
            .unwrap();
        let our_channel = format!("redisson_lock__channel:{{fq}}:{ours}");
        wait_for_listeners(&mut conn, &our_channel).await;
        let released = Instant::now();
        let _: () = redis::pipe()
            .del("fq")
            .publish(&our_channel, "0")
            .query_async(&mut conn)
            .await
            .unwrap();
        let (guard, granted) = waiter.await.unwrap();
        let woken = granted.duration_since(released);
        assert!(woken < WOKEN_WITHIN, "woken {woken:?} after the release");
        assert!(
            queue(&mut conn).await.is_empty(),
            "the head left the queue as it took the lock"
        );
        let token: u64 = redis::cmd("GET")
            .arg("redisson_lock_token:{fq}")
            .query_async(&mut conn)
            .await
            .unwrap();
        assert_eq!(
            guard.fencing_token(),
            token,
            "a fair grant counts in the fenced lock's counter"
        );

        // distlock releases: the Java head is told on its own channel.
        let next_java = format!("{JAVA}:3");
        queue_java(&mut conn, &next_java, unix_ms() as u64 + 30_000).await;
        let subscriber = redis::Client::open(format!("redis://{}/0", redis.addr())).unwrap();
        let mut pubsub = subscriber.get_async_pubsub().await.unwrap();
        pubsub
            .subscribe(format!("redisson_lock__channel:{{fq}}:{next_java}"))
            .await
            .unwrap();
        guard.release().await.unwrap();
        let message = tokio::time::timeout(Duration::from_secs(1), pubsub.on_message().next())
            .await
            .expect("the head is told")
            .unwrap();
        assert_eq!(message.get_payload::<String>().unwrap(), "0");
        // While the Java head lives, a distlock waiter waits behind it though the lock is free.
        let behind = client
            .mutex("fq")
            .lock_with(&fair.clone().wait(Duration::from_millis(300)))
            .await;
        assert_eq!(behind.unwrap_err().kind(), distlock::ErrorKind::Timeout);
        assert_eq!(
            queue(&mut conn).await,
            vec![next_java.clone()],
            "it left the queue as it gave up"
        );

        // A Java head past its deadline (gone) is passed over.
        let _: () = redis::cmd("ZADD")
            .arg(DEADLINES)
            .arg(unix_ms() as u64 - 1)
            .arg(&next_java)
            .query_async(&mut conn)
            .await
            .unwrap();
        let held = client
            .mutex("fq")
            .lock_with(&fair.clone().wait(Duration::from_secs(1)))
            .await
            .expect("a gone head does not keep the lock");
        assert!(queue(&mut conn).await.is_empty());

        // A distlock waiter that gives up leaves the queue and its record of life.
        let gave_up = client
            .mutex("fq")
            .lock_with(&fair.clone().wait(Duration::from_millis(300)))
            .await;
        assert_eq!(gave_up.unwrap_err().kind(), distlock::ErrorKind::Timeout);
        assert!(queue(&mut conn).await.is_empty());
        let (deadlines, heard): (u64, u64) = redis::pipe()
            .zcard(DEADLINES)
            .zcard(HEARD)
            .query_async(&mut conn)
            .await
            .unwrap();
        assert_eq!((deadlines, heard), (0, 0));

        // A distlock waiter at the head that nobody hears on its channel and that is
        // overdue for a poll (its process died with its connection) leaves the queue at
        // the release: the next is told at once.
        let gone = "rust-gone:1";
        let now = unix_ms() as u64;
        let _: () = redis::pipe()
            .rpush(QUEUE, gone)
            .zadd(DEADLINES, gone, now + 300_000)
            .zadd(HEARD, gone, now - 3_000)
            .query_async(&mut conn)
            .await
            .unwrap();
        let next = tokio::spawn({
            let (client, fair) = (client.clone(), fair.clone());
            async move {
                let guard = client.mutex("fq").lock_with(&fair).await.unwrap();
                let at = Instant::now();
                guard.release().await.unwrap();
                at
            }
        });
        let fields = queued(&mut conn, 2).await;
        wait_for_listeners(
            &mut conn,
            &format!("redisson_lock__channel:{{fq}}:{}", fields[1]),
        )
        .await;
        let released = Instant::now();
        held.release().await.unwrap();
        let woken = next.await.unwrap().duration_since(released);
        assert!(woken < WOKEN_WITHIN, "woken {woken:?} after the release");
        assert!(queue(&mut conn).await.is_empty());
    });
}
