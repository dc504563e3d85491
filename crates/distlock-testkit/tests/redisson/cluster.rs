//! Redisson's layout on a real Redis Cluster of three primaries, with plain pub/sub (the
//! Java clients' `shardedSubscriptionMode` `OFF`) and with sharded pub/sub (their
//! default): the properties that cross the cluster (exclusion, tokens of every kind, the
//! fair queue, status), every key of a lock in its slot, a release published on any node
//! waking a waiter, and releases published on the lock's shard and heard there.

use std::time::{Duration, Instant};

use redis::aio::MultiplexedConnection;

use super::{JAVA, listened_on};

/// A cluster whose Redisson clients publish as `pubsub` says.
async fn target(pubsub: &str) -> distlock_testkit::Target {
    let cluster = distlock_testkit::redis_cluster(3, 0).unwrap_or_else(|e| panic!("{e}"));
    let url = format!("{}?layout=redisson{pubsub}", cluster.url());
    distlock_testkit::Target::new(url).keep(cluster)
}

macro_rules! on_the_cluster {
    ($pubsub:literal: $($property:ident),+ $(,)?) => {$(
        #[test]
        fn $property() {
            distlock_testkit::block_on(async {
                distlock_testkit::conformance::$property(&target($pubsub).await).await;
            });
        }
    )+};
}

/// With plain pub/sub.
mod plain {
    use super::target;

    on_the_cluster!("&pubsub=plain":
        mutual_exclusion_across_tasks,
        fencing_tokens_increase_in_grant_order_for_every_kind,
        fair_mode_grants_in_arrival_order,
        status_shows_holders_and_waiters,
        rwlock_waiting_writer_blocks_new_readers,
    );
}

/// With sharded pub/sub, the Java clients' default on a cluster: the properties whose
/// waiters are woken by releases.
mod sharded {
    use super::target;

    on_the_cluster!("&semaphore=redisson":
        mutual_exclusion_across_tasks,
        fair_mode_grants_in_arrival_order,
        rwlock_waiting_writer_blocks_new_readers,
        semaphore_never_exceeds_its_permits,
    );
}

/// A lock whose name carries a hash tag keeps every key of its in the tag's slot (a fair
/// lock's queue and a read-write lock's hold keys among them); a Java release published
/// on a node that does not serve the lock wakes a distlock waiter at once; status without
/// a name walks every primary.
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

        java_holds(&mut conn, "stock{eu}", 11).await;
        let waiter = waits(&client, "stock{eu}");
        let mut elsewhere = nodes[(home + 1) % nodes.len()].clone();
        let channel = "redisson_lock__channel:stock{eu}";
        listened_on(&mut nodes, channel).await;
        java_releases(
            &mut conn,
            "stock{eu}",
            ("PUBLISH", channel),
            &mut elsewhere,
            waiter,
        )
        .await;
    });
}

/// With sharded pub/sub (the Java clients' default on a cluster), a distlock release of
/// each kind is published with `SPUBLISH` on the lock's shard, where a subscriber of the
/// shard (as a Java client is) hears it; a Java release published there wakes a distlock
/// waiter at once. `pubsub=sharded` and a URL naming one node take it too.
#[test]
fn with_sharded_pubsub_releases_are_published_and_heard_on_the_locks_shard() {
    distlock_testkit::block_on(async {
        let cluster = distlock_testkit::redis_cluster(3, 0).unwrap_or_else(|e| panic!("{e}"));
        let url = format!("{}?layout=redisson&semaphore=redisson", cluster.url());
        let client = distlock::Client::connect(&url).await.unwrap();
        let home = cluster.primary_of("eu").unwrap();
        let mut conn = connect(&cluster.nodes[home]).await;
        let (lock, rw, sem) = (
            "redisson_lock__channel:orders{eu}",
            "redisson_rwlock:stock{eu}",
            "redisson_sc:seats{eu}",
        );
        let mut shard = ShardListener::subscribe(&cluster.nodes[home], &[lock, rw, sem]).await;

        let guard = client.mutex("orders{eu}").lock().await.unwrap();
        guard.release().await.unwrap();
        assert_eq!(shard.next().await, (lock.to_owned(), "0".to_owned()));
        let writer = client.rwlock("stock{eu}").write().await.unwrap();
        writer.release().await.unwrap();
        assert_eq!(shard.next().await, (rw.to_owned(), "1".to_owned()));
        let reader = client.rwlock("stock{eu}").read().await.unwrap();
        reader.release().await.unwrap();
        assert_eq!(shard.next().await, (rw.to_owned(), "0".to_owned()));
        let permits = client
            .semaphore("seats{eu}", 3)
            .acquire_many(2)
            .await
            .unwrap();
        assert_eq!(
            shard.next().await,
            (sem.to_owned(), "3".to_owned()),
            "set up"
        );
        permits.release().await.unwrap();
        assert_eq!(shard.next().await, (sem.to_owned(), "3".to_owned()));

        java_holds(&mut conn, "orders{eu}", 12).await;
        let waiter = waits(&client, "orders{eu}");
        // The shard's own listener and the waiter's.
        super::listened_on_by(std::slice::from_mut(&mut conn), lock, 2).await;
        let mut node = conn.clone();
        java_releases(
            &mut conn,
            "orders{eu}",
            ("SPUBLISH", lock),
            &mut node,
            waiter,
        )
        .await;

        let sharded = format!("{}?layout=redisson&pubsub=sharded", cluster.url());
        let one_node = format!("redis://{}/0?layout=redisson", cluster.nodes[home].addr());
        for url in [sharded, one_node] {
            let client = distlock::Client::connect(&url).await.unwrap();
            let guard = client.mutex("orders{eu}").lock().await.unwrap();
            guard.release().await.unwrap();
            assert_eq!(
                shard.next().await,
                (lock.to_owned(), "0".to_owned()),
                "{url}"
            );
        }

        // A name whose keys would not share a slot is refused before the cluster is asked;
        // `status` of every lock passes over another program's such hash.
        for name in ["a{}b", "a}b", "{"] {
            let err = client.mutex(name).try_lock().await.unwrap_err();
            assert_eq!(err.kind(), distlock::ErrorKind::InvalidInput, "{err}");
            assert!(err.to_string().contains("hash tag"), "{err}");
            let err = client.status(Some(name)).await.unwrap_err();
            assert_eq!(err.kind(), distlock::ErrorKind::InvalidInput, "{err}");
        }
        let foreign = cluster.primary_of("a{}b").unwrap();
        let mut on_its_node = connect(&cluster.nodes[foreign]).await;
        let _: () = redis::cmd("HSET")
            .arg("a{}b")
            .arg("field")
            .arg("value")
            .query_async(&mut on_its_node)
            .await
            .unwrap();
        client.status(None).await.unwrap();
    });
}

/// With sharded pub/sub, a waiter whose lock's slot moves to another node (the server
/// ends the subscription there) subscribes again on the slot's new node, where a Java
/// release then wakes it at once.
#[test]
fn a_waiter_listens_again_on_the_node_its_locks_slot_moved_to() {
    distlock_testkit::block_on(async {
        let cluster = distlock_testkit::redis_cluster(3, 0).unwrap_or_else(|e| panic!("{e}"));
        let url = format!("{}?layout=redisson", cluster.url());
        let client = distlock::Client::connect(&url).await.unwrap();
        let home = cluster.primary_of("mig").unwrap();
        let next = (home + 1) % cluster.nodes.len();
        let (mut from, mut to) = (
            connect(&cluster.nodes[home]).await,
            connect(&cluster.nodes[next]).await,
        );
        let channel = "redisson_lock__channel:{mig}";
        java_holds(&mut from, "mig", 13).await;
        let waiter = waits(&client, "mig");
        super::listened_on_by(std::slice::from_mut(&mut from), channel, 1).await;

        let slot = slot(&mut from, "mig").await;
        let (from_id, to_id): (String, String) = (
            redis::cmd("CLUSTER")
                .arg("MYID")
                .query_async(&mut from)
                .await
                .unwrap(),
            redis::cmd("CLUSTER")
                .arg("MYID")
                .query_async(&mut to)
                .await
                .unwrap(),
        );
        let setslot = |state: &str, id: &str| {
            let mut cmd = redis::cmd("CLUSTER");
            cmd.arg("SETSLOT").arg(slot).arg(state).arg(id);
            cmd
        };
        let _: () = setslot("IMPORTING", &from_id)
            .query_async(&mut to)
            .await
            .unwrap();
        let _: () = setslot("MIGRATING", &to_id)
            .query_async(&mut from)
            .await
            .unwrap();
        let keys: Vec<String> = redis::cmd("CLUSTER")
            .arg("GETKEYSINSLOT")
            .arg(slot)
            .arg(100)
            .query_async(&mut from)
            .await
            .unwrap();
        let to_addr = cluster.nodes[next].addr();
        let _: () = redis::cmd("MIGRATE")
            .arg(to_addr.ip().to_string())
            .arg(to_addr.port())
            .arg("")
            .arg(0)
            .arg(5_000)
            .arg("KEYS")
            .arg(&keys)
            .query_async(&mut from)
            .await
            .unwrap();
        for node in &cluster.nodes {
            let _: () = setslot("NODE", &to_id)
                .query_async(&mut connect(node).await)
                .await
                .unwrap();
        }
        super::listened_on_by(std::slice::from_mut(&mut to), channel, 1).await;

        let mut node = to.clone();
        java_releases(&mut to, "mig", ("SPUBLISH", channel), &mut node, waiter).await;
    });
}

/// With sharded pub/sub, a waiter whose lock's primary is killed listens again on the
/// replica promoted in its place, where a Java release then wakes it at once.
#[test]
fn a_waiter_listens_again_on_the_replica_that_takes_over_its_locks_slot() {
    distlock_testkit::block_on(async {
        let mut cluster = distlock_testkit::redis_cluster(3, 1).unwrap_or_else(|e| panic!("{e}"));
        let url = format!("{}?layout=redisson", cluster.url());
        let client = distlock::Client::connect(&url).await.unwrap();
        let home = cluster.primary_of("fo").unwrap();
        let mut primary = connect(&cluster.nodes[home]).await;
        let channel = "redisson_lock__channel:{fo}";
        java_holds(&mut primary, "fo", 14).await;
        // On the replica too, before its primary goes.
        let _: () = redis::cmd("WAIT")
            .arg(1)
            .arg(2_000)
            .query_async(&mut primary)
            .await
            .unwrap();
        let waiter = waits(&client, "fo");
        super::listened_on_by(std::slice::from_mut(&mut primary), channel, 1).await;
        cluster.nodes[home].kill();

        // The replica promoted, with the waiter listening there again.
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut promoted = loop {
            let mut found = None;
            for (at, node) in cluster.nodes.iter().enumerate() {
                if at == home {
                    continue;
                }
                let mut conn = connect(node).await;
                let role: Vec<redis::Value> =
                    redis::cmd("ROLE").query_async(&mut conn).await.unwrap();
                let primary = matches!(&role[0], redis::Value::BulkString(b) if b == b"master");
                let (_, listeners): (String, u64) = redis::cmd("PUBSUB")
                    .arg("SHARDNUMSUB")
                    .arg(channel)
                    .query_async(&mut conn)
                    .await
                    .unwrap();
                if primary && listeners > 0 {
                    found = Some(conn);
                }
            }
            if let Some(conn) = found {
                break conn;
            }
            assert!(
                Instant::now() < deadline,
                "nobody listens on the promoted replica"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        let mut node = promoted.clone();
        java_releases(
            &mut promoted,
            "fo",
            ("SPUBLISH", channel),
            &mut node,
            waiter,
        )
        .await;
    });
}

/// A subscriber of shard channels on one node, speaking RESP2 on a socket of its own.
struct ShardListener {
    reader: tokio::io::BufReader<tokio::net::TcpStream>,
}

impl ShardListener {
    /// Subscribes to `channels` (in one slot) on `node`.
    async fn subscribe(node: &distlock_testkit::Server, channels: &[&str]) -> ShardListener {
        use tokio::io::AsyncWriteExt;
        let mut stream = tokio::net::TcpStream::connect(node.addr()).await.unwrap();
        let mut command = format!("*{}\r\n$10\r\nSSUBSCRIBE\r\n", channels.len() + 1);
        for channel in channels {
            command.push_str(&format!("${}\r\n{channel}\r\n", channel.len()));
        }
        stream.write_all(command.as_bytes()).await.unwrap();
        let mut listener = ShardListener {
            reader: tokio::io::BufReader::new(stream),
        };
        for channel in channels {
            let confirmed = listener.array().await;
            assert_eq!(confirmed[..2], ["ssubscribe", channel], "{confirmed:?}");
        }
        listener
    }

    /// The next message: its channel and payload (within 1 s).
    async fn next(&mut self) -> (String, String) {
        let message = tokio::time::timeout(Duration::from_secs(1), self.array())
            .await
            .expect("a message on the shard");
        assert_eq!(message.len(), 3, "{message:?}");
        assert_eq!(message[0], "smessage", "{message:?}");
        (message[1].clone(), message[2].clone())
    }

    /// One reply: an array of bulk strings and integers, each as text.
    async fn array(&mut self) -> Vec<String> {
        let header = self.line().await;
        let count: usize = header.strip_prefix('*').unwrap().parse().unwrap();
        let mut items = Vec::with_capacity(count);
        for _ in 0..count {
            let item = self.line().await;
            items.push(match item.strip_prefix(':') {
                Some(number) => number.to_owned(),
                None => self.line().await,
            });
        }
        items
    }

    async fn line(&mut self) -> String {
        use tokio::io::AsyncBufReadExt;
        let mut line = String::new();
        self.reader.read_line(&mut line).await.unwrap();
        line.trim_end_matches("\r\n").to_owned()
    }
}

/// A Java client's hold of `name` (thread `thread`), as Redisson writes it, for 60 s.
async fn java_holds(conn: &mut MultiplexedConnection, name: &str, thread: u32) {
    let _: () = redis::pipe()
        .hset(name, format!("{JAVA}:{thread}"), 1)
        .pexpire(name, 60_000)
        .query_async(conn)
        .await
        .unwrap();
}

/// A distlock waiter for `name` (for up to a minute): when it was granted.
fn waits(client: &distlock::Client, name: &str) -> tokio::task::JoinHandle<Instant> {
    let (client, name) = (client.clone(), name.to_owned());
    tokio::spawn(async move {
        let wait = distlock::LockOptions::new().wait(Duration::from_secs(60));
        let guard = client.mutex(&name).lock_with(&wait).await.unwrap();
        let at = Instant::now();
        guard.release().await.unwrap();
        at
    })
}

/// A Java client's release of `name`: the hash deleted on `conn`, then `0` published
/// with `publish` (`PUBLISH` or `SPUBLISH`, and the channel) on `publisher`; `waiter`
/// goes in within 200 ms.
async fn java_releases(
    conn: &mut MultiplexedConnection,
    name: &str,
    (publish, channel): (&str, &str),
    publisher: &mut MultiplexedConnection,
    waiter: tokio::task::JoinHandle<Instant>,
) {
    let _: () = redis::cmd("DEL").arg(name).query_async(conn).await.unwrap();
    let released = Instant::now();
    let _: i64 = redis::cmd(publish)
        .arg(channel)
        .arg("0")
        .query_async(publisher)
        .await
        .unwrap();
    let granted = waiter.await.unwrap();
    assert!(
        granted.duration_since(released) < Duration::from_millis(200),
        "woken {:?} after the release",
        granted.duration_since(released)
    );
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
