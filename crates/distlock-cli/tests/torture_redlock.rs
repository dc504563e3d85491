//! `distlock torture --server redlock`: the documents' three ways to grant a RedLock
//! twice — a master restarted empty, a replica promoted before it had the grant, a
//! master's clock stepped past the lease — each shown as the overlap the checker names,
//! while the fenced resource accepts no write of the stale holder and the tokens keep
//! increasing.

use std::process::{Command, Stdio};

mod common;

use common::{distlock, json_lines, ok};

/// The runs a fault gets to show its overlap in: each strikes three or four times in
/// 10 s, and a strike overlaps two holders unless the holder's next renewal finds the
/// loss before another worker's try finds the lock free.
const RUNS: u64 = 3;

/// Runs torture on its own RedLock with `fault` alone: the verdict.
fn redlock_run(fault: &str, seed: u64) -> serde_json::Value {
    let state = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_distlock"))
        .env("XDG_STATE_HOME", state.path())
        .env_remove("DISTLOCK_URL")
        .args([
            "torture",
            "--json",
            "--server",
            "redlock",
            "--duration",
            "10s",
        ])
        .args(["--faults", fault, "--seed", &seed.to_string()])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let verdict = json_lines(&String::from_utf8_lossy(&out.stdout)).pop();
    verdict.unwrap_or_else(|| panic!("{fault}: {out:?}"))
}

/// The kinds of the violations of `verdict`, and the messages of its overlaps.
fn found(verdict: &serde_json::Value) -> (Vec<String>, Vec<String>) {
    let violations = verdict["violations"].as_array().unwrap();
    let kinds = violations
        .iter()
        .map(|v| v["kind"].as_str().unwrap().to_owned())
        .collect();
    let overlaps = violations
        .iter()
        .filter(|v| v["kind"] == "overlap")
        .map(|v| v["message"].as_str().unwrap().to_owned())
        .collect();
    (kinds, overlaps)
}

/// Runs `fault` until a run shows an overlap it caused (at most [`RUNS`]): no run lets a
/// stale holder's write through the fenced resource or hands out a token out of order.
fn shows_its_overlap(fault: &str) {
    for seed in 1..=RUNS {
        let verdict = redlock_run(fault, seed);
        let (kinds, overlaps) = found(&verdict);
        for kind in &kinds {
            assert!(
                matches!(kind.as_str(), "overlap" | "lost-update"),
                "{fault}: only the overlap and its lost updates: {verdict:#}"
            );
        }
        assert!(
            verdict["stats"]["acquisitions"].as_u64().unwrap() >= 5,
            "{verdict:#}"
        );
        let caused = format!(", after {fault} ");
        if overlaps.iter().any(|message| message.contains(&caused)) {
            return;
        }
    }
    panic!("{fault}: no overlap in {RUNS} runs");
}

#[test]
fn a_master_restarted_empty_grants_the_lock_twice() {
    shows_its_overlap("master-restart");
}

#[test]
fn a_replica_promoted_without_the_grant_grants_the_lock_twice() {
    shows_its_overlap("failover");
}

#[test]
fn a_masters_clock_jump_grants_the_lock_twice() {
    shows_its_overlap("master-clock-jump");
}

#[test]
fn master_faults_go_with_the_runs_own_redlock() {
    let state = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", state.path().join("locks.db").display());
    let help = ok(&distlock(&url, state.path(), &["torture", "--help"]));
    for fault in ["master-restart", "failover", "master-clock-jump"] {
        assert!(help.contains(fault), "{help}");
    }
    let out = distlock(&url, state.path(), &["torture", "--faults", "failover"]);
    assert_eq!(out.status.code(), Some(64), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("--server redlock"));
    let args = [
        "torture",
        "--server",
        "redlock",
        "--faults",
        "server-restart",
    ];
    let out = distlock(&url, state.path(), &args);
    assert_eq!(out.status.code(), Some(64), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("master-restart"));
}

/// Ctrl-C while the masters start (six servers, in their own process groups) stops the
/// run with 130 and leaves none of them running: the start finishes, then what it started
/// is stopped.
#[test]
fn ctrl_c_while_the_masters_start_leaves_no_server_behind() {
    let mark = format!("torture-start-{}", std::process::id());
    for delay_ms in [100, 300] {
        let state = tempfile::tempdir().unwrap();
        let mut run = Command::new(env!("CARGO_BIN_EXE_distlock"))
            .env("XDG_STATE_HOME", state.path())
            .env("DISTLOCK_TEST_MARK", &mark)
            .env_remove("DISTLOCK_URL")
            .args(["torture", "--server", "redlock", "--duration", "3s"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(delay_ms));
        // SAFETY: kill(2) on the child's pid, which it still is until waited for.
        unsafe { libc::kill(run.id() as i32, libc::SIGINT) };
        let status = run.wait().unwrap();
        assert_eq!(status.code(), Some(130), "after {delay_ms} ms: {status:?}");
        assert_eq!(
            marked_processes(&mark),
            0,
            "servers left after {delay_ms} ms"
        );
    }
}

/// How many processes carry `mark` in their environment.
fn marked_processes(mark: &str) -> usize {
    let wanted = format!("DISTLOCK_TEST_MARK={mark}");
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter(|entry| entry.file_name().to_string_lossy().parse::<u32>().is_ok())
        .filter_map(|entry| std::fs::read(entry.path().join("environ")).ok())
        .filter(|environ| {
            environ
                .split(|b| *b == 0)
                .any(|var| var == wanted.as_bytes())
        })
        .count()
}
