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

/// Ctrl-C (and SIGTERM, SIGHUP) while `distlock run` waits: it withdraws its request before
/// it exits with 128 + the signal, so no queue node is left to keep the next holder waiting
/// for the session to expire (10 s here).
#[test]
fn a_run_interrupted_while_it_waits_leaves_no_queue_entry() {
    let zk = distlock_testkit::zookeeper_server().unwrap_or_else(|e| panic!("{e}"));
    let url = format!("zk://{}/cli", zk.addr());
    let state = tempfile::tempdir().unwrap();
    let started = state.path().join("started");
    let mut holder = Command::new(env!("CARGO_BIN_EXE_distlock"))
        .args(["--url", &url, "run", "--name", "busy", "--", "sh", "-c"])
        .arg(format!("echo go > {}; exec sleep 30", started.display()))
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    assert_eq!(read_when_written(&started), "go");
    let waiters = || {
        let out = distlock(&url, state.path(), &["status", "busy", "--json"]);
        let shown: Value = serde_json::from_str(&ok(&out)).unwrap();
        shown[0]["waiters"].as_array().map_or(0, Vec::len)
    };
    for (signal, code) in [
        (Signal::Interrupt, 130),
        (Signal::Terminate, 143),
        (Signal::Hangup, 129),
    ] {
        let mut waiter = Command::new(env!("CARGO_BIN_EXE_distlock"))
            .args(["--url", &url, "run", "--name", "busy", "--", "true"])
            .stdin(Stdio::null())
            .spawn()
            .unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while waiters() == 0 && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert_eq!(waiters(), 1, "the waiter queued");
        send(waiter.id(), signal);
        assert_eq!(waiter.wait().unwrap().code(), Some(code), "{signal:?}");
        assert_eq!(
            waiters(),
            0,
            "{signal:?}: the request was withdrawn before the exit"
        );
    }
    send(holder.id(), Signal::Terminate);
    holder.wait().unwrap();
    let next = distlock(
        &url,
        state.path(),
        &["run", "--name", "busy", "--wait", "2s", "--", "true"],
    );
    assert_eq!(
        next.status.code(),
        Some(0),
        "the next run is not kept waiting"
    );
}
