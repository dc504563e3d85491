//! The `distlock` command on a server database (PostgreSQL, MySQL/MariaDB), in one lock
//! mode: the demo keeps its shop in the locks' own database (removed afterwards unless
//! `--keep`) and shows which strategies oversell; status answers; bench measures both modes
//! side by side.

use distlock_testkit::Server;
use serde_json::Value;
use sqlx::{Connection, Row};

use crate::common::{distlock, json_lines, ok};

/// Runs the demo, status and bench on `{base}{mode}`, where `base` is the database's URL
/// without distlock's parameters.
pub fn demo_keeps_the_shop_in_the_database(base: &str, mode: &str) {
    let url = format!("{base}{mode}");
    let state = tempfile::tempdir().unwrap();
    let out = distlock(
        &url,
        state.path(),
        &[
            "demo",
            "--json",
            "--stock",
            "20",
            "--buyers",
            "60",
            "--workers",
            "3",
            "--keep",
        ],
    );
    let text = ok(&out);
    let rows = json_lines(&text);
    let by = |name: &str| rows.iter().find(|r| r["strategy"] == name).unwrap();
    assert!(
        by("none")["oversold"].as_i64().unwrap() > 0,
        "unguarded buyers oversell: {text}"
    );
    for strategy in ["optimistic", "select-for-update", "lock", "segmented"] {
        let row = by(strategy);
        assert_eq!(row["oversold"], 0, "{strategy}: {text}");
        assert_eq!(row["orders"], 20, "{strategy}: {text}");
        assert_eq!(row["stock_left"], 0, "{strategy}: {text}");
    }

    // The last strategy's orders (segmented: each segment under a lock of its own) are in
    // the database, each stamped with its segment lock's token.
    distlock_testkit::block_on(async {
        sqlx::any::install_default_drivers();
        let mut db = sqlx::AnyConnection::connect(base).await.unwrap();
        let tokens: Vec<i64> = sqlx::query(
            "SELECT fencing_token FROM distlock_demo_orders WHERE strategy = 'segmented'",
        )
        .fetch_all(&mut db)
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
        assert_eq!(tokens.len(), 20);
        assert!(tokens.iter().all(|t| *t > 0), "{tokens:?}");
    });
    // Without --keep, the demo leaves no table behind.
    let small = [
        "demo",
        "--strategies",
        "lock",
        "--stock",
        "2",
        "--buyers",
        "4",
        "--workers",
        "1",
    ];
    ok(&distlock(&url, state.path(), &small));
    distlock_testkit::block_on(async {
        let mut db = sqlx::AnyConnection::connect(base).await.unwrap();
        for table in ["distlock_demo_orders", "distlock_demo_product"] {
            let read = sqlx::query(&format!("SELECT COUNT(*) FROM {table}"))
                .fetch_one(&mut db)
                .await;
            assert!(read.is_err(), "{table} was removed");
        }
    });

    // The demo's lock is free again and its counter saw every sale of the lock strategy.
    let status = ok(&distlock(
        &url,
        state.path(),
        &["status", "demo/shop/product-1", "--json"],
    ));
    let states: Value = serde_json::from_str(&status).unwrap();
    assert_eq!(states[0]["name"], "demo/shop/product-1", "{status}");
    assert!(
        states[0]["holders"].as_array().unwrap().is_empty(),
        "{status}"
    );
    assert!(
        states[0]["last_fencing_token"].as_u64().unwrap() >= 60,
        "every buyer of the lock strategy took the lock: {status}"
    );
    // Both modes measured in one run, each against its own floor: the other mode beside
    // the one under test.
    let (other, other_mode) = match mode.contains("mode=lease") {
        true => (format!("{base}?mode=session"), "mode=session"),
        false => (format!("{base}?mode=lease"), "mode=lease"),
    };
    let bench = ok(&distlock(
        &url,
        state.path(),
        &[
            "bench",
            "--json",
            "--clients",
            "4",
            "--duration",
            "300ms",
            "--also",
            &other,
        ],
    ));
    let reports = json_lines(&bench);
    assert_eq!(reports.len(), 2, "{bench}");
    for report in &reports {
        assert_eq!(report["floor"]["op"], "SELECT 1", "{bench}");
        assert!(report["uncontended"]["p50_vs_floor_p50"].as_f64().unwrap() > 0.0);
    }
    assert!(!reports[0]["url"].as_str().unwrap().contains(other_mode));
    assert!(reports[1]["url"].as_str().unwrap().contains(other_mode));
    assert_eq!(
        bench_counters(base),
        0,
        "the bench forgot its fencing counters"
    );
}

/// How many fencing counters of bench locks the database at `base` keeps, in either mode.
fn bench_counters(base: &str) -> i64 {
    let sql = match base.starts_with("postgres") {
        true => "SELECT COUNT(*) FROM distlock_fence WHERE name LIKE 'bench/%'",
        false => {
            "SELECT (SELECT COUNT(*) FROM distlock_fence WHERE lock_key LIKE 'bench/%')
                  + (SELECT COUNT(*) FROM distlock_session_lock WHERE lock_key LIKE 'bench/%')"
        }
    };
    distlock_testkit::block_on(async {
        sqlx::any::install_default_drivers();
        let url = base.replacen("mariadb://", "mysql://", 1);
        let mut db = <sqlx::AnyConnection as sqlx::Connection>::connect(&url)
            .await
            .unwrap();
        let count: i64 = sqlx::query_scalar(sql).fetch_one(&mut db).await.unwrap();
        count
    })
}

/// What a user with a wrong URL meets, given the working `url` of a server database
/// (`scheme://user:password@host:port/db`): a wrong password and a database that does not
/// exist are bad input (64), a port where nothing listens fails at once with the refusal
/// (69, not a pool's "timed out" after its connect timeout), TLS asked of a server without
/// it is bad input, and no message holds the password.
pub fn a_wrong_url_fails_at_once_and_says_why(url: &str, password: &str) {
    let state = tempfile::tempdir().unwrap();
    let port = distlock_testkit::free_port().unwrap();
    let (head, rest) = url.rsplit_once('@').unwrap();
    let (scheme, _) = url.split_once("://").unwrap();
    let (_, database) = rest.split_once('/').unwrap();
    // The server speaks no TLS.
    let tls = match scheme {
        "postgres" => "sslmode=require",
        _ => "ssl-mode=required",
    };
    let cases = [
        (
            head.replace(password, "not-the-password") + "@" + rest,
            64,
            "refused the connection",
        ),
        (
            format!("{head}@{}", rest.replacen(database, "no_such_database", 1)),
            64,
            "no_such_database",
        ),
        (
            format!("{head}@127.0.0.1:{port}/{database}?connect_timeout=60s"),
            69,
            "refused",
        ),
        (format!("{url}?connect_timeout=0s"), 64, "connect_timeout"),
        (format!("{url}?{tls}"), 64, "tls"),
    ];
    let no_database = (
        format!("{head}@{}", rest.split_once('/').unwrap().0),
        64,
        "names none",
    );
    let cases = cases
        .into_iter()
        .chain((scheme == "mysql").then_some(no_database));
    for (wrong, code, says) in cases {
        let started = std::time::Instant::now();
        let out = distlock(&wrong, state.path(), &["status"]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{scheme}: {stderr}");
        assert!(stderr.to_lowercase().contains(says), "{scheme}: {stderr}");
        assert!(!stderr.contains(password), "{stderr}");
        assert!(!stderr.contains("timed out"), "{scheme}: {stderr}");
        assert!(
            started.elapsed() < std::time::Duration::from_secs(20),
            "{scheme}: answered at once, not after a timeout: {:?}",
            started.elapsed()
        );
    }
}

/// A database server that hangs (SIGSTOP) while a client connects: the connect gives up at
/// the URL's `connect_timeout` and says so (69), instead of the pool's fixed wait.
pub fn a_hung_server_is_given_up_at_the_connect_timeout(url: &str, server: &Server) {
    let state = tempfile::tempdir().unwrap();
    server.pause();
    let started = std::time::Instant::now();
    let out = distlock(
        &format!("{url}?connect_timeout=500ms"),
        state.path(),
        &["status"],
    );
    let took = started.elapsed();
    server.resume();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(69), "{stderr}");
    assert!(stderr.contains("connect_timeout"), "{stderr}");
    assert!(
        took < std::time::Duration::from_secs(4),
        "{took:?}: {stderr}"
    );
}

/// A database URL's two lock modes, as the query that picks each: session (the default)
/// and lease.
const MODES: [&str; 2] = ["", "?mode=lease"];

/// What `run`, `status` and `demo` do on every backend, and every kind of lock `run` takes
/// (`--shared`, `--exclusive`, `--permits N --of M`, `--max-hold`), in both modes.
pub fn runs_take_every_kind_of_lock_in_both_modes(url: &str) {
    for mode in MODES {
        let state = tempfile::tempdir().unwrap();
        let url = format!("{url}{mode}");
        crate::guarded::runs_guard_commands(&url, state.path());
        crate::guarded::demo_never_oversells(&url, state.path());
        crate::guarded::runs_take_every_kind_of_lock(&url, state.path());
        let in_store = mode.contains("lease");
        crate::guarded::at_least_keeps_the_lock_after_the_command(&url, state.path(), in_store);
        crate::guarded::once_per_skips_a_run_too_soon(&url, state.path());
    }
}

/// `run --wait 2s` against `black_hole` (a URL of the same kind whose server never
/// answers) and behind a holder with `server` frozen mid-wait, in both modes.
pub fn a_wait_bounds_connecting_and_every_call_in_both_modes(
    url: &str,
    server: &Server,
    black_hole: &str,
) {
    for mode in MODES {
        crate::deadlines::bounded_by_the_wait(
            &format!("{url}{mode}"),
            server,
            &format!("{black_hole}{mode}"),
        );
    }
}
