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

distlock_testkit::conformance_suite!(target, liveness = Lease);
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

/// Leases expire by the machine's monotonic clock, anchored per boot in the database: a
/// database last opened in another boot (the machine restarted, every holder with it) has
/// its leases and waiters deleted when it is opened, and its tokens keep increasing.
#[test]
fn leases_of_an_earlier_boot_are_gone_and_tokens_go_on() {
    use sqlx::{Connection, Executor};
    distlock_testkit::block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("locks.db");
        let url = format!("sqlite://{}", path.display());
        let before = distlock::Client::connect(&url).await.unwrap();
        let options = distlock::LockOptions::new().ttl(Duration::from_secs(60));
        let held = before.mutex("rebooted").lock_with(&options).await.unwrap();
        let token = held.fencing_token();
        // What the machine's restart leaves: the rows, under another boot's anchor.
        let mut db = sqlx::SqliteConnection::connect(&url).await.unwrap();
        db.execute("UPDATE distlock_clock SET boot = 'an-earlier-boot', anchor_ms = 5")
            .await
            .unwrap();
        db.close().await.unwrap();

        let after = distlock::Client::connect(&url).await.unwrap();
        let next = after
            .mutex("rebooted")
            .try_lock()
            .await
            .unwrap()
            .expect("the earlier boot's lease is gone");
        assert!(next.fencing_token() > token);
        let mut db = sqlx::SqliteConnection::connect(&url).await.unwrap();
        let (boot, anchor): (String, i64) =
            sqlx::query_as("SELECT boot, anchor_ms FROM distlock_clock")
                .fetch_one(&mut db)
                .await
                .unwrap();
        let this_boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap();
        assert_eq!(boot, this_boot.trim(), "anchored again, for this boot");
        let wall_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64;
        // The wall clock when this boot began, less what it stepped since: in the past.
        assert!(anchor > 0 && anchor <= wall_ms, "{anchor}");
        next.release().await.unwrap();
        drop(held);
    });
}

/// A database made by a client that opened it and closed: its directory (removed when
/// dropped), its path and its URL.
async fn new_database() -> (tempfile::TempDir, std::path::PathBuf, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("locks.db");
    let url = format!("sqlite://{}", path.display());
    let client = distlock::Client::connect(&url).await.unwrap();
    client.close().await.unwrap();
    (dir, path, url)
}

/// A writer that holds the database (a process stopped in the middle of a write keeps the
/// write lock until it runs again) does not keep a client from connecting, which only
/// reads a database that needs no change; its lock requests wait, within their deadline,
/// and are granted once the writer is done.
#[test]
fn a_stalled_writer_delays_lock_requests_but_not_connecting() {
    distlock_testkit::block_on(async {
        let (_dir, path, url) = new_database().await;

        let stall = StalledWriter::start(&path).await;
        let started = std::time::Instant::now();
        let client = tokio::time::timeout(Duration::from_secs(3), distlock::Client::connect(&url))
            .await
            .expect("connecting does not wait for the write lock")
            .unwrap();
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "{:?}",
            started.elapsed()
        );
        let options = distlock::LockOptions::new().wait(Duration::from_secs(20));
        let waiting = tokio::spawn(async move {
            let guard = client.mutex("stalled").lock_with(&options).await?;
            guard.release().await
        });
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert!(
            !waiting.is_finished(),
            "no grant while the writer holds the database"
        );
        stall.stop().await;
        tokio::time::timeout(Duration::from_secs(10), waiting)
            .await
            .expect("granted once the writer is done")
            .unwrap()
            .unwrap();
    });
}

/// `pause_writes`, which a process takes before it stops itself (Ctrl-Z): it waits for the
/// client's write under way, then holds new ones back until dropped, while the other
/// clients of the database write on.
#[test]
fn paused_writes_wait_for_the_one_under_way_and_hold_new_ones_back() {
    distlock_testkit::block_on(async {
        let (_dir, path, url) = new_database().await;
        let client = distlock::Client::connect(&url).await.unwrap();

        // A request whose write waits for another writer: under way.
        let stall = StalledWriter::start(&path).await;
        let under_way = {
            let client = client.clone();
            tokio::spawn(async move { client.mutex("first").lock().await })
        };
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(
            tokio::time::timeout(Duration::from_millis(300), client.pause_writes())
                .await
                .is_err(),
            "the pause waits for the write under way"
        );
        stall.stop().await;
        let first = tokio::time::timeout(Duration::from_secs(10), under_way)
            .await
            .expect("the write under way ends")
            .unwrap()
            .unwrap();

        first.release().await.unwrap();
        let target = distlock_testkit::Target::new(url);
        distlock_testkit::conformance::paused_writes_hold_back_this_client_alone(&target).await;
    });
}

/// Opening a database looks read-only first, and still repairs what the write path made:
/// a missing sweep row comes back (without it no client would sweep idle counters again),
/// and a database of a newer schema is refused as such, even while another process holds
/// the write lock.
#[test]
fn opening_repairs_a_missing_row_and_refuses_a_newer_schema() {
    use sqlx::{Connection, Executor};
    distlock_testkit::block_on(async {
        let (_dir, path, url) = new_database().await;
        let mut db = sqlx::SqliteConnection::connect(&url).await.unwrap();
        db.execute("DELETE FROM distlock_sweep").await.unwrap();
        distlock::Client::connect(&url)
            .await
            .unwrap()
            .close()
            .await
            .unwrap();
        let rows: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM distlock_sweep WHERE id = 1")
            .fetch_one(&mut db)
            .await
            .unwrap();
        assert_eq!(rows, 1, "the sweep row is back");

        db.execute("PRAGMA user_version = 99").await.unwrap();
        db.close().await.unwrap();
        let stall = StalledWriter::start(&path).await;
        let err = tokio::time::timeout(Duration::from_secs(3), distlock::Client::connect(&url))
            .await
            .expect("refused without waiting for the write lock")
            .unwrap_err();
        assert_eq!(err.kind(), distlock::ErrorKind::InvalidInput, "{err}");
        assert!(err.to_string().contains("newer distlock"), "{err}");
        stall.stop().await;
    });
}

/// A database file this process may only read, until dropped: immutable for root (whom
/// file modes do not stop; the suite runs as root in CI), read-only by its mode otherwise.
struct ReadOnly(std::path::PathBuf);

impl ReadOnly {
    fn set(path: &std::path::Path) -> ReadOnly {
        assert!(read_only(path, true), "{} made read-only", path.display());
        ReadOnly(path.to_owned())
    }
}

impl Drop for ReadOnly {
    fn drop(&mut self) {
        read_only(&self.0, false);
    }
}

/// Makes `path` read-only to this process, or writable again: whether that worked.
fn read_only(path: &std::path::Path, on: bool) -> bool {
    use std::os::unix::fs::PermissionsExt;
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        let flag = if on { "+i" } else { "-i" };
        let status = std::process::Command::new("chattr")
            .arg(flag)
            .arg(path)
            .status();
        return status.expect("chattr (e2fsprogs) runs").success();
    }
    let mode = if on { 0o444 } else { 0o644 };
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).is_ok()
}

/// A lock database this process may not write (made by another user, who alone may
/// write it) is a clear error that says so, not a database failure.
#[test]
fn a_database_this_process_may_not_write_is_a_clear_error() {
    distlock_testkit::block_on(async {
        let (_dir, path, url) = new_database().await;
        let _read_only = ReadOnly::set(&path);
        let err = match distlock::Client::connect(&url).await {
            Ok(client) => client.mutex("read-only").try_lock().await.unwrap_err(),
            Err(err) => err,
        };
        assert_eq!(err.kind(), distlock::ErrorKind::InvalidInput, "{err}");
        assert!(err.to_string().contains("may not write"), "{err}");
    });
}
