//! `distlock torture` on real backends: worker processes take one lock in turns while
//! holders are paused past their TTL and killed; the checker must find the history clean
//! (one valid holder at a time, no lost update, no stale write accepted, tokens in grant
//! order, no lock left free while workers waited), with faults injected and the lock
//! changing hands.

use serde_json::Value;

mod common;

use common::{distlock, json_lines, ok};

/// Runs a short torture against `url` with pauses and kills, and checks its verdict.
fn torture_is_clean(url: &str, extra: &[&str]) -> Value {
    let state = tempfile::tempdir().unwrap();
    let history = state.path().join("history.jsonl");
    let history = history.to_str().unwrap();
    let mut args = vec![
        "torture",
        "--json",
        "--workers",
        "3",
        "--duration",
        "8s",
        "--ttl",
        "1s",
        "--faults",
        "pause,kill",
        "--fault-every",
        "1500ms",
        "--seed",
        "7",
        "--history",
        history,
    ];
    args.extend_from_slice(extra);
    let out = distlock(url, state.path(), &args);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let Some(verdict) = json_lines(&stdout).pop() else {
        panic!("no verdict: {}", String::from_utf8_lossy(&out.stderr));
    };
    assert_eq!(verdict["clean"], true, "violations: {verdict:#}");
    ok(&out);
    let stats = &verdict["stats"];
    assert!(stats["faults"].as_u64().unwrap() >= 4, "{stats}");
    assert!(stats["transfers"].as_u64().unwrap() >= 20, "{stats}");
    assert!(
        stats["critical_sections"].as_u64().unwrap() >= 20,
        "{stats}"
    );
    let lines = std::fs::read_to_string(history).unwrap();
    assert!(lines.contains("\"fault\":\"pause\"") && lines.contains("\"fault\":\"kill\""));
    // A holder paused past its validity learned it lost the lock on resume: it abandoned
    // its section, its late write was refused, its guard reported the loss or its release
    // found the lock gone.
    assert!(
        [
            "\"ev\":\"abandon\"",
            "\"accepted\":false",
            "\"health\":\"lost\"",
            "\"outcome\":\"fail\""
        ]
        .iter()
        .any(|sign| lines.contains(sign)),
        "no pause cost a holder its lock: {stats}"
    );
    verdict
}

/// The negative control: a lease taken once and never renewed, whose holder never looks
/// at it again, with critical sections longer than the TTL. The checker must catch the
/// overlapping holders (exit 1), naming them.
#[test]
fn torture_catches_a_lease_without_renewal() {
    let state = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", state.path().join("locks.db").display());
    let out = distlock(
        &url,
        state.path(),
        &[
            "torture",
            "--json",
            "--scheme",
            "no-renewal",
            "--faults",
            "none",
            "--workers",
            "3",
            "--duration",
            "3s",
            "--ttl",
            "300ms",
            "--hold",
            "800ms",
        ],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let verdict = json_lines(&stdout).pop().expect("a verdict");
    assert_eq!(out.status.code(), Some(1), "{verdict:#}");
    assert_eq!(verdict["clean"], false);
    let kinds: Vec<&str> = verdict["violations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["kind"].as_str().unwrap())
        .collect();
    assert!(kinds.contains(&"overlap"), "{kinds:?}");
    let overlap = verdict["violations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["kind"] == "overlap")
        .unwrap();
    assert!(
        overlap["message"]
            .as_str()
            .unwrap()
            .contains("held the lock at once")
    );
}

#[test]
fn torture_on_sqlite_is_clean() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("locks.db").display());
    torture_is_clean(&url, &[]);
}

#[test]
fn torture_on_redis_is_clean() {
    let redis = distlock_testkit::redis_server().unwrap_or_else(|e| panic!("{e}"));
    torture_is_clean(&format!("redis://{}/0", redis.addr()), &[]);
}

#[test]
fn torture_refuses_memory_and_bad_urls() {
    let state = tempfile::tempdir().unwrap();
    let out = distlock("memory://", state.path(), &["torture", "--duration", "1s"]);
    assert_eq!(out.status.code(), Some(64));
    assert!(String::from_utf8_lossy(&out.stderr).contains("separate processes"));
    let out = distlock("nosuch://x", state.path(), &["torture", "--duration", "1s"]);
    assert_eq!(out.status.code(), Some(64));
    let url = format!("sqlite://{}", state.path().join("locks.db").display());
    for odd in [
        ["--fault-every", "0s"],
        ["--ttl", "1ms"],
        ["--duration", "500000000years"],
        ["--duration", "1ms"],
    ] {
        let out = distlock(&url, state.path(), &["torture", odd[0], odd[1]]);
        assert_eq!(out.status.code(), Some(64), "{odd:?}: {out:?}");
    }
}

#[test]
fn torture_on_postgres_in_both_modes_is_clean() {
    let pg = distlock_testkit::postgres_server().unwrap_or_else(|e| panic!("{e}"));
    let url = distlock_testkit::postgres_url(&pg);
    torture_is_clean(&url, &[]);
    torture_is_clean(&format!("{url}?mode=lease"), &[]);
}

#[test]
fn torture_on_etcd_is_clean() {
    let etcd = distlock_testkit::etcd_server().unwrap_or_else(|e| panic!("{e}"));
    // A killed holder's key lives until its session lease (2 s) expires; a pause
    // outlasts it.
    let url = format!("etcd://{}/torture?session_ttl=2s", etcd.addr());
    torture_is_clean(&url, &[]);
}

#[test]
fn torture_on_zookeeper_is_clean() {
    let zk = distlock_testkit::zookeeper_server().unwrap_or_else(|e| panic!("{e}"));
    // A killed holder's node lives until its session (2 s) expires; a pause outlasts it.
    let url = format!("zk://{}/torture?session_timeout=2s", zk.addr());
    torture_is_clean(&url, &[]);
}
