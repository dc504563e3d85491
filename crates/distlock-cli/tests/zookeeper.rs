//! The `distlock` command on ZooKeeper: run, status, demo and bench against a real server,
//! a held command whose session is lost while `distlock run` is frozen, and Ctrl-C while it
//! waits.

use serde_json::Value;

mod common;
mod deadlines;
mod elected;
mod frozen;
mod guarded;
mod min_ttl;
mod waits;

use common::{distlock, ok};

#[test]
fn run_status_demo_and_bench_work_on_zookeeper() {
    let zk = distlock_testkit::zookeeper_server().unwrap_or_else(|e| panic!("{e}"));
    let url = format!("zk://{}/cli?session_timeout=2s", zk.addr());
    let state = tempfile::tempdir().unwrap();

    let held = guarded::runs_guard_commands(&url, state.path());
    guarded::at_least_keeps_the_lock_after_the_command(&url, state.path(), false);
    guarded::once_per_skips_a_run_too_soon(&url, state.path());
    assert_eq!(
        held["remaining_ms"],
        Value::Null,
        "a session grant has no lease"
    );
    guarded::demo_never_oversells(&url, state.path());

    let out = distlock(
        &url,
        state.path(),
        &["bench", "--json", "--clients", "4", "--duration", "300ms"],
    );
    let report: Value = serde_json::from_str(&ok(&out)).unwrap();
    assert_eq!(report["backend"], "zookeeper");
    assert_eq!(
        report["floor"]["op"],
        "create ephemeral-sequential + delete"
    );
    assert!(report["contended"]["transfers_per_s"].as_f64().unwrap() > 0.0);
    assert!(report["uncontended"]["p50_vs_floor_p50"].as_f64().unwrap() > 0.0);
}

/// `distlock run` frozen (SIGSTOP) past its session timeout: the server expires the session,
/// another run takes the lock with a greater token, and when the first resumes it stops its
/// command and exits with the lost code.
#[test]
fn a_frozen_run_whose_session_expired_stops_its_command_on_resume() {
    let zk = distlock_testkit::zookeeper_server().unwrap_or_else(|e| panic!("{e}"));
    let url = format!("zk://{}/cli?session_timeout=1s", zk.addr());
    let state = tempfile::tempdir().unwrap();
    frozen::a_frozen_run_stops_its_command_on_resume(&url, state.path());
}

/// Ctrl-C (and SIGTERM, SIGHUP) while `distlock run` waits: it withdraws its request before
/// it exits, so no queue node keeps the next holder waiting for the session to expire.
#[test]
fn a_run_interrupted_while_it_waits_leaves_no_queue_entry() {
    let zk = distlock_testkit::zookeeper_server().unwrap_or_else(|e| panic!("{e}"));
    let url = format!("zk://{}/cli", zk.addr());
    let state = tempfile::tempdir().unwrap();
    waits::interrupted_waits_leave_no_queue_entry(&url, state.path());
}

/// A run at the shortest TTL it takes holds its lock for ten times its length.
#[test]
fn a_run_at_the_minimum_ttl_holds_its_lock() {
    let zk = distlock_testkit::zookeeper_server().unwrap_or_else(|e| panic!("{e}"));
    let state = tempfile::tempdir().unwrap();
    min_ttl::holds_at_the_minimum_ttl(
        &format!("zk://{}/cli", zk.addr()),
        state.path(),
        std::time::Duration::from_secs(1),
    );
}

/// `run --shared`, `--exclusive`, `--permits N --of M` and `--max-hold`.
#[test]
fn runs_take_every_kind_of_lock() {
    let zk = distlock_testkit::zookeeper_server().unwrap_or_else(|e| panic!("{e}"));
    let state = tempfile::tempdir().unwrap();
    let url = format!("zk://{}/cli?session_timeout=2s", zk.addr());
    guarded::runs_take_every_kind_of_lock(&url, state.path());
}

/// Credentials the server refuses are bad input (64), told once: no warning about the
/// request's clean-up, which fails for the same reason, comes above the error.
#[test]
fn refused_credentials_are_one_clear_error() {
    let zk = distlock_testkit::zookeeper_server().unwrap_or_else(|e| panic!("{e}"));
    let state = tempfile::tempdir().unwrap();
    let owner = format!("zk://app:s3cret@{}/secure", zk.addr());
    ok(&distlock(
        &owner,
        state.path(),
        &["run", "--name", "jobs/x", "--", "true"],
    ));
    for url in [
        format!("zk://app:wrong@{}/secure", zk.addr()),
        format!("zk://{}/secure", zk.addr()),
    ] {
        let out = distlock(
            &url,
            state.path(),
            &["run", "--name", "jobs/x", "--", "true"],
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(64), "{url}: {stderr}");
        assert!(!stderr.contains("WARN"), "{url}: {stderr}");
        assert!(
            !stderr.contains("s3cret") && !stderr.contains("wrong"),
            "{stderr}"
        );
    }
}

/// `run --wait 2s` against a server that never answers, and behind a holder with the
/// server frozen mid-wait: busy (75) within 2.3 s.
#[test]
fn a_wait_bounds_connecting_and_every_call() {
    let zk = distlock_testkit::zookeeper_server().unwrap_or_else(|e| panic!("{e}"));
    let holes = deadlines::BlackHoles::new(1);
    deadlines::bounded_by_the_wait(
        &format!("zk://{}/cli?session_timeout=2s", zk.addr()),
        &zk,
        &format!("zk://{}/cli", holes.addrs()),
    );
}

/// `elect` and `leader` on a store whose grants live by their session; a frozen `elect
/// --requeue` leads again in a new session.
#[test]
fn elect_runs_the_leader_and_leader_shows_it() {
    let server = distlock_testkit::zookeeper_server().unwrap_or_else(|e| panic!("{e}"));
    let url = format!("zk://{}/cli-elect?session_timeout=2s", server.addr());
    let state = tempfile::tempdir().unwrap();
    elected::elect_leads_and_leader_shows_it(&url, state.path());
    // Frozen past its 2 s session, it finds the session gone when it wakes.
    elected::requeued_leader_runs_again_after_a_loss(
        &url,
        state.path(),
        std::time::Duration::from_secs(2),
    );
}
