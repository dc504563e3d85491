//! Replica-acknowledged locks (`?min_replicas=1`) against a real primary with one replica.

use std::time::{Duration, Instant};

use distlock::ErrorKind;
use distlock_testkit::Server;

/// A primary and a replica of it that has finished its first sync.
async fn primary_and_replica() -> (Server, Server) {
    let primary = distlock_testkit::redis_server().unwrap_or_else(|e| panic!("{e}"));
    let port = primary.addr().port().to_string();
    let replica = distlock_testkit::redis_server_with(&["--replicaof", "127.0.0.1", &port])
        .unwrap_or_else(|e| panic!("{e}"));
    let mut conn = connection(&primary).await;
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let info: String = redis::cmd("INFO")
            .arg("replication")
            .query_async(&mut conn)
            .await
            .unwrap();
        if info.contains("state=online") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the replica never synced: {info}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    (primary, replica)
}

async fn connection(server: &Server) -> redis::aio::MultiplexedConnection {
    redis::Client::open(format!("redis://{}/0", server.addr()))
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap()
}

/// The value of the lock key `orders` on `server`.
async fn lock_value(server: &Server) -> Option<String> {
    redis::cmd("GET")
        .arg("orders")
        .query_async(&mut connection(server).await)
        .await
        .unwrap()
}

#[test]
fn a_grant_is_handed_out_only_once_the_replica_has_it() {
    distlock_testkit::block_on(async {
        let (primary, replica) = primary_and_replica().await;
        let url = format!(
            "redis://{}/0?min_replicas=1&replica_timeout=300ms",
            primary.addr()
        );
        let client = distlock::Client::connect(&url).await.unwrap();
        let guard = client.mutex("orders").lock().await.unwrap();
        assert!(
            lock_value(&replica).await.is_some(),
            "the replica has the lock when the guard is handed out"
        );
        guard.release().await.unwrap();

        replica.pause();
        let started = Instant::now();
        let err = client.mutex("orders").lock().await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::QuorumNotReached, "{err}");
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "{:?}",
            started.elapsed()
        );
        assert_eq!(
            lock_value(&primary).await,
            None,
            "the unreplicated grant was given back"
        );
        replica.resume();
        let again = client.mutex("orders").lock().await.unwrap();
        assert!(again.fencing_token() > 0);
        again.release().await.unwrap();
    });
}

#[test]
fn replica_options_are_checked() {
    distlock_testkit::block_on(async {
        for bad in [
            "min_replicas=many",
            "replica_timeout=0s",
            "replica_timeout=soon",
        ] {
            let url = format!("redis://127.0.0.1:1/0?{bad}");
            let err = distlock::Client::connect(&url).await.unwrap_err();
            assert_eq!(err.kind(), ErrorKind::InvalidInput, "{bad}: {err}");
        }
    });
}
