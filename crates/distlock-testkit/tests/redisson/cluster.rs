//! Redisson's layout on a real Redis Cluster of three primaries, with plain pub/sub (the
//! Java clients' `shardedSubscriptionMode` `OFF`): the properties that cross the cluster
//! (exclusion, tokens of every kind, the fair queue, status), every key of a lock in its
//! slot, a release published on any node waking a waiter, and the default (sharded
//! pub/sub, which distlock does not speak yet) refused with the reason.

use std::time::{Duration, Instant};

use redis::aio::MultiplexedConnection;

use super::{JAVA, listened_on};

async fn target() -> distlock_testkit::Target {
    let cluster = distlock_testkit::redis_cluster(3, 0).unwrap_or_else(|e| panic!("{e}"));
    let url = format!("{}?layout=redisson&pubsub=plain", cluster.url());
    distlock_testkit::Target::new(url).keep(cluster)
}

macro_rules! on_the_cluster {
    ($($property:ident),+ $(,)?) => {$(
        #[test]
        fn $property() {
            distlock_testkit::block_on(async {
                distlock_testkit::conformance::$property(&target().await).await;
            });
        }
    )+};
}

on_the_cluster!(
    mutual_exclusion_across_tasks,
    fencing_tokens_increase_in_grant_order_for_every_kind,
    fair_mode_grants_in_arrival_order,
    status_shows_holders_and_waiters,
    rwlock_waiting_writer_blocks_new_readers,
);

/// A lock whose name carries a hash tag keeps every key of its in the tag's slot (a fair
/// lock's queue and a read-write lock's hold keys among them); a Java release published
/// on a node that does not serve the lock wakes a distlock waiter at once; status without
/// a name walks every primary; the default pub/sub is refused on a cluster.
#[test]
fn every_key_of_a_lock_is_in_its_slot_and_any_nodes_release_wakes_a_waiter() {
    distlock_testkit::block_on(async {
        let cluster = distlock_testkit::redis_cluster(3, 0).unwrap_or_else(|e| panic!("{e}"));
        let url = format!("{}?layout=redisson&pubsub=plain", cluster.url());
        let client = distlock::Client::connect(&url).await.unwrap();
        let fair = distlock::LockOptions::new().fair(true);
        let (fair_guard, read_guard, write_guard) = (
            client.mutex("orders{eu}").lock_with(&fair).await.unwrap(),
            client.rwlock("stock{eu}").read().await.unwrap(),
            client.rwlock("{eu}").write().await.unwrap(),
        );
        let mut nodes = Vec::new();
        for node in &cluster.nodes {
            nodes.push(connect(node).await);
        }
        let home = cluster.primary_of("eu").unwrap();
        let mut conn = nodes[home].clone();
        let keys: Vec<String> = redis::cmd("KEYS")
            .arg("*")
            .query_async(&mut conn)
            .await
            .unwrap();
        for expected in [
            "orders{eu}",
            "stock{eu}",
            "{eu}",
            "redisson_lock_token:{eu}",
        ] {
            assert!(
                keys.iter().any(|k| k == expected),
                "{expected} not in {keys:?}"
            );
        }
        assert!(
            keys.iter().any(|k| k.contains(":rwlock_timeout:")),
            "the read hold's key: {keys:?}"
        );
        let eu = slot(&mut conn, "eu").await;
        for key in &keys {
            assert_eq!(slot(&mut conn, key).await, eu, "{key} is in another slot");
        }
        let all = client.status(None).await.unwrap();
        let names: Vec<&str> = all.iter().map(|s| s.name.as_str()).collect();
        for name in ["orders{eu}", "stock{eu}", "{eu}"] {
            assert!(names.contains(&name), "status shows {names:?}");
        }
        fair_guard.release().await.unwrap();
        read_guard.release().await.unwrap();
        write_guard.release().await.unwrap();

        let java_field = format!("{JAVA}:11");
        let _: () = redis::pipe()
            .hset("stock{eu}", &java_field, 1)
            .pexpire("stock{eu}", 20_000)
            .query_async(&mut conn)
            .await
            .unwrap();
        let waiter = tokio::spawn({
            let client = client.clone();
            async move {
                let guard = client.mutex("stock{eu}").lock().await.unwrap();
                let at = Instant::now();
                guard.release().await.unwrap();
                at
            }
        });
        let mut elsewhere = nodes[(home + 1) % nodes.len()].clone();
        listened_on(&mut nodes, "redisson_lock__channel:stock{eu}").await;
        let _: () = redis::cmd("DEL")
            .arg("stock{eu}")
            .query_async(&mut conn)
            .await
            .unwrap();
        let released = Instant::now();
        let _: i64 = redis::cmd("PUBLISH")
            .arg("redisson_lock__channel:stock{eu}")
            .arg("0")
            .query_async(&mut elsewhere)
            .await
            .unwrap();
        let granted = waiter.await.unwrap();
        assert!(
            granted.duration_since(released) < Duration::from_millis(200),
            "woken {:?} after the release",
            granted.duration_since(released)
        );

        for query in ["layout=redisson", "layout=redisson&pubsub=sharded"] {
            let err = distlock::Client::connect(&format!("{}?{query}", cluster.url()))
                .await
                .unwrap_err();
            assert_eq!(err.kind(), distlock::ErrorKind::Unsupported, "{err}");
            assert!(err.to_string().contains("shardedSubscriptionMode"), "{err}");
        }
        let one_node = format!("redis://{}/0?layout=redisson", cluster.nodes[home].addr());
        let err = distlock::Client::connect(&one_node).await.unwrap_err();
        assert!(err.to_string().contains("pubsub=plain"), "{err}");
    });
}

async fn connect(node: &distlock_testkit::Server) -> MultiplexedConnection {
    redis::Client::open(format!("redis://{}/0", node.addr()))
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap()
}

async fn slot(conn: &mut MultiplexedConnection, key: &str) -> u16 {
    redis::cmd("CLUSTER")
        .arg("KEYSLOT")
        .arg(key)
        .query_async(conn)
        .await
        .unwrap()
}
