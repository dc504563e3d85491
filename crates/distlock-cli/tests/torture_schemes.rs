//! `distlock torture --scheme election`, `--scheme job` and `--scheme hand-off` on real
//! backends, under the default faults and a jumping wall clock: the checker finds no two
//! leaders, no term out of order, no stale leader's write accepted, no job run sooner than
//! its `--at-least` after a run that kept its lock or its `--once-per` after one that
//! succeeded, and no hand-off whose sender wrote
//! after the adoption or whose lock sat untaken past its deadline.

mod common;

use common::{distlock, json_lines, ok};

/// The faults: the defaults, and a waiter's wall clock jumping ahead.
const FAULTS: &str = "step-crash,step-pause,pause,kill,clock-jump";

/// Runs `scheme` (with `extra` arguments) against `url` for 6 s with three workers: the
/// verdict, once it is clean with faults injected; and the history.
fn clean(url: &str, scheme: &str, extra: &[&str]) -> (serde_json::Value, String) {
    clean_under(FAULTS, url, scheme, extra)
}

/// [`clean`] under `faults`.
fn clean_under(
    faults: &str,
    url: &str,
    scheme: &str,
    extra: &[&str],
) -> (serde_json::Value, String) {
    let state = tempfile::tempdir().unwrap();
    let history = state.path().join("history.jsonl");
    let history = history.to_str().unwrap();
    let mut args = vec!["torture", "--json", "--seed", "11", "--history", history];
    args.extend_from_slice(&["--workers", "3", "--duration", "6s", "--faults", faults]);
    args.extend_from_slice(&["--scheme", scheme]);
    args.extend_from_slice(extra);
    let out = distlock(url, state.path(), &args);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let Some(verdict) = json_lines(&stdout).pop() else {
        panic!("no verdict: {}", String::from_utf8_lossy(&out.stderr));
    };
    assert_eq!(verdict["clean"], true, "{scheme} on {url}: {verdict:#}");
    ok(&out);
    assert!(
        verdict["stats"]["faults"].as_u64().unwrap() >= 3,
        "{verdict}"
    );
    (verdict, std::fs::read_to_string(history).unwrap())
}

/// Elections on `url`: leaders change hands, each term's first write accepted; and a job
/// whose runs keep the lock for 500 ms: runs kept it, and others came after.
fn elections_and_jobs_are_clean(url: &str) {
    let (verdict, history) = clean(url, "election", &[]);
    let stats = &verdict["stats"];
    assert!(stats["transfers"].as_u64().unwrap() >= 5, "{stats}");
    assert!(stats["writes_accepted"].as_u64().unwrap() >= 10, "{stats}");
    assert!(history.contains("\"scheme\":\"election\""));

    let (verdict, history) = clean(url, "job", &["--at-least", "500ms"]);
    let kept = history.matches("\"outcome\":\"kept\"").count();
    assert!(kept >= 3, "runs kept their lock: {kept}, {verdict}");
    assert!(
        verdict["stats"]["acquisitions"].as_u64().unwrap() >= 4,
        "{verdict}"
    );

    // Most grants find the run too soon and never reach the body's steps: faults strike
    // holders from outside, wherever they are.
    let spaced = ["--at-least", "100ms", "--once-per", "1s"];
    let (verdict, history) = clean_under("pause,kill,clock-jump", url, "job", &spaced);
    let ran = history.matches("\"outcome\":\"kept\"").count();
    let skipped = history.matches("skipped: the last run").count();
    assert!(ran >= 2, "runs succeeded: {ran}, {verdict}");
    assert!(skipped >= 1, "runs found it too soon: {skipped}, {verdict}");
    assert!(history.contains("\"ev\":\"once-per\""));
}

/// Hand-offs on `url`: most grants pass by adoption.
fn hand_offs_are_clean(url: &str) {
    let (verdict, history) = clean(url, "hand-off", &[]);
    let handed = history.matches("\"outcome\":\"handed\"").count();
    assert!(handed >= 10, "grants were handed on: {handed}, {verdict}");
    assert!(
        verdict["stats"]["transfers"].as_u64().unwrap() >= 10,
        "{verdict}"
    );
}

#[test]
fn hand_offs_on_redis_sqlite_and_redlock_are_clean() {
    let redis = distlock_testkit::redis_server().unwrap_or_else(|e| panic!("{e}"));
    hand_offs_are_clean(&format!("redis://{}/0", redis.addr()));
    let dir = tempfile::tempdir().unwrap();
    hand_offs_are_clean(&format!(
        "sqlite://{}",
        dir.path().join("locks.db").display()
    ));
    let masters: Vec<_> = (0..3)
        .map(|_| distlock_testkit::redis_server().unwrap_or_else(|e| panic!("{e}")))
        .collect();
    let hosts: Vec<String> = masters.iter().map(|m| m.addr().to_string()).collect();
    hand_offs_are_clean(&format!("redlock://{}/0", hosts.join(",")));
}

#[test]
fn hand_offs_on_postgres_in_lease_mode_are_clean() {
    let pg = distlock_testkit::postgres_server().unwrap_or_else(|e| panic!("{e}"));
    hand_offs_are_clean(&format!(
        "{}?mode=lease",
        distlock_testkit::postgres_url(&pg)
    ));
}

#[test]
fn elections_and_jobs_on_sqlite_are_clean() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("locks.db").display());
    elections_and_jobs_are_clean(&url);
}

#[test]
fn elections_and_jobs_on_redis_are_clean() {
    let redis = distlock_testkit::redis_server().unwrap_or_else(|e| panic!("{e}"));
    elections_and_jobs_are_clean(&format!("redis://{}/0", redis.addr()));
}

#[test]
fn elections_and_jobs_on_postgres_are_clean() {
    let pg = distlock_testkit::postgres_server().unwrap_or_else(|e| panic!("{e}"));
    elections_and_jobs_are_clean(&distlock_testkit::postgres_url(&pg));
}

#[test]
fn elections_jobs_and_hand_offs_on_etcd_are_clean() {
    let etcd = distlock_testkit::etcd_server().unwrap_or_else(|e| panic!("{e}"));
    let url = format!("etcd://{}/torture?session_ttl=2s", etcd.addr());
    elections_and_jobs_are_clean(&url);
    hand_offs_are_clean(&url);
}

#[test]
fn elections_and_jobs_on_zookeeper_are_clean() {
    let zk = distlock_testkit::zookeeper_server().unwrap_or_else(|e| panic!("{e}"));
    elections_and_jobs_are_clean(&format!("zk://{}/torture?session_timeout=2s", zk.addr()));
}

/// A job without --at-least (or with one, or a --once-per, out of range), and an election
/// with --at-least or a mutex with --once-per, are refused as bad input.
#[test]
fn torture_refuses_a_job_without_at_least() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("locks.db").display());
    for args in [
        &["--scheme", "job"][..],
        &["--scheme", "job", "--at-least", "0s"],
        &["--scheme", "election", "--at-least", "1s"],
        &["--scheme", "distlock", "--once-per", "1s"],
        &["--scheme", "job", "--at-least", "1s", "--once-per", "0s"],
    ] {
        let mut all = vec!["torture", "--duration", "1s"];
        all.extend_from_slice(args);
        let out = distlock(&url, dir.path(), &all);
        assert_eq!(out.status.code(), Some(64), "{args:?}: {out:?}");
    }
}
