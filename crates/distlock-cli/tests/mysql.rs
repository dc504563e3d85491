//! The `distlock` command on MySQL/MariaDB, in both lock modes.

mod common;
mod database;
mod deadlines;
mod elected;
mod guarded;
mod min_ttl;
mod waits;

#[test]
fn demo_status_and_bench_in_session_mode() {
    let db = distlock_testkit::mariadb_server().unwrap_or_else(|e| panic!("{e}"));
    database::demo_keeps_the_shop_in_the_database(&distlock_testkit::mariadb_url(&db), "");
}

#[test]
fn demo_status_and_bench_in_lease_mode() {
    let db = distlock_testkit::mariadb_server().unwrap_or_else(|e| panic!("{e}"));
    database::demo_keeps_the_shop_in_the_database(
        &distlock_testkit::mariadb_url(&db),
        "?mode=lease",
    );
}

#[test]
fn a_wrong_url_fails_at_once_and_says_why() {
    let db = distlock_testkit::mariadb_server().unwrap_or_else(|e| panic!("{e}"));
    database::a_wrong_url_fails_at_once_and_says_why(
        &distlock_testkit::mariadb_url(&db),
        distlock_testkit::DATABASE_PASSWORD,
    );
}

/// A run at the shortest TTL it takes holds its lock for ten times its length, in both modes.
#[test]
fn a_run_at_the_minimum_ttl_holds_its_lock() {
    let db = distlock_testkit::mariadb_server().unwrap_or_else(|e| panic!("{e}"));
    let state = tempfile::tempdir().unwrap();
    let url = distlock_testkit::mariadb_url(&db);
    min_ttl::holds_at_the_minimum_ttl(&url, state.path(), std::time::Duration::from_secs(1));
    min_ttl::holds_at_the_minimum_ttl(
        &format!("{url}?mode=lease"),
        state.path(),
        std::time::Duration::from_secs(1),
    );
}

#[test]
fn a_hung_server_is_given_up_at_the_connect_timeout() {
    let db = distlock_testkit::mariadb_server().unwrap_or_else(|e| panic!("{e}"));
    database::a_hung_server_is_given_up_at_the_connect_timeout(
        &distlock_testkit::mariadb_url(&db),
        &db,
    );
}

/// Ctrl-C (and SIGTERM, SIGHUP) while `distlock run` waits, in both modes: it withdraws its
/// request before it exits with 128 + the signal, so no queue entry is left behind.
#[test]
fn a_run_interrupted_while_it_waits_leaves_no_queue_entry() {
    let db = distlock_testkit::mariadb_server().unwrap_or_else(|e| panic!("{e}"));
    let url = distlock_testkit::mariadb_url(&db);
    for mode in ["", "?mode=lease"] {
        let state = tempfile::tempdir().unwrap();
        waits::interrupted_waits_leave_no_queue_entry(&format!("{url}{mode}"), state.path());
    }
}

/// What `run`, `status` and `demo` do on every backend, and `run --shared`, `--exclusive`,
/// `--permits N --of M` and `--max-hold`, in both modes.
#[test]
fn runs_take_every_kind_of_lock() {
    let db = distlock_testkit::mariadb_server().unwrap_or_else(|e| panic!("{e}"));
    database::runs_take_every_kind_of_lock_in_both_modes(&distlock_testkit::mariadb_url(&db));
}

/// `run --wait 2s` against a server that never answers, and behind a holder with the
/// server frozen mid-wait, in both modes: busy (75) within 2.3 s.
#[test]
fn a_wait_bounds_connecting_and_every_call() {
    let db = distlock_testkit::mariadb_server().unwrap_or_else(|e| panic!("{e}"));
    let holes = deadlines::BlackHoles::new(1);
    database::a_wait_bounds_connecting_and_every_call_in_both_modes(
        &distlock_testkit::mariadb_url(&db),
        &db,
        &format!("mysql://distlock@{}/distlock", holes.addrs()),
    );
}

/// `elect` and `leader` in both lock modes; a frozen `elect --requeue` leads again.
#[test]
fn elect_runs_the_leader_and_leader_shows_it() {
    let server = distlock_testkit::mariadb_server().unwrap_or_else(|e| panic!("{e}"));
    let base = distlock_testkit::mariadb_url(&server);
    for mode in ["", "?mode=lease"] {
        let state = tempfile::tempdir().unwrap();
        let url = format!("{base}{mode}");
        elected::elect_leads_and_leader_shows_it(&url, state.path());
        elected::requeued_leader_runs_again_after_a_loss(
            &url,
            state.path(),
            std::time::Duration::from_secs(1),
        );
    }
}
