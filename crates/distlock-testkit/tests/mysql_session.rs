//! The conformance suite, cross-process tests and faults against a real MariaDB in session
//! mode (the default: `GET_LOCK` held by a connection of its own), started for each test;
//! and what only session mode has: the server's own lock, its queue, long names hashed.

use std::time::Duration;

use distlock::{ErrorKind, LockOptions};
use sqlx::{Connection, MySqlConnection, Row};

async fn target() -> distlock_testkit::Target {
    let db = distlock_testkit::mariadb_server().unwrap_or_else(|e| panic!("{e}"));
    distlock_testkit::Target::new(distlock_testkit::mariadb_url(&db)).keep(db)
}

distlock_testkit::conformance_suite!(target, liveness = Lease, lacks = [force_release, adopt]);
distlock_testkit::process_suite!(target, lacks = [adopt]);

#[test]
fn killed_holder_frees_the_lock_at_once() {
    distlock_testkit::block_on(async {
        let target = target().await.with_child_test(module_path!());
        distlock_testkit::conformance::killed_session_holder_frees_the_lock_at_once(&target).await;
    });
}

#[test]
fn breaking_a_session_lock_names_the_statement_that_frees_it() {
    distlock_testkit::block_on(async {
        let db = distlock_testkit::mariadb_server().unwrap_or_else(|e| panic!("{e}"));
        let url = distlock_testkit::mariadb_url(&db);
        let target = distlock_testkit::Target::new(url.clone());
        let run = |statement: String| async move {
            let mut db = MySqlConnection::connect(&url).await.unwrap();
            sqlx::raw_sql(&statement).execute(&mut db).await.unwrap();
        };
        distlock_testkit::conformance::a_session_lock_break_names_the_statement_that_frees_it(
            &target, run,
        )
        .await;
    });
}

fn session_url(addr: std::net::SocketAddr) -> String {
    format!(
        "mysql://distlock:{}@{addr}/distlock",
        distlock_testkit::DATABASE_PASSWORD
    )
}

/// The connection holding `key` with `GET_LOCK`, if any.
async fn holder_of(db: &mut MySqlConnection, key: &str) -> Option<i64> {
    sqlx::query("SELECT CAST(IS_USED_LOCK(?) AS SIGNED)")
        .bind(key)
        .fetch_one(db)
        .await
        .unwrap()
        .get(0)
}

/// Connections waiting in `GET_LOCK`.
async fn lock_waits(db: &mut MySqlConnection) -> i64 {
    sqlx::query("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE STATE = 'User lock'")
        .fetch_one(db)
        .await
        .unwrap()
        .get(0)
}

#[test]
fn the_lock_is_the_servers_get_lock_and_long_names_are_hashed_as_documented() {
    distlock_testkit::block_on(async {
        let server = distlock_testkit::mariadb_server().unwrap_or_else(|e| panic!("{e}"));
        let url = distlock_testkit::mariadb_url(&server);
        let mut db = MySqlConnection::connect(&url).await.unwrap();
        let long = format!("reports/{}", "ü".repeat(80));
        let in_sql: String = sqlx::query(
            "SELECT IF(CHAR_LENGTH(?) <= 64, ?, CONCAT('distlock:', LEFT(SHA2(?, 256), 55)))",
        )
        .bind(&long)
        .bind(&long)
        .bind(&long)
        .fetch_one(&mut db)
        .await
        .unwrap()
        .get(0);
        assert_eq!(in_sql, distlock::sql::mysql::lock_key(&long));

        let client = distlock::Client::connect(&url).await.unwrap();
        let short = client.mutex("orders").lock().await.unwrap();
        let hashed = client.mutex(long.as_str()).lock().await.unwrap();
        assert!(
            holder_of(&mut db, "orders").await.is_some(),
            "GET_LOCK('orders') is held"
        );
        assert!(
            holder_of(&mut db, &in_sql).await.is_some(),
            "the hashed key is held"
        );
        assert!(
            holder_of(&mut db, "Orders").await.is_none(),
            "names are case-sensitive"
        );
        let taken: Option<i64> = sqlx::query("SELECT CAST(GET_LOCK('orders', 0) AS SIGNED)")
            .fetch_one(&mut db)
            .await
            .unwrap()
            .get(0);
        assert_eq!(taken, Some(0), "another program's GET_LOCK is excluded");

        let states = client.status(None).await.unwrap();
        let names: Vec<&str> = states.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["orders", long.as_str()], "status shows full names");
        assert_eq!(states[1].holders[0].fencing_token, hashed.fencing_token());
        short.release().await.unwrap();
        hashed.release().await.unwrap();
        assert!(
            holder_of(&mut db, "orders").await.is_none(),
            "released on the server"
        );
        assert!(holder_of(&mut db, &in_sql).await.is_none());
    });
}

#[test]
fn waiters_wait_in_the_servers_queue_and_a_cancelled_wait_leaves_nothing() {
    distlock_testkit::block_on(async {
        let server = distlock_testkit::mariadb_server().unwrap_or_else(|e| panic!("{e}"));
        let url = distlock_testkit::mariadb_url(&server);
        let mut db = MySqlConnection::connect(&url).await.unwrap();
        let a = distlock::Client::connect(&url).await.unwrap();
        let b = distlock::Client::connect(&url).await.unwrap();
        let held = a.mutex("queue").lock().await.unwrap();

        let waiter = tokio::spawn(async move {
            b.mutex("queue")
                .lock_timeout(Duration::from_millis(800))
                .await
                .map(drop)
        });
        let mut queued = false;
        for _ in 0..60 {
            if lock_waits(&mut db).await == 1 {
                queued = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(queued, "the waiter waits in the server's GET_LOCK");
        let state = &a.status(Some("queue")).await.unwrap()[0];
        assert_eq!(state.holders.len(), 1);
        assert_eq!(state.waiters.len(), 1, "status shows the waiter");

        let err = waiter.await.unwrap().unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Timeout);
        assert_eq!(
            lock_waits(&mut db).await,
            0,
            "the timed-out wait was stopped"
        );
        let holder = holder_of(&mut db, "queue").await;
        held.release().await.unwrap();
        assert!(holder.is_some());
        assert!(
            holder_of(&mut db, "queue").await.is_none(),
            "nothing stays held"
        );
        let state = &a.status(Some("queue")).await.unwrap()[0];
        assert!(state.holders.is_empty() && state.waiters.is_empty());
    });
}

#[test]
fn connections_go_back_clean_and_are_reused() {
    distlock_testkit::block_on(async {
        let server = distlock_testkit::mariadb_server().unwrap_or_else(|e| panic!("{e}"));
        let url = distlock_testkit::mariadb_url(&server);
        let mut db = MySqlConnection::connect(&url).await.unwrap();
        let client = distlock::Client::connect(&url).await.unwrap();
        let mut holders = std::collections::BTreeSet::new();
        for round in 0..20 {
            let name = format!("n{}", round % 3);
            let first = client.mutex(name.as_str()).lock().await.unwrap();
            let second = client.mutex("other").lock().await.unwrap();
            let (a, b) = (
                holder_of(&mut db, &name).await,
                holder_of(&mut db, "other").await,
            );
            assert_ne!(a, b, "each lock is held by a connection of its own");
            holders.extend([a.unwrap(), b.unwrap()]);
            first.release().await.unwrap();
            second.release().await.unwrap();
            assert!(
                holder_of(&mut db, &name).await.is_none(),
                "released on the server"
            );
        }
        assert_eq!(
            holders.len(),
            2,
            "the same two connections served every round: released ones are reused"
        );
    });
}

#[test]
fn database_restart_loses_every_holder_and_later_tokens_are_greater() {
    distlock_testkit::block_on(async {
        let server = distlock_testkit::mariadb_server().unwrap_or_else(|e| panic!("{e}"));
        let url = distlock_testkit::mariadb_url(&server);
        let a = distlock::Client::connect(&url).await.unwrap();
        // Renewed every 10 s: no renewal comes during the test.
        let options = LockOptions::new().ttl(Duration::from_secs(30));
        let guard = a.mutex("restart").lock_with(&options).await.unwrap();
        let other = a.mutex("restart-2").lock_with(&options).await.unwrap();
        let token = guard.fencing_token();

        let _server =
            distlock_testkit::restart_losing_first(server, vec![guard.lost(), other.lost()]).await;

        let b = distlock::Client::connect(&url).await.unwrap();
        let next = b
            .mutex("restart")
            .lock_timeout(Duration::from_secs(3))
            .await
            .unwrap();
        let next_token = next.fencing_token();
        assert!(
            next_token > token,
            "tokens keep increasing across a restart"
        );
        next.release().await.unwrap();
        let again = a
            .mutex("restart")
            .lock_timeout(Duration::from_secs(3))
            .await
            .expect("the same client gets locks again once the database is back");
        assert!(again.fencing_token() > next_token);
    });
}

#[test]
fn database_paused_past_the_ttl_puts_the_lock_at_risk_then_loses_it() {
    distlock_testkit::block_on(async {
        let server = distlock_testkit::mariadb_server().unwrap_or_else(|e| panic!("{e}"));
        distlock_testkit::lose_to_a_paused_server(&session_url(server.addr()), &server, "paused")
            .await;
    });
}

#[test]
fn a_client_cut_off_loses_its_lock_and_the_server_frees_it() {
    distlock_testkit::block_on(async {
        let server = distlock_testkit::mariadb_server().unwrap_or_else(|e| panic!("{e}"));
        let proxy = distlock_testkit::FaultProxy::start(server.addr())
            .await
            .unwrap();
        distlock_testkit::cut_session_is_freed_at_once(
            &session_url(proxy.addr()),
            &session_url(server.addr()),
            &proxy,
            "cut",
        )
        .await;
    });
}

#[test]
fn a_black_holed_client_goes_at_risk_then_lost_before_the_server_frees_the_lock() {
    distlock_testkit::block_on(async {
        let server = distlock_testkit::mariadb_server().unwrap_or_else(|e| panic!("{e}"));
        let proxy = distlock_testkit::FaultProxy::start(server.addr())
            .await
            .unwrap();
        let mut db = MySqlConnection::connect(&session_url(server.addr()))
            .await
            .unwrap();
        let guard = distlock_testkit::lose_link(
            &session_url(proxy.addr()),
            &proxy,
            distlock_testkit::ProxyMode::BlackHole,
            "hole",
            Duration::from_secs(2),
        )
        .await;
        assert!(
            holder_of(&mut db, "hole").await.is_some(),
            "the server still held the lock when the holder gave it up"
        );
        // The server closes the silent connection after its wait_timeout (the ttl).
        let _next = distlock_testkit::take_over(
            &session_url(server.addr()),
            "hole",
            guard.fencing_token(),
            Duration::from_secs(4),
        )
        .await;
    });
}

#[test]
fn read_write_locks_and_semaphores_are_leases_beside_the_session_locks() {
    distlock_testkit::block_on(async {
        let server = distlock_testkit::mariadb_server().unwrap_or_else(|e| panic!("{e}"));
        let url = distlock_testkit::mariadb_url(&server);
        let client = distlock::Client::connect(&url).await.unwrap();
        let mutex = client.mutex("mixed").lock().await.unwrap();
        let permit = client.semaphore("pool", 2).acquire().await.unwrap();
        let reader = client.rwlock("doc").read().await.unwrap();
        let states = client.status(None).await.unwrap();
        let names: Vec<&str> = states.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["doc", "mixed", "pool"]);
        permit.renew().await.unwrap();
        let err = client
            .semaphore("mixed", 2)
            .try_acquire()
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
        let err = client.mutex("doc").try_lock().await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
        mutex.renew().await.unwrap();
        reader.release().await.unwrap();
        permit.release().await.unwrap();
        mutex.release().await.unwrap();
    });
}

#[test]
fn a_session_mutex_and_a_lease_started_together_never_both_hold() {
    distlock_testkit::block_on(async {
        let server = distlock_testkit::mariadb_server().unwrap_or_else(|e| panic!("{e}"));
        let url = distlock_testkit::mariadb_url(&server);
        let (mutexes, leases) = tokio::join!(
            distlock::Client::connect(&url),
            distlock::Client::connect(&url)
        );
        let (mutexes, leases) = (mutexes.unwrap(), leases.unwrap());
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        let (mut mutex_won, mut lease_won) = (0, 0);
        for round in 0..150 {
            assert!(tokio::time::Instant::now() < deadline, "round {round}");
            let name = format!("contested-{}", round % 5);
            let (mutex, rwlock) = (mutexes.mutex(&name), leases.rwlock(&name));
            // The mutex starts up to 4 ms after the lease, so the two meet at every step of
            // the lease's transaction.
            let late = Duration::from_micros(round as u64 * 397 % 4000);
            let (mutex, writer) = tokio::join!(
                async {
                    tokio::time::sleep(late).await;
                    mutex.try_lock().await
                },
                rwlock.try_write()
            );
            let refused = |e: &distlock::Error| e.kind() == ErrorKind::InvalidInput;
            let mutex = mutex.unwrap_or_else(|e| if refused(&e) { None } else { panic!("{e}") });
            let writer = writer.unwrap_or_else(|e| if refused(&e) { None } else { panic!("{e}") });
            assert!(
                mutex.is_none() || writer.is_none(),
                "round {round}: a session mutex and a write lease held `{name}` at once"
            );
            mutex_won += usize::from(mutex.is_some());
            lease_won += usize::from(writer.is_some());
            if let Some(guard) = mutex {
                guard.release().await.unwrap();
            }
            if let Some(guard) = writer {
                guard.release().await.unwrap();
            }
        }
        assert!(mutex_won > 0 && lease_won > 0, "{mutex_won} / {lease_won}");
    });
}

#[test]
fn a_pool_of_one_connection_serves_every_kind() {
    distlock_testkit::block_on(async {
        let server = distlock_testkit::mariadb_server().unwrap_or_else(|e| panic!("{e}"));
        distlock_testkit::a_pool_of_one_serves_every_kind(&distlock_testkit::mariadb_url(&server))
            .await;
    });
}

/// Tables an older distlock made with padded text keys are given byte keys when a client
/// connects: `pad` and `pad ` become two locks, and a counter already there goes on.
#[test]
fn text_keys_of_an_older_schema_become_byte_keys() {
    distlock_testkit::block_on(async {
        let server = distlock_testkit::mariadb_server().unwrap_or_else(|e| panic!("{e}"));
        let base = distlock_testkit::mariadb_url(&server);
        let mut db = MySqlConnection::connect(&base).await.unwrap();
        sqlx::query(
            "CREATE TABLE distlock_fence (
                 lock_key VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL PRIMARY KEY,
                 value    BIGINT NOT NULL
             ) ENGINE = InnoDB",
        )
        .execute(&mut db)
        .await
        .unwrap();
        sqlx::query("INSERT INTO distlock_fence VALUES ('pad', 41)")
            .execute(&mut db)
            .await
            .unwrap();
        let client = distlock::Client::connect(&format!("{base}?mode=lease"))
            .await
            .unwrap();
        let types: Vec<String> = sqlx::query_scalar(
            "SELECT CAST(DATA_TYPE AS CHAR) FROM information_schema.COLUMNS
             WHERE TABLE_SCHEMA = DATABASE() AND COLUMN_NAME = 'lock_key'",
        )
        .fetch_all(&mut db)
        .await
        .unwrap();
        // The six tables of the schema and the note table, all keyed by bytes.
        assert_eq!(types.len(), 7, "{types:?}");
        assert!(types.iter().all(|t| t == "varbinary"), "{types:?}");
        let pad = client.mutex("pad").try_lock().await.unwrap().unwrap();
        assert!(pad.fencing_token() > 41, "the counter goes on");
        let padded = client.mutex("pad ").try_lock().await.unwrap();
        assert!(padded.is_some(), "`pad ` is a lock of its own");
    });
}

/// A server frozen mid-call (SIGSTOP): an acquire returns by its deadline and a release by
/// its operation timeout, the watch connection notwithstanding.
#[test]
fn a_hung_server_bounds_every_call_by_its_deadline() {
    distlock_testkit::block_on(async {
        let server = distlock_testkit::mariadb_server().unwrap_or_else(|e| panic!("{e}"));
        let url = distlock_testkit::mariadb_url(&server);
        distlock_testkit::a_hung_server_bounds_every_call(&url, &server).await;
    });
}
