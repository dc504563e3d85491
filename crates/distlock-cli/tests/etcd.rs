//! The `distlock` command on etcd: run, status, demo and bench against a real member.

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
fn run_status_demo_and_bench_work_on_etcd() {
    let etcd = distlock_testkit::etcd_server().unwrap_or_else(|e| panic!("{e}"));
    let url = format!("etcd://{}/cli?session_ttl=2s", etcd.addr());
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
    assert_eq!(report["backend"], "etcd");
    assert_eq!(report["floor"]["op"], "put");
    assert!(report["contended"]["transfers_per_s"].as_f64().unwrap() > 0.0);
    assert!(report["uncontended"]["p50_vs_floor_p50"].as_f64().unwrap() > 0.0);
    // The bench leaves no key behind (its keys lived on its session's lease).
    let keys = distlock_testkit::etcdctl(
        &etcd.addr().to_string(),
        &["get", "--prefix", "--keys-only", "cli/"],
    )
    .expect("etcdctl lists the keys");
    assert!(!keys.contains("bench/"), "{keys}");
}

/// Ctrl-C (and SIGTERM, SIGHUP) while `distlock run` waits: it withdraws its request before
/// it exits, so no key keeps the next holder waiting for the session's lease to expire.
#[test]
fn a_run_interrupted_while_it_waits_leaves_no_queue_entry() {
    let etcd = distlock_testkit::etcd_server().unwrap_or_else(|e| panic!("{e}"));
    let url = format!("etcd://{}/cli", etcd.addr());
    let state = tempfile::tempdir().unwrap();
    waits::interrupted_waits_leave_no_queue_entry(&url, state.path());
}

/// `distlock run` frozen (SIGSTOP) past its lease's TTL: etcd expires the lease, another run
/// takes the lock with a greater token, and when the first resumes it stops its command and
/// exits with the lost code.
#[test]
fn a_frozen_run_whose_lease_expired_stops_its_command_on_resume() {
    let etcd = distlock_testkit::etcd_server().unwrap_or_else(|e| panic!("{e}"));
    let url = format!("etcd://{}/cli?session_ttl=1s", etcd.addr());
    let state = tempfile::tempdir().unwrap();
    frozen::a_frozen_run_stops_its_command_on_resume(&url, state.path());
}

/// A run at the shortest TTL it takes holds its lock for ten times its length.
#[test]
fn a_run_at_the_minimum_ttl_holds_its_lock() {
    let etcd = distlock_testkit::etcd_server().unwrap_or_else(|e| panic!("{e}"));
    let state = tempfile::tempdir().unwrap();
    min_ttl::holds_at_the_minimum_ttl(
        &format!("etcd://{}/cli", etcd.addr()),
        state.path(),
        std::time::Duration::from_secs(1),
    );
}

/// `run --shared`, `--exclusive`, `--permits N --of M` and `--max-hold`.
#[test]
fn runs_take_every_kind_of_lock() {
    let etcd = distlock_testkit::etcd_server().unwrap_or_else(|e| panic!("{e}"));
    let state = tempfile::tempdir().unwrap();
    let url = format!("etcd://{}/cli?session_ttl=2s", etcd.addr());
    guarded::runs_take_every_kind_of_lock(&url, state.path());
}

/// On an etcd with auth enabled, a run without credentials is bad input (64), told once: no
/// warning about the request's clean-up, which fails for the same reason, comes above it.
#[test]
fn a_run_without_credentials_is_one_clear_error() {
    let etcd = distlock_testkit::etcd_server().unwrap_or_else(|e| panic!("{e}"));
    let endpoint = etcd.addr().to_string();
    let etcdctl = |args: &[&str]| {
        distlock_testkit::etcdctl(&endpoint, args)
            .unwrap_or_else(|| panic!("etcdctl {args:?} failed"))
    };
    etcdctl(&["user", "add", "root", "--new-user-password=r00tpw"]);
    etcdctl(&["auth", "enable"]);
    let state = tempfile::tempdir().unwrap();
    let url = format!("etcd://{endpoint}/app");
    let out = distlock(
        &url,
        state.path(),
        &["run", "--name", "jobs/x", "--", "true"],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(64), "{stderr}");
    assert!(!stderr.contains("WARN"), "{stderr}");
}

/// `run --wait 2s` against a member that never answers, and behind a holder with the
/// member frozen mid-wait: busy (75) within 2.3 s.
#[test]
fn a_wait_bounds_connecting_and_every_call() {
    let etcd = distlock_testkit::etcd_server().unwrap_or_else(|e| panic!("{e}"));
    let holes = deadlines::BlackHoles::new(1);
    deadlines::bounded_by_the_wait(
        &format!("etcd://{}/cli?session_ttl=2s", etcd.addr()),
        &etcd,
        &format!("etcd://{}/cli", holes.addrs()),
    );
}

/// Where a lock lives in etcd is told where it matters: `status` and a busy `--no-wait`
/// name its keys' prefix, which `?prefix=/locks` gives verbatim (Go's `"/locks/x/"`).
#[test]
fn status_and_a_busy_run_name_the_locks_keys() {
    let etcd = distlock_testkit::etcd_server().unwrap_or_else(|e| panic!("{e}"));
    let state = tempfile::tempdir().unwrap();
    let url = format!("etcd://{}?prefix=/locks&session_ttl=2s", etcd.addr());
    let go = state.path().join("go");
    let script = format!("echo go > {}; exec sleep 30", go.display());
    let holder = waits::spawn(
        &url,
        state.path(),
        &["run", "--name", "x", "--", "sh", "-c", &script],
    );
    assert_eq!(waits::read_when_written(&go), "go");
    let table = ok(&distlock(&url, state.path(), &["status", "x"]));
    assert!(table.contains("etcd keys /locks/x/"), "{table}");
    let busy = distlock(
        &url,
        state.path(),
        &["run", "--name", "x", "--no-wait", "--", "true"],
    );
    let stderr = String::from_utf8_lossy(&busy.stderr);
    assert_eq!(busy.status.code(), Some(75), "{stderr}");
    assert!(stderr.contains("etcd keys /locks/x/"), "{stderr}");
    distlock_testkit::send(holder.0.id(), distlock_testkit::Signal::Terminate);
}

/// `elect` and `leader` on a store whose grants live by their session; a frozen `elect
/// --requeue` leads again in a new session.
#[test]
fn elect_runs_the_leader_and_leader_shows_it() {
    let server = distlock_testkit::etcd_server().unwrap_or_else(|e| panic!("{e}"));
    let url = format!("etcd://{}/cli-elect?session_ttl=2s", server.addr());
    let state = tempfile::tempdir().unwrap();
    elected::elect_leads_and_leader_shows_it(&url, state.path());
    // Frozen past its 2 s session, it finds the session gone when it wakes.
    elected::requeued_leader_runs_again_after_a_loss(
        &url,
        state.path(),
        std::time::Duration::from_secs(2),
    );
}
