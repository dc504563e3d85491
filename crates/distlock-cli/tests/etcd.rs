//! The `distlock` command on etcd: run, status, demo and bench against a real member.

use serde_json::Value;

mod common;
mod guarded;

use common::{distlock, ok};

#[test]
fn run_status_demo_and_bench_work_on_etcd() {
    let etcd = distlock_testkit::etcd_server().unwrap_or_else(|e| panic!("{e}"));
    let url = format!("etcd://{}/cli?session_ttl=2s", etcd.addr());
    let state = tempfile::tempdir().unwrap();

    let held = guarded::runs_guard_commands(&url, state.path());
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
}
