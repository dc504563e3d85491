//! The conformance suite, cross-process tests and process faults against SQLite, and the
//! faults only SQLite has: a writer that holds the database.

use std::time::Duration;

async fn target() -> distlock_testkit::Target {
    let dir = tempfile::Builder::new()
        .prefix("distlock-sqlite-")
        .tempdir()
        .expect("a temporary directory");
    let url = format!("sqlite://{}", dir.path().join("locks.db").display());
    distlock_testkit::Target::new(url).keep(dir)
}

distlock_testkit::conformance_suite!(target);
distlock_testkit::process_suite!(target);

#[test]
fn fencing_survives_reopening_the_database() {
    distlock_testkit::block_on(async {
        let target = target().await;
        let first = {
            let client = target.client().await;
            let guard = client.mutex("reopen").lock().await.unwrap();
            let token = guard.fencing_token();
            guard.release().await.unwrap();
            token
        };
        let client = target.client().await;
        let guard = client.mutex("reopen").lock().await.unwrap();
        assert!(guard.fencing_token() > first);
    });
}

#[test]
fn missing_directory_is_a_clear_error() {
    distlock_testkit::block_on(async {
        let err = distlock::Client::connect("sqlite:///no/such/dir/locks.db")
            .await
            .unwrap_err();
        assert_eq!(err.kind(), distlock::ErrorKind::InvalidInput);
        assert!(err.to_string().contains("/no/such/dir"), "{err}");
    });
}

/// Holds SQLite's write lock from a connection of its own, as a stalled writer or a
/// backup tool would, until dropped.
struct StalledWriter(sqlx::SqliteConnection);

impl StalledWriter {
    async fn start(path: &std::path::Path) -> StalledWriter {
        use sqlx::{Connection, Executor};
        let mut conn = sqlx::SqliteConnection::connect(&format!("sqlite://{}", path.display()))
            .await
            .unwrap();
        conn.execute("BEGIN EXCLUSIVE").await.unwrap();
        StalledWriter(conn)
    }

    async fn stop(mut self) {
        use sqlx::Executor;
        self.0.execute("ROLLBACK").await.unwrap();
    }
}

#[test]
fn failed_renewals_put_the_lease_at_risk_then_lose_it() {
    use distlock::{Health, LockOptions};
    distlock_testkit::block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("locks.db");
        let url = format!("sqlite://{}?busy_timeout=100ms", path.display());
        let client = distlock::Client::connect(&url).await.unwrap();
        let options = LockOptions::new()
            .ttl(Duration::from_millis(1500))
            .renew_every(Duration::from_millis(200));
        let guard = client.mutex("outage").lock_with(&options).await.unwrap();

        let stall = StalledWriter::start(&path).await;
        assert!(
            distlock_testkit::wait_for_health(&guard, Health::AtRisk, Duration::from_secs(2)).await,
            "a failed renewal turns the lease AtRisk"
        );
        stall.stop().await;
        assert!(
            distlock_testkit::wait_for_health(&guard, Health::Held, Duration::from_secs(2)).await,
            "a later successful renewal makes it Held again"
        );

        let stall = StalledWriter::start(&path).await;
        let started = std::time::Instant::now();
        tokio::time::timeout(Duration::from_secs(3), guard.lost())
            .await
            .expect("the lease is lost when it cannot be renewed before its deadline");
        assert!(
            started.elapsed() < Duration::from_millis(1500),
            "lost before the ttl ran out"
        );
        stall.stop().await;
        let err = guard.renew().await.unwrap_err();
        assert_eq!(err.kind(), distlock::ErrorKind::LockLost, "lost stays lost");
        let _next = distlock_testkit::take_over(
            &url,
            "outage",
            guard.fencing_token(),
            Duration::from_secs(3),
        )
        .await;
    });
}
