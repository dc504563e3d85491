//! `Client::forget`: a program done with some locks lets the store drop their fencing
//! counters at once, rather than after `fence_ttl`. Only counters a second or more below
//! the clock go; a holder keeps its lock, and a name locked again gets a token above every
//! one it had.
//! On every backend that keeps a counter per name (not Redis, whose names share their
//! slot's). And a counter an operator deletes by hand is seeded again above every token it
//! gave.

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

/// Redis keeps no counter per name: names count on their cluster slot's counter, which
/// stays, so there is nothing to forget and a released name leaves no key behind — alone,
/// in a cluster and on RedLock's masters — and each name's tokens still grow.
#[test]
fn redis_keeps_nothing_per_name_to_forget() {
    distlock_testkit::block_on(async {
        let redis = distlock_testkit::redis_server().unwrap_or_else(|e| panic!("{e}"));
        let url = format!("redis://{}/0", redis.addr());
        leaves_nothing_per_name(&url, &[redis.addr().to_string()]).await;
        refuses_a_name_with_braces(&url).await;
        let cluster = distlock_testkit::redis_cluster(3, 0).unwrap_or_else(|e| panic!("{e}"));
        leaves_nothing_per_name(&cluster.url(), &[]).await;
        let masters: Vec<_> = (0..3)
            .map(|_| distlock_testkit::redis_server().unwrap_or_else(|e| panic!("{e}")))
            .collect();
        let hosts: Vec<String> = masters.iter().map(|m| m.addr().to_string()).collect();
        let url = format!("redlock://{}/0", hosts.join(","));
        leaves_nothing_per_name(&url, &hosts).await;
        refuses_a_name_with_braces(&url).await;
    });
}

/// Locks 200 new names on `url` and releases each: `forget` has nothing to drop, each
/// name's next token is above its first, and each single server of `servers` (host:port)
/// holds only the counters of its names' slots afterwards.
async fn leaves_nothing_per_name(url: &str, servers: &[String]) {
    const NAMES: usize = 200;
    let client = Client::connect(url)
        .await
        .unwrap_or_else(|e| panic!("{url}: {e}"));
    let run = distlock::random_id();
    let names: Vec<String> = (0..NAMES).map(|n| format!("orders/{run}/{n}")).collect();
    let mut first = Vec::new();
    for name in &names {
        first.push(token_of(&client, name).await);
    }
    assert_eq!(client.forget(&names).await.unwrap(), 0, "{url}");
    for (name, first) in names.iter().zip(first) {
        assert!(token_of(&client, name).await > first, "{url}: {name}");
    }
    for server in servers {
        let mut conn = redis::Client::open(format!("redis://{server}/0"))
            .unwrap()
            .get_multiplexed_async_connection()
            .await
            .unwrap();
        let keys: Vec<String> = redis::cmd("KEYS")
            .arg("*")
            .query_async(&mut conn)
            .await
            .unwrap();
        let counters = keys.iter().filter(|k| k.ends_with("}:slot-fence")).count();
        assert_eq!(
            keys.len(),
            counters,
            "{url}: only counters are left: {keys:?}"
        );
        assert!(counters <= NAMES, "{url}: {counters} counters");
    }
    client.close().await.unwrap();
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
