//! The conformance suite, cross-process tests and faults against a real PostgreSQL in
//! session mode (the default: advisory locks held by a connection of their own), started
//! for each test; and what only session mode has: key collisions, the server's own lock
//! queue, connections reused only clean.

use std::sync::Arc;
use std::time::Duration;

use distlock::{ErrorKind, LockOptions};
use sqlx::{Connection, PgConnection, Row};

async fn target() -> distlock_testkit::Target {
    let pg = distlock_testkit::postgres_server().unwrap_or_else(|e| panic!("{e}"));
    distlock_testkit::Target::new(distlock_testkit::postgres_url(&pg)).keep(pg)
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
        let pg = distlock_testkit::postgres_server().unwrap_or_else(|e| panic!("{e}"));
        let url = distlock_testkit::postgres_url(&pg);
        let target = distlock_testkit::Target::new(url.clone());
        let run = |statement: String| async move {
            let mut db = PgConnection::connect(&url).await.unwrap();
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
        "postgres://postgres:{}@{addr}/postgres",
        distlock_testkit::DATABASE_PASSWORD
    )
}

/// Advisory locks of this database held (`granted`) or waited for, by any session.
async fn advisory_locks(db: &mut PgConnection, granted: bool) -> i64 {
    sqlx::query(
        "SELECT COUNT(*) FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 1 AND granted = $1",
    )
    .bind(granted)
    .fetch_one(db)
    .await
    .unwrap()
    .get(0)
}

#[test]
fn the_key_is_the_documented_hash_and_the_lock_is_a_real_advisory_lock() {
    distlock_testkit::block_on(async {
        let pg = distlock_testkit::postgres_server().unwrap_or_else(|e| panic!("{e}"));
        let url = distlock_testkit::postgres_url(&pg);
        let mut db = PgConnection::connect(&url).await.unwrap();
        let in_sql: i64 = sqlx::query(
            "SELECT ('x' || left(encode(sha256(convert_to($1, 'UTF8')), 'hex'), 16))::bit(64)::bigint",
        )
        .bind("orders/42 ünïcode")
        .fetch_one(&mut db)
        .await
        .unwrap()
        .get(0);
        assert_eq!(
            in_sql,
            distlock::sql::postgres::advisory_key("orders/42 ünïcode")
        );

        let client = distlock::Client::connect(&url).await.unwrap();
        let guard = client.mutex("orders").lock().await.unwrap();
        let key = distlock::sql::postgres::advisory_key("orders");
        let taken: bool = sqlx::query("SELECT pg_try_advisory_lock($1)")
            .bind(key)
            .fetch_one(&mut db)
            .await
            .unwrap()
            .get(0);
        assert!(!taken, "the lock is PostgreSQL's advisory lock on the key");
        guard.release().await.unwrap();
        let taken: bool = sqlx::query("SELECT pg_try_advisory_lock($1)")
            .bind(key)
            .fetch_one(&mut db)
            .await
            .unwrap()
            .get(0);
        assert!(taken, "released on the server");
    });
}

#[test]
fn a_key_collision_is_harmless_and_reported() {
    distlock_testkit::block_on(async {
        let pg = distlock_testkit::postgres_server().unwrap_or_else(|e| panic!("{e}"));
        let url = distlock_testkit::postgres_url(&pg);
        let config =
            distlock::sql::postgres::PostgresConfig::from_url(&distlock::Url::parse(&url).unwrap())
                .unwrap();
        let backend = Arc::new(
            distlock::sql::postgres::PostgresBackend::open(config)
                .await
                .unwrap(),
        );
        let client = distlock::Client::with_backend(backend.clone());
        // Another session holds the key of "reports" under the name "invoices", as if the
        // two names hashed alike.
        let mut other = PgConnection::connect(&url).await.unwrap();
        let key = distlock::sql::postgres::advisory_key("reports");
        sqlx::query("SELECT pg_advisory_lock($1)")
            .bind(key)
            .execute(&mut other)
            .await
            .unwrap();
        sqlx::query(
            "INSERT INTO distlock_session
               (token, key, name, owner, kind, fair, fence, backend_pid, host, pid, since_ms, ttl_ms)
             VALUES ('other', $1, 'invoices', 'o', 'mutex', 0, 1, pg_backend_pid(), 'h', 1, 0, 1000)",
        )
        .bind(key)
        .execute(&mut other)
        .await
        .unwrap();

        assert!(client.mutex("reports").try_lock().await.unwrap().is_none());
        assert_eq!(
            backend.key_collisions(),
            [("invoices".to_owned(), "reports".to_owned())]
        );
        other.close().await.unwrap();
        let guard = client
            .mutex("reports")
            .lock_timeout(Duration::from_secs(3))
            .await
            .unwrap();
        guard.release().await.unwrap();
    });
}

#[test]
fn waiters_wait_in_the_servers_queue_and_a_cancelled_wait_leaves_nothing() {
    distlock_testkit::block_on(async {
        let pg = distlock_testkit::postgres_server().unwrap_or_else(|e| panic!("{e}"));
        let url = distlock_testkit::postgres_url(&pg);
        let mut db = PgConnection::connect(&url).await.unwrap();
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
            if advisory_locks(&mut db, false).await == 1 {
                queued = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(queued, "the waiter waits in PostgreSQL's lock queue");
        let state = &a.status(Some("queue")).await.unwrap()[0];
        assert_eq!(state.holders.len(), 1);
        assert_eq!(state.waiters.len(), 1, "status shows the waiter");

        let err = waiter.await.unwrap().unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Timeout);
        assert_eq!(
            advisory_locks(&mut db, false).await,
            0,
            "the timed-out wait left the server's queue"
        );
        held.release().await.unwrap();
        assert_eq!(advisory_locks(&mut db, true).await, 0, "nothing stays held");
        let state = &a.status(Some("queue")).await.unwrap()[0];
        assert!(state.holders.is_empty() && state.waiters.is_empty());
    });
}

#[test]
fn connections_go_back_clean_and_are_reused() {
    distlock_testkit::block_on(async {
        let pg = distlock_testkit::postgres_server().unwrap_or_else(|e| panic!("{e}"));
        let url = distlock_testkit::postgres_url(&pg);
        let mut db = PgConnection::connect(&url).await.unwrap();
        let client = distlock::Client::connect(&url).await.unwrap();
        let mut holders = std::collections::BTreeSet::new();
        for round in 0..20 {
            let guard = client
                .mutex(format!("n{}", round % 3))
                .lock()
                .await
                .unwrap();
            let reader = client.rwlock("shared").read().await.unwrap();
            let pids: Vec<i32> = sqlx::query(
                "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 1 AND granted",
            )
            .fetch_all(&mut db)
            .await
            .unwrap()
            .iter()
            .map(|row| row.get(0))
            .collect();
            assert_eq!(pids.len(), 2, "each lock is held by a session of its own");
            holders.extend(pids);
            guard.release().await.unwrap();
            reader.release().await.unwrap();
            assert_eq!(
                advisory_locks(&mut db, true).await,
                0,
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
        let pg = distlock_testkit::postgres_server().unwrap_or_else(|e| panic!("{e}"));
        let url = distlock_testkit::postgres_url(&pg);
        let a = distlock::Client::connect(&url).await.unwrap();
        // Renewed every 10 s: no renewal comes during the test.
        let options = LockOptions::new().ttl(Duration::from_secs(30));
        let first = a.mutex("restart-1").lock_with(&options).await.unwrap();
        let second = a.rwlock("restart-2").read_with(&options).await.unwrap();
        let tokens = [first.fencing_token(), second.fencing_token()];

        let _pg =
            distlock_testkit::restart_losing_first(pg, vec![first.lost(), second.lost()]).await;

        let b = distlock::Client::connect(&url).await.unwrap();
        let next = b
            .mutex("restart-1")
            .lock_timeout(Duration::from_secs(3))
            .await
            .unwrap();
        assert!(next.fencing_token() > tokens[0]);
        let writer = a
            .rwlock("restart-2")
            .write_with(&LockOptions::new().wait(Duration::from_secs(3)))
            .await
            .expect("the same client gets locks again once the database is back");
        assert!(writer.fencing_token() > tokens[1]);
    });
}

#[test]
fn database_paused_past_the_ttl_puts_the_lock_at_risk_then_loses_it() {
    distlock_testkit::block_on(async {
        let pg = distlock_testkit::postgres_server().unwrap_or_else(|e| panic!("{e}"));
        distlock_testkit::lose_to_a_paused_server(&session_url(pg.addr()), &pg, "paused").await;
    });
}

#[test]
fn a_client_cut_off_loses_its_lock_and_the_server_frees_it() {
    distlock_testkit::block_on(async {
        let pg = distlock_testkit::postgres_server().unwrap_or_else(|e| panic!("{e}"));
        let proxy = distlock_testkit::FaultProxy::start(pg.addr())
            .await
            .unwrap();
        distlock_testkit::cut_session_is_freed_at_once(
            &session_url(proxy.addr()),
            &session_url(pg.addr()),
            &proxy,
            "cut",
        )
        .await;
    });
}

#[test]
fn a_black_holed_client_goes_at_risk_then_lost_before_the_server_frees_the_lock() {
    distlock_testkit::block_on(async {
        let pg = distlock_testkit::postgres_server().unwrap_or_else(|e| panic!("{e}"));
        let proxy = distlock_testkit::FaultProxy::start(pg.addr())
            .await
            .unwrap();
        let mut db = PgConnection::connect(&session_url(pg.addr()))
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
        assert_eq!(
            advisory_locks(&mut db, true).await,
            1,
            "the server still held the lock when the holder gave it up"
        );
        // The server ends the silent session after its ttl.
        let _next = distlock_testkit::take_over(
            &session_url(pg.addr()),
            "hole",
            guard.fencing_token(),
            Duration::from_secs(4),
        )
        .await;
    });
}

#[test]
fn semaphores_are_leases_beside_the_session_locks() {
    distlock_testkit::block_on(async {
        let pg = distlock_testkit::postgres_server().unwrap_or_else(|e| panic!("{e}"));
        let url = distlock_testkit::postgres_url(&pg);
        let client = distlock::Client::connect(&url).await.unwrap();
        let mutex = client.mutex("mixed").lock().await.unwrap();
        let permit = client.semaphore("pool", 2).acquire().await.unwrap();
        let states = client.status(None).await.unwrap();
        let names: Vec<&str> = states.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["mixed", "pool"]);
        permit.renew().await.unwrap();
        let err = client
            .semaphore("mixed", 2)
            .try_acquire()
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
        mutex.renew().await.unwrap();
        permit.release().await.unwrap();
        mutex.release().await.unwrap();
    });
}

#[test]
fn a_pool_of_one_connection_serves_every_kind() {
    distlock_testkit::block_on(async {
        let server = distlock_testkit::postgres_server().unwrap_or_else(|e| panic!("{e}"));
        distlock_testkit::a_pool_of_one_serves_every_kind(&distlock_testkit::postgres_url(&server))
            .await;
    });
}

/// The connection that watches the server, ended by an operator (or a script that kills
/// long queries): the client cannot tell that from a restart, so its session locks turn
/// `Lost` at once — on the safe side — and later locks are granted as before.
#[test]
fn a_watch_connection_ended_by_an_operator_loses_the_locks_held_then() {
    distlock_testkit::block_on(async {
        let pg = distlock_testkit::postgres_server().unwrap_or_else(|e| panic!("{e}"));
        let url = distlock_testkit::postgres_url(&pg);
        let client = distlock::Client::connect(&url).await.unwrap();
        let options = LockOptions::new().ttl(Duration::from_secs(30));
        let held = client.mutex("watched").lock_with(&options).await.unwrap();
        let mut db = PgConnection::connect(&url).await.unwrap();
        let ended: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity
             WHERE application_name = 'distlock-sentinel') AS t",
        )
        .fetch_one(&mut db)
        .await
        .unwrap();
        assert_eq!(ended, 1, "one watch connection per client, named");
        tokio::time::timeout(Duration::from_secs(1), held.lost())
            .await
            .expect("turned Lost at once");
        let next = client
            .mutex("watched")
            .lock_timeout(Duration::from_secs(5))
            .await
            .unwrap();
        assert!(next.fencing_token() > held.fencing_token());
        next.release().await.unwrap();
    });
}

/// A server frozen mid-call (SIGSTOP): an acquire returns by its deadline and a release by
/// its operation timeout, the watch connection notwithstanding.
#[test]
fn a_hung_server_bounds_every_call_by_its_deadline() {
    distlock_testkit::block_on(async {
        let server = distlock_testkit::postgres_server().unwrap_or_else(|e| panic!("{e}"));
        let url = distlock_testkit::postgres_url(&server);
        distlock_testkit::a_hung_server_bounds_every_call(&url, &server).await;
    });
}
