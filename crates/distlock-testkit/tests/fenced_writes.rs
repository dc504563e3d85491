//! Resource-side fencing on the real databases: a holder that paused past its lease writes
//! after a new holder did, and the database rejects the stale write.

use std::time::Duration;

use distlock::sql::fenced::{Dialect, FencedUpdate, applied};
use distlock::{Client, LockOptions};
use distlock_testkit::{block_on, mariadb_server, mariadb_url, postgres_server, postgres_url};
use sqlx::{AnyConnection, Connection, Row};

/// Two holders of one lock write one row through `FencedUpdate`; the first pauses past its
/// lease before writing.
async fn stale_write_is_rejected(url: &str, dialect: Dialect) {
    sqlx::any::install_default_drivers();
    let mut db = AnyConnection::connect(url).await.unwrap();
    for statement in [
        "CREATE TABLE accounts (id BIGINT PRIMARY KEY, balance BIGINT NOT NULL, fence BIGINT NOT NULL)",
        "INSERT INTO accounts (id, balance, fence) VALUES (1, 100, 0)",
    ] {
        sqlx::query(statement).execute(&mut db).await.unwrap();
    }
    let update = FencedUpdate::new("accounts", "id", "fence")
        .unwrap()
        .set("balance")
        .unwrap()
        .sql(dialect);
    let write = |token: u64, balance: i64| {
        sqlx::query(&update)
            .bind(token as i64)
            .bind(balance)
            .bind(1_i64)
    };

    let locks = Client::connect("memory://fenced-writes").await.unwrap();
    let short = LockOptions::new()
        .ttl(Duration::from_millis(200))
        .auto_renew(false);
    let stale = locks
        .mutex("account-1")
        .with_options(short.clone())
        .lock()
        .await
        .unwrap();
    let first = write(stale.fencing_token(), 110)
        .execute(&mut db)
        .await
        .unwrap();
    assert!(
        applied(first.rows_affected()),
        "the holder's first write lands"
    );
    let again = write(stale.fencing_token(), 120)
        .execute(&mut db)
        .await
        .unwrap();
    assert!(
        applied(again.rows_affected()),
        "the same grant may write again"
    );

    // The holder pauses past its lease; another takes the lock and writes.
    tokio::time::sleep(Duration::from_millis(400)).await;
    let fresh = locks
        .mutex("account-1")
        .with_options(short)
        .lock()
        .await
        .unwrap();
    assert!(fresh.fencing_token() > stale.fencing_token());
    let landed = write(fresh.fencing_token(), 500)
        .execute(&mut db)
        .await
        .unwrap();
    assert!(applied(landed.rows_affected()));

    // The paused holder wakes up and writes with its old token: rejected.
    let late = write(stale.fencing_token(), 999)
        .execute(&mut db)
        .await
        .unwrap();
    assert!(
        !applied(late.rows_affected()),
        "the stale write is rejected"
    );
    let row = sqlx::query("SELECT balance, fence FROM accounts WHERE id = 1")
        .fetch_one(&mut db)
        .await
        .unwrap();
    assert_eq!(row.get::<i64, _>(0), 500, "the new holder's value stays");
    assert_eq!(row.get::<i64, _>(1), fresh.fencing_token() as i64);
}

#[test]
fn postgres_rejects_a_stale_holders_write() {
    let server = postgres_server().unwrap_or_else(|e| panic!("{e}"));
    block_on(stale_write_is_rejected(
        &postgres_url(&server),
        Dialect::Postgres,
    ));
}

#[test]
fn mariadb_rejects_a_stale_holders_write() {
    let server = mariadb_server().unwrap_or_else(|e| panic!("{e}"));
    block_on(stale_write_is_rejected(
        &mariadb_url(&server),
        Dialect::MySql,
    ));
}

#[test]
fn sqlite_rejects_a_stale_holders_write() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}?mode=rwc", dir.path().join("shop.db").display());
    block_on(stale_write_is_rejected(&url, Dialect::Sqlite));
}
