//! `distlock torture --server`: the run starts its own store through distlock-servers'
//! launchers, and freezes and restarts it besides pausing and killing holders; the history
//! must stay clean on every kind of server.

use std::process::{Command, Stdio};

mod common;

use common::{distlock, json_lines, ok};

/// A schedule shorter than the defaults (4 workers, 10 s).
const QUICK: &[&str] = &["--workers", "3", "--duration", "8s"];

/// torture starts its own `kind` of server and pauses and restarts it, besides pausing
/// and killing holders: the history stays clean.
fn own_server_is_clean(kind: &str) {
    let faults = ["server-pause", "pause", "server-restart", "kill"];
    let (verdict, lines) = own_server_run(kind, &faults, &[]);
    for fault in ["server-resume", "server-up"] {
        assert!(
            lines.contains(&format!(r#""fault":"{fault}""#)),
            "{kind}: {fault}"
        );
    }
    assert!(
        verdict["stats"]["acquisitions"].as_u64().unwrap() >= 5,
        "{verdict:#}"
    );
}

/// Runs torture on its own `kind` of server with `faults` and `extra` arguments; asserts
/// a clean verdict and that every fault struck; the verdict and the history's lines.
fn own_server_run(kind: &str, faults: &[&str], extra: &[&str]) -> (serde_json::Value, String) {
    let state = tempfile::tempdir().unwrap();
    let history = state.path().join("history.jsonl");
    let out = Command::new(env!("CARGO_BIN_EXE_distlock"))
        .env("XDG_STATE_HOME", state.path())
        .env_remove("DISTLOCK_URL")
        .args(["torture", "--json", "--seed", "7", "--server", kind])
        .args(["--faults", &faults.join(",")])
        .args(QUICK)
        .args(extra)
        .arg("--history")
        .arg(&history)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let verdict = json_lines(&String::from_utf8_lossy(&out.stdout)).pop();
    let verdict = verdict.unwrap_or_else(|| panic!("{kind}: {out:?}"));
    assert_eq!(verdict["clean"], true, "{kind}: {verdict:#}");
    ok(&out);
    let lines = std::fs::read_to_string(&history).unwrap();
    for fault in faults.iter().filter(|f| f.starts_with("server-")) {
        assert!(
            lines.contains(&format!(r#""fault":"{fault}""#)),
            "{kind}: {fault}"
        );
    }
    (verdict, lines)
}

/// Holds longer than a restart takes: a holder of a session lock learns that the server
/// restarted (and forgot its lock) before the restarted server can grant the lock to
/// another worker, so no two holders overlap. In 8 s of 1.5 s holds, a restart or two
/// taking seconds each, the lock changes hands at least twice.
#[test]
fn a_restarted_database_leaves_no_session_holder_at_work() {
    for kind in ["postgres", "mariadb"] {
        let (verdict, _) = own_server_run(kind, &["server-restart"], &["--hold", "1500ms"]);
        assert!(
            verdict["stats"]["transfers"].as_u64().unwrap() >= 2,
            "{verdict:#}"
        );
    }
}

#[test]
fn torture_pauses_and_restarts_its_own_redis() {
    own_server_is_clean("redis");
}

#[test]
fn torture_pauses_and_restarts_its_own_postgres() {
    own_server_is_clean("postgres");
    own_server_is_clean("postgres-lease");
}

#[test]
fn torture_pauses_and_restarts_its_own_mariadb() {
    own_server_is_clean("mariadb");
    own_server_is_clean("mariadb-lease");
}

#[test]
fn torture_pauses_and_restarts_its_own_zookeeper_and_etcd() {
    own_server_is_clean("zookeeper");
    own_server_is_clean("etcd");
}

#[test]
fn server_faults_need_the_runs_own_server() {
    let state = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", state.path().join("locks.db").display());
    let out = distlock(&url, state.path(), &["torture", "--faults", "server-pause"]);
    assert_eq!(out.status.code(), Some(64), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("--server"));
    let out = distlock(&url, state.path(), &["torture", "--server", "redis"]);
    assert_eq!(out.status.code(), Some(64), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("not both"));
}
