//! Fencing counters of the SQL backends do not pile up: one client of a database a period
//! deletes the counters idle for longer than the URL's `fence_ttl` (every client looks as it
//! connects, then every hour or `fence_ttl`, whichever is shorter), keeps the others,
//! and a name whose counter went gets a token above every one it had. On SQLite, PostgreSQL and MariaDB, in
//! both modes of the servers. The same sweep deletes the lease-table rows of names nobody
//! locks again.

use std::time::Duration;

use distlock::Client;
use sqlx::Connection;

/// The last fencing token `client` shows for `name` (0 when it keeps no counter).
async fn shown_token(client: &Client, name: &str) -> u64 {
    let states = client.status(Some(name)).await.unwrap();
    states.first().map_or(0, |state| state.last_fencing_token)
}

/// Waits (at most 10 s) until `client` shows no counter for `name`: a client deletes idle
/// counters on a task of its own, right after it connects.
async fn until_gone(client: &Client, name: &str) -> u64 {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let token = shown_token(client, name).await;
        if token == 0 || tokio::time::Instant::now() > deadline {
            return token;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A token of `name` from a client of `url`.
async fn token_of(url: &str, name: &str) -> u64 {
    let client = Client::connect(url).await.unwrap_or_else(|e| panic!("{e}"));
    let guard = client.mutex(name).lock().await.unwrap();
    let token = guard.fencing_token();
    guard.release().await.unwrap();
    client.close().await.unwrap();
    token
}

/// A name longer than MySQL's 64 characters, which it locks under a hashed key.
const LONG: &str = "idle-and-long-idle-and-long-idle-and-long-idle-and-long-idle-and-long";

/// `url` (which ends in a query) with a one-second `fence_ttl`.
async fn idle_counters_go_and_tokens_still_grow(url: &str) {
    let url = format!("{url}fence_ttl=1s");
    let idle = token_of(&url, "idle").await;
    let long = token_of(&url, LONG).await;
    // A lock held for longer than `fence_ttl`: its counter may go, its token may not fall.
    let holder = Client::connect(&url).await.unwrap();
    let held = holder.mutex("held").lock().await.unwrap();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let fresh = token_of(&url, "fresh").await;

    let client = Client::connect(&url).await.unwrap();
    assert_eq!(
        until_gone(&client, "idle").await,
        0,
        "{url}: the idle counter went"
    );
    assert_eq!(
        until_gone(&client, LONG).await,
        0,
        "{url}: a long name's too"
    );
    assert_eq!(
        shown_token(&client, "fresh").await,
        fresh,
        "{url}: the fresh one stayed"
    );
    let guard = client.mutex("idle").lock().await.unwrap();
    assert!(
        guard.fencing_token() > idle,
        "{url}: {} after {idle}",
        guard.fencing_token()
    );
    assert!(
        guard.fencing_token() > fresh,
        "{url}: seeded from the clock"
    );
    guard.release().await.unwrap();
    assert_eq!(
        shown_token(&client, "held").await,
        held.fencing_token(),
        "{url}: a holder's token is shown while it holds"
    );
    let held_token = held.fencing_token();
    held.release().await.unwrap();
    holder.close().await.unwrap();
    client.close().await.unwrap();
    assert!(token_of(&url, LONG).await > long, "{url}");
    assert!(token_of(&url, "held").await > held_token, "{url}");
}

#[test]
fn sqlite_forgets_idle_fencing_counters() {
    distlock_testkit::block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}?", dir.path().join("locks.db").display());
        idle_counters_go_and_tokens_still_grow(&url).await;
    });
}

#[test]
fn postgres_forgets_idle_fencing_counters_in_both_modes() {
    distlock_testkit::block_on(async {
        let pg = distlock_testkit::postgres_server().unwrap_or_else(|e| panic!("{e}"));
        let url = distlock_testkit::postgres_url(&pg);
        idle_counters_go_and_tokens_still_grow(&format!("{url}?")).await;
        idle_counters_go_and_tokens_still_grow(&format!("{url}?mode=lease&")).await;
    });
}

#[test]
fn mariadb_forgets_idle_fencing_counters_in_both_modes() {
    distlock_testkit::block_on(async {
        let db = distlock_testkit::mariadb_server().unwrap_or_else(|e| panic!("{e}"));
        let url = distlock_testkit::mariadb_url(&db);
        idle_counters_go_and_tokens_still_grow(&format!("{url}?")).await;
        idle_counters_go_and_tokens_still_grow(&format!("{url}?mode=lease&")).await;
        // The full names of hashed keys go with the session records that used them. A
        // client that recorded one before it went records it again when it locks the name
        // again.
        let early = Client::connect(&format!("{url}?fence_ttl=1s"))
            .await
            .unwrap();
        early
            .mutex(LONG)
            .lock()
            .await
            .unwrap()
            .release()
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let client = Client::connect(&format!("{url}?fence_ttl=1s"))
            .await
            .unwrap();
        let mut db = sqlx::MySqlConnection::connect(&url).await.unwrap();
        let mut names = -1_i64;
        for _ in 0..200 {
            names = sqlx::query_scalar("SELECT COUNT(*) FROM distlock_name")
                .fetch_one(&mut db)
                .await
                .unwrap();
            if names == 0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        client.close().await.unwrap();
        assert_eq!(names, 0);
        let again = early.mutex(LONG).lock().await.unwrap();
        let shown = distlock_testkit::status_names(&early).await;
        assert!(shown.iter().any(|name| name == LONG), "{shown:?}");
        again.release().await.unwrap();
        early.close().await.unwrap();
    });
}

/// When idle counters were last swept in the database at `db_url`, as the clients record
/// it (0: never).
async fn last_sweep(db_url: &str) -> i64 {
    sqlx::any::install_default_drivers();
    let mut db = sqlx::AnyConnection::connect(db_url).await.unwrap();
    let last = sqlx::query_scalar("SELECT last_us FROM distlock_sweep WHERE id = 1")
        .fetch_one(&mut db)
        .await
        .unwrap();
    db.close().await.unwrap();
    last
}

/// One client of a database sweeps it a period: the first to connect claims the sweep, and
/// the clients that connect within the hour after it do not scan the counters again.
async fn one_client_sweeps_a_period(url: &str, db_url: &str) {
    let first = Client::connect(url).await.unwrap();
    // Claimed (an hour back, less the claim's minute), then marked done (now).
    let recently = || {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap();
        (now.as_micros() as i64) - 30_000_000
    };
    let mut swept = 0;
    for _ in 0..200 {
        swept = last_sweep(db_url).await;
        if swept > recently() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        swept > recently(),
        "{url}: the first client swept, and marked it done"
    );
    for _ in 0..3 {
        let later = Client::connect(url).await.unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        later.close().await.unwrap();
    }
    assert_eq!(last_sweep(db_url).await, swept, "{url}: nobody swept again");
    first.close().await.unwrap();
}

#[test]
fn one_client_a_period_sweeps_each_database() {
    distlock_testkit::block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let sqlite = format!("sqlite://{}", dir.path().join("locks.db").display());
        one_client_sweeps_a_period(&sqlite, &sqlite).await;
        let pg = distlock_testkit::postgres_server().unwrap_or_else(|e| panic!("{e}"));
        let url = distlock_testkit::postgres_url(&pg);
        one_client_sweeps_a_period(&url, &url).await;
        let maria = distlock_testkit::mariadb_server().unwrap_or_else(|e| panic!("{e}"));
        let url = distlock_testkit::mariadb_url(&maria);
        one_client_sweeps_a_period(&format!("{url}?mode=lease"), &url).await;
    });
}

/// The rows of lock `name` in the lease tables of the database at `db_url`.
async fn rows_of(db: &mut sqlx::AnyConnection, name: &str) -> i64 {
    let mut rows = 0;
    for table in ["distlock_lease", "distlock_waiter"] {
        let count: i64 = sqlx::query_scalar(&format!(
            "SELECT COUNT(*) FROM {table} WHERE name = '{name}'"
        ))
        .fetch_one(&mut *db)
        .await
        .unwrap();
        rows += count;
    }
    rows
}

/// A name nobody locks again keeps no rows: a grant whose holder vanished and a waiter
/// that stopped refreshing its place, both ended an hour ago, are swept (a name locked
/// again purges its own expired rows; these are never looked at again), and a live grant
/// is left alone. `url` is a lease-mode URL with a one-second `fence_ttl`.
async fn abandoned_rows_are_swept(url: &str, db_url: &str, waiter_columns: &str, key: &str) {
    let client = Client::connect(url).await.unwrap();
    let kept = client.mutex("kept").lock().await.unwrap();
    let vanished = client
        .mutex("abandoned")
        .lock_with(&distlock::LockOptions::new().auto_renew(false))
        .await
        .unwrap();
    std::mem::forget(vanished);
    let mut db = sqlx::AnyConnection::connect(db_url).await.unwrap();
    let aged = sqlx::query(
        "UPDATE distlock_lease SET expires_at_ms = expires_at_ms - 3600000
         WHERE name = 'abandoned'",
    )
    .execute(&mut db)
    .await
    .unwrap();
    assert_eq!(aged.rows_affected(), 1);
    let an_hour_ago = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
        - 3_600_000;
    // Counted by what each statement changed: a sweep may come between them and a count.
    let queued = sqlx::query(&format!(
        "INSERT INTO distlock_waiter ({waiter_columns}token, name, owner, kind, lim, permits,
           fair, expires_at_ms, host, pid, since_ms, wake)
         VALUES ({key}'gave-up', 'abandoned', 'gone', 'mutex', 1, 1, 0, {an_hour_ago}, 'h', 1,
           {an_hour_ago}, '')"
    ))
    .execute(&mut db)
    .await
    .unwrap();
    assert_eq!(queued.rows_affected(), 1);
    let mut left = -1;
    for _ in 0..300 {
        left = rows_of(&mut db, "abandoned").await;
        if left == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(left, 0, "{url}: the abandoned rows were swept");
    assert_eq!(
        rows_of(&mut db, "kept").await,
        1,
        "{url}: a live grant stays"
    );
    kept.release().await.unwrap();
    client.close().await.unwrap();
}

#[test]
fn rows_of_abandoned_names_are_swept_from_the_lease_tables() {
    distlock_testkit::block_on(async {
        sqlx::any::install_default_drivers();
        let dir = tempfile::tempdir().unwrap();
        let sqlite = format!("sqlite://{}", dir.path().join("locks.db").display());
        let lease = format!("{sqlite}?fence_ttl=1s");
        abandoned_rows_are_swept(&lease, &sqlite, "", "").await;
        let pg = distlock_testkit::postgres_server().unwrap_or_else(|e| panic!("{e}"));
        let url = distlock_testkit::postgres_url(&pg);
        let lease = format!("{url}?mode=lease&fence_ttl=1s");
        abandoned_rows_are_swept(&lease, &url, "", "").await;
        let maria = distlock_testkit::mariadb_server().unwrap_or_else(|e| panic!("{e}"));
        let url = distlock_testkit::mariadb_url(&maria);
        let lease = format!("{url}?mode=lease&fence_ttl=1s");
        abandoned_rows_are_swept(&lease, &url, "lock_key, ", "'abandoned', ").await;
    });
}
