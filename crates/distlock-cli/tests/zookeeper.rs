//! The `distlock` command on ZooKeeper: run, status, demo and bench against a real server,
//! and a held command whose session is lost while `distlock run` is frozen.

use std::process::{Command, Stdio};

use distlock_testkit::{Signal, send};
use serde_json::Value;

mod common;
mod guarded;

use common::{distlock, ok};
use guarded::read_when_written;

const LOST: i32 = 76;

#[test]
fn run_status_demo_and_bench_work_on_zookeeper() {
    let zk = distlock_testkit::zookeeper_server().unwrap_or_else(|e| panic!("{e}"));
    let url = format!("zk://{}/cli?session_timeout=2s", zk.addr());
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
    let pid_file = state.path().join("child.pid");
    let mut holder = Command::new(env!("CARGO_BIN_EXE_distlock"))
        .env("XDG_STATE_HOME", state.path())
        .args(["--url", &url, "run", "--name", "frozen", "--", "sh", "-c"])
        .arg(format!(
            "echo $$ $DISTLOCK_FENCING_TOKEN > {}; exec sleep 60",
            pid_file.display()
        ))
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    let written = read_when_written(&pid_file);
    let (child_pid, token) = written.split_once(' ').unwrap();
    let (child_pid, token): (u32, u64) = (child_pid.parse().unwrap(), token.parse().unwrap());

    send(holder.id(), Signal::Stop);
    let taker = distlock(
        &url,
        state.path(),
        &[
            "run",
            "--name",
            "frozen",
            "--wait",
            "10s",
            "--",
            "sh",
            "-c",
            "echo $DISTLOCK_FENCING_TOKEN",
        ],
    );
    let next: u64 = ok(&taker).trim().parse().unwrap();
    assert!(
        next > token,
        "the next holder's token {next} is above {token}"
    );
    send(holder.id(), Signal::Continue);

    assert_eq!(holder.wait().unwrap().code(), Some(LOST));
    // SAFETY: kill with signal 0 only checks whether the process exists.
    let alive = unsafe { libc::kill(child_pid as libc::pid_t, 0) } == 0;
    assert!(!alive, "the command was stopped when the session was lost");
}
