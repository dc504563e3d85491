//! `Client::forget`: a program done with some locks lets the store drop their fencing
//! counters at once, rather than after `fence_ttl`. Only counters a second or more below
//! the clock go; a holder keeps its lock, and a name locked again gets a token above every
//! one it had.
//! On every backend that keeps a counter per name. And a counter an operator deletes by
//! hand is seeded again above every token it gave.

use std::time::Duration;

use distlock::{Client, ErrorKind, Health};

/// A name longer than MySQL's 64 characters, which it locks under a hashed key.
const LONG: &str = "long-forget/long-forget/long-forget/long-forget/long-forget/long-forget";

/// The last fencing token `client` shows for `name` (0 when it keeps no counter).
async fn shown_token(client: &Client, name: &str) -> u64 {
    let states = client.status(Some(name)).await.unwrap();
    states.first().map_or(0, |state| state.last_fencing_token)
}

/// A token of `name`, taken and released at once.
async fn token_of(client: &Client, name: &str) -> u64 {
    let guard = client.mutex(name).lock().await.unwrap();
    let token = guard.fencing_token();
    guard.release().await.unwrap();
    token
}

async fn forgets_idle_counters(url: &str) {
    let client = Client::connect(url)
        .await
        .unwrap_or_else(|e| panic!("{url}: {e}"));
    // Names of this call alone: the two modes of one database share their tables.
    let run = distlock::random_id();
    let [idle_name, long_name, held_name, fresh_name, never] =
        ["idle", LONG, "held", "fresh", "never-locked"].map(|name| format!("{run}/{name}"));
    let idle = token_of(&client, &idle_name).await;
    let long = token_of(&client, &long_name).await;
    let held = client.mutex(&held_name).lock().await.unwrap();
    let names = [&idle_name, &long_name, &held_name, &never];

    // Made a moment ago: kept.
    let fresh = token_of(&client, &fresh_name).await;
    assert_eq!(client.forget([&fresh_name]).await.unwrap(), 0, "{url}");
    assert_eq!(shown_token(&client, &fresh_name).await, fresh, "{url}");

    tokio::time::sleep(Duration::from_millis(1200)).await;
    let forgotten = client.forget(names).await.unwrap();
    assert!(forgotten >= 2, "{url}: {forgotten} forgotten");
    assert_eq!(shown_token(&client, &idle_name).await, 0, "{url}: gone");
    let long_left = shown_token(&client, &long_name).await;
    assert_eq!(long_left, 0, "{url}: a long name's too");
    // Forgetting a held lock's counter leaves the lock held.
    assert_eq!(held.health(), Health::Held, "{url}");
    let state = &client.status(Some(&held_name)).await.unwrap()[0];
    assert_eq!(state.holders.len(), 1, "{url}: still held");
    let other = client.mutex(&held_name).try_lock().await.unwrap();
    assert!(other.is_none(), "{url}: still exclusive");
    // Tokens only grow.
    assert!(token_of(&client, &idle_name).await > idle, "{url}");
    assert!(token_of(&client, &long_name).await > long, "{url}");
    let held_token = held.fencing_token();
    held.release().await.unwrap();
    assert!(token_of(&client, &held_name).await > held_token, "{url}");

    let refused = client.forget(["fine", ""]).await.unwrap_err();
    assert_eq!(refused.kind(), ErrorKind::InvalidInput, "{url}: {refused}");
    client.close().await.unwrap();
}

#[test]
fn sqlite_forgets() {
    distlock_testkit::block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("locks.db").display());
        forgets_idle_counters(&url).await;
    });
}

#[test]
fn postgres_forgets_in_both_modes() {
    distlock_testkit::block_on(async {
        let pg = distlock_testkit::postgres_server().unwrap_or_else(|e| panic!("{e}"));
        let url = distlock_testkit::postgres_url(&pg);
        forgets_idle_counters(&url).await;
        forgets_idle_counters(&format!("{url}?mode=lease")).await;
    });
}

#[test]
fn mariadb_forgets_in_both_modes() {
    distlock_testkit::block_on(async {
        let db = distlock_testkit::mariadb_server().unwrap_or_else(|e| panic!("{e}"));
        let url = distlock_testkit::mariadb_url(&db);
        forgets_idle_counters(&url).await;
        forgets_idle_counters(&format!("{url}?mode=lease")).await;
    });
}

#[test]
fn redis_forgets_alone_and_in_a_cluster() {
    distlock_testkit::block_on(async {
        let redis = distlock_testkit::redis_server().unwrap_or_else(|e| panic!("{e}"));
        let url = format!("redis://{}/0", redis.addr());
        forgets_idle_counters(&url).await;
        refuses_a_name_with_braces(&url).await;
        let cluster = distlock_testkit::redis_cluster(3, 0).unwrap_or_else(|e| panic!("{e}"));
        forgets_idle_counters(&cluster.url()).await;
    });
}

/// RedLock's masters may disagree on the time: a counter goes only once idle a minute.
#[test]
fn redlock_forgets_counters_idle_a_minute() {
    distlock_testkit::block_on(async {
        let masters: Vec<_> = (0..3)
            .map(|_| distlock_testkit::redis_server().unwrap_or_else(|e| panic!("{e}")))
            .collect();
        let hosts: Vec<String> = masters.iter().map(|m| m.addr().to_string()).collect();
        let client = Client::connect(&format!("redlock://{}/0", hosts.join(",")))
            .await
            .unwrap();
        let recent = token_of(&client, "forget/recent").await;
        tokio::time::sleep(Duration::from_millis(1200)).await;
        assert_eq!(client.forget(["forget/recent"]).await.unwrap(), 0);
        // Kept (a master that answered the grant late may show a higher count of its own).
        assert!(shown_token(&client, "forget/recent").await >= recent);
        // A counter two minutes behind every master's clock, as one idle that long is.
        let old_us = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_micros() as u64
            - 120_000_000;
        for master in &masters {
            let mut conn = redis::Client::open(format!("redis://{}/0", master.addr()))
                .unwrap()
                .get_multiplexed_async_connection()
                .await
                .unwrap();
            let _: () = redis::cmd("SET")
                .arg("{forget/old}:fence")
                .arg(old_us)
                .query_async(&mut conn)
                .await
                .unwrap();
        }
        assert_eq!(shown_token(&client, "forget/old").await, old_us);
        assert_eq!(
            client
                .forget(["forget/old", "forget/recent"])
                .await
                .unwrap(),
            1
        );
        assert_eq!(shown_token(&client, "forget/old").await, 0);
        assert!(token_of(&client, "forget/old").await > old_us);
        assert!(shown_token(&client, "forget/recent").await >= recent);
        refuses_a_name_with_braces(&format!("redlock://{}/0", hosts.join(","))).await;
    });
}

/// A name Redis keys cannot hold (braces pick the cluster slot) is refused as bad input by
/// `forget` (before any name is forgotten), `lock` and `status` alike: on RedLock too, where
/// every master refusing it used to read as masters not answering.
async fn refuses_a_name_with_braces(url: &str) {
    let client = Client::connect(url).await.unwrap();
    let refused = [
        client.forget(["fine", "a{b}"]).await.map(drop).unwrap_err(),
        client.mutex("a{b}").lock().await.map(drop).unwrap_err(),
        client.status(Some("a}b")).await.map(drop).unwrap_err(),
    ];
    for refused in refused {
        assert_eq!(refused.kind(), ErrorKind::InvalidInput, "{url}: {refused}");
        assert!(
            refused.to_string().contains("may not contain"),
            "{url}: {refused}"
        );
    }
    client.close().await.unwrap();
}

/// An operator deletes the counter of a lock with `statement` on the database at `db_url`
/// (bind: the lock's name): the next grant's token is still above the last one's.
async fn a_counter_deleted_by_hand_starts_above(url: &str, db_url: &str, statement: &str) {
    let client = Client::connect(url).await.unwrap();
    let name = format!("by-hand/{}", distlock::random_id());
    let name = name.as_str();
    let before = token_of(&client, name).await;
    let mut db = <sqlx::AnyConnection as sqlx::Connection>::connect(db_url)
        .await
        .unwrap();
    let deleted = sqlx::query(statement)
        .bind(name)
        .execute(&mut db)
        .await
        .unwrap();
    assert_eq!(deleted.rows_affected(), 1, "{url}: the counter was there");
    assert_eq!(shown_token(&client, name).await, 0, "{url}");
    let after = token_of(&client, name).await;
    assert!(after > before, "{url}: {after} after {before}");
    client.close().await.unwrap();
}

#[test]
fn a_sql_counter_deleted_by_hand_starts_again_above_its_tokens() {
    distlock_testkit::block_on(async {
        sqlx::any::install_default_drivers();
        let dir = tempfile::tempdir().unwrap();
        let sqlite = format!("sqlite://{}", dir.path().join("locks.db").display());
        let by_name = "DELETE FROM distlock_fence WHERE name = ?";
        a_counter_deleted_by_hand_starts_above(&sqlite, &sqlite, by_name).await;
        let by_name = "DELETE FROM distlock_fence WHERE name = $1";
        let pg = distlock_testkit::postgres_server().unwrap_or_else(|e| panic!("{e}"));
        let url = distlock_testkit::postgres_url(&pg);
        a_counter_deleted_by_hand_starts_above(&url, &url, by_name).await;
        let lease = format!("{url}?mode=lease");
        a_counter_deleted_by_hand_starts_above(&lease, &url, by_name).await;
        let maria = distlock_testkit::mariadb_server().unwrap_or_else(|e| panic!("{e}"));
        let url = distlock_testkit::mariadb_url(&maria);
        let db_url = url.replacen("mariadb://", "mysql://", 1);
        let session = "DELETE FROM distlock_session_lock WHERE lock_key = ?";
        a_counter_deleted_by_hand_starts_above(&url, &db_url, session).await;
        let lease_mode = "DELETE FROM distlock_fence WHERE lock_key = ?";
        a_counter_deleted_by_hand_starts_above(&format!("{url}?mode=lease"), &db_url, lease_mode)
            .await;
    });
}
