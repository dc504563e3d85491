//! The semaphore in Redisson's layout (`semaphore=redisson`), key by key and message by
//! message, beside Java clients written as Redisson's semaphore writes.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use redis::aio::MultiplexedConnection;

use super::{raw, unix_ms, wait_for_listeners};

const CHANNEL: &str = "redisson_sc:{pool}";
/// How soon a waiter takes permits after the release it hears: far below the 2 s at which
/// it would poll anyway, with room for a loaded machine.
const WOKEN_WITHIN: Duration = Duration::from_millis(200);

fn url(redis: &distlock_testkit::Server) -> String {
    format!(
        "redis://{}/0?layout=redisson&semaphore=redisson&uuid=rust-sem",
        redis.addr()
    )
}

async fn available(conn: &mut MultiplexedConnection) -> i64 {
    redis::cmd("GET")
        .arg("pool")
        .query_async(conn)
        .await
        .unwrap()
}

/// Takes `permits` as Java's `tryAcquire` does: only if that many are available.
async fn java_try_acquire(conn: &mut MultiplexedConnection, permits: i64) -> bool {
    let script = redis::Script::new(
        "local n = tonumber(redis.call('GET', KEYS[1]) or '0') \
         if n < tonumber(ARGV[1]) then return 0 end \
         redis.call('DECRBY', KEYS[1], ARGV[1]) return 1",
    );
    let taken: i64 = script
        .key("pool")
        .arg(permits)
        .invoke_async(conn)
        .await
        .unwrap();
    taken == 1
}

/// Gives `permits` back as Java's `release` does: the number raised, the new number
/// published.
async fn java_release(conn: &mut MultiplexedConnection, permits: i64) {
    let now: i64 = redis::cmd("INCRBY")
        .arg("pool")
        .arg(permits)
        .query_async(conn)
        .await
        .unwrap();
    let _: i64 = redis::cmd("PUBLISH")
        .arg(CHANNEL)
        .arg(now)
        .query_async(conn)
        .await
        .unwrap();
}

/// Many distlock holders never take more than the limit between them.
#[test]
fn distlock_holders_never_take_more_than_the_limit() {
    distlock_testkit::block_on(async {
        let redis = distlock_testkit::redis_server().unwrap_or_else(|e| panic!("{e}"));
        let target = distlock_testkit::Target::new(url(&redis)).keep(redis);
        distlock_testkit::conformance::semaphore_never_exceeds_its_permits(&target).await;
    });
}

/// The first grant sets the semaphore up at its limit, as Java's `trySetPermits` does
/// (the limit published on `redisson_sc:{name}`), and takes its permits from the number;
/// distlock records its holder beside it, with its permits, token and renewal; Java's
/// takes and distlock's share the number; `status` shows distlock's holder and the
/// permits Java holds (Redisson records no holder); a release gives the permits back and
/// publishes the number; `status` shows a waiter, and a Java release wakes it at once.
#[test]
fn permits_are_taken_from_and_given_back_to_redissons_number() {
    distlock_testkit::block_on(async {
        let redis = distlock_testkit::redis_server().unwrap_or_else(|e| panic!("{e}"));
        let client = distlock::Client::connect(&url(&redis)).await.unwrap();
        let mut conn = raw(&redis).await;
        let subscriber = redis::Client::open(format!("redis://{}/0", redis.addr())).unwrap();
        let mut pubsub = subscriber.get_async_pubsub().await.unwrap();
        pubsub.subscribe(CHANNEL).await.unwrap();
        let mut messages = pubsub.on_message();
        let mut next_message = async || {
            let message = tokio::time::timeout(Duration::from_secs(1), messages.next())
                .await
                .expect("a message on the semaphore's channel")
                .unwrap();
            message.get_payload::<String>().unwrap()
        };

        let sem = client.semaphore("pool", 5);
        let options = distlock::LockOptions::new().ttl(Duration::from_secs(20));
        let two = sem.acquire_with(2, &options).await.unwrap();
        assert_eq!(next_message().await, "5", "set up at the limit");
        assert_eq!(available(&mut conn).await, 3);
        let records: HashMap<String, String> = redis::cmd("HGETALL")
            .arg("distlock_holders:{pool}")
            .query_async(&mut conn)
            .await
            .unwrap();
        assert_eq!(records.len(), 1, "{records:?}");
        let (field, record) = records.iter().next().unwrap();
        assert!(field.starts_with("rust-sem:"), "{field}");
        assert!(record.contains("\"n\":2"), "{record}");
        assert!(
            record.contains(&format!("\"f\":\"{}\"", two.fencing_token())),
            "{record}"
        );
        let until: f64 = redis::cmd("ZSCORE")
            .arg("distlock_renewed:{pool}")
            .arg(field)
            .query_async(&mut conn)
            .await
            .unwrap();
        let ahead = until as i128 - unix_ms() as i128;
        assert!(
            (15_000..=21_000).contains(&ahead),
            "renewed until {ahead} ms ahead"
        );

        assert!(
            java_try_acquire(&mut conn, 2).await,
            "Java takes 2 of the 3 left"
        );
        assert!(sem.try_acquire_many(2).await.unwrap().is_none());
        let one = sem.try_acquire().await.unwrap().expect("the last permit");
        assert_eq!(available(&mut conn).await, 0);
        let states = client.status(Some("pool")).await.unwrap();
        let held: Vec<(u32, bool)> = states[0]
            .holders
            .iter()
            .map(|h| (h.permits, h.owner.contains("Java")))
            .collect();
        assert_eq!(held.iter().map(|(n, _)| n).sum::<u32>(), 5, "{held:?}");
        assert!(held.contains(&(2, true)), "Java's 2 permits: {held:?}");

        one.release().await.unwrap();
        assert_eq!(next_message().await, "1", "the number now available");
        let waiter = tokio::spawn({
            let client = client.clone();
            async move {
                let guard = client
                    .semaphore("pool", 5)
                    .acquire_with(
                        3,
                        &distlock::LockOptions::new().wait(Duration::from_secs(10)),
                    )
                    .await
                    .unwrap();
                (guard, Instant::now())
            }
        });
        wait_for_listeners(&mut conn, CHANNEL).await;
        let deadline = Instant::now() + Duration::from_secs(10);
        while client.status(Some("pool")).await.unwrap()[0].waiters.len() != 1 {
            assert!(Instant::now() < deadline, "status never showed the waiter");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let released = Instant::now();
        java_release(&mut conn, 2).await;
        let (three, granted) = waiter.await.unwrap();
        assert!(
            granted.duration_since(released) < WOKEN_WITHIN,
            "woken {:?} after Java's release",
            granted.duration_since(released)
        );
        assert_eq!(available(&mut conn).await, 0);
        three.release().await.unwrap();
        two.release().await.unwrap();
        assert_eq!(available(&mut conn).await, 5);
    });
}

/// A holder that stops renewing keeps its permits (Redisson's semaphore leases none):
/// they stay taken, and `status` says they are lost, until someone releases them; a
/// semaphore deleted (how an operator gets lost permits back) is set up again less the
/// live holders' permits, and the stopped holder's late release gives nothing back; a
/// key of another kind under the name is an error that says so.
#[test]
fn permits_of_a_holder_that_stopped_are_lost_and_status_says_so() {
    distlock_testkit::block_on(async {
        let redis = distlock_testkit::redis_server().unwrap_or_else(|e| panic!("{e}"));
        let client = distlock::Client::connect(&url(&redis)).await.unwrap();
        let mut conn = raw(&redis).await;
        let sem = client.semaphore("pool", 3);
        let stopped = distlock::LockOptions::new()
            .ttl(Duration::from_millis(300))
            .auto_renew(false);
        let lost = sem.acquire_with(2, &stopped).await.unwrap();
        tokio::time::sleep(Duration::from_millis(600)).await;
        assert!(
            sem.try_acquire_many(2).await.unwrap().is_none(),
            "the permits did not come back"
        );
        let states = client.status(Some("pool")).await.unwrap();
        let holder = &states[0].holders[0];
        assert!(holder.owner.contains("lost"), "{holder:?}");
        assert_eq!(holder.permits, 2);

        let live = sem.acquire().await.unwrap();
        let _: () = redis::cmd("DEL")
            .arg("pool")
            .query_async(&mut conn)
            .await
            .unwrap();
        let again = sem.try_acquire().await.unwrap().expect("set up again");
        assert_eq!(
            available(&mut conn).await,
            1,
            "3, less the live holder's and the new one"
        );
        let late = lost.release().await;
        assert_eq!(available(&mut conn).await, 1, "the late release: {late:?}");
        again.release().await.unwrap();
        live.release().await.unwrap();

        let _: () = redis::cmd("HSET")
            .arg("hashed")
            .arg("x")
            .arg(1)
            .query_async(&mut conn)
            .await
            .unwrap();
        let err = client
            .semaphore("hashed", 2)
            .try_acquire()
            .await
            .unwrap_err();
        assert!(
            err.to_string().contains("not a Redisson semaphore"),
            "{err}"
        );
    });
}
