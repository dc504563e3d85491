//! What `distlock run`, `status` and `demo` must do on every networked backend, checked the
//! same way on each.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use distlock_testkit::{Signal, send};

use crate::common::{distlock, json_lines, ok};

/// The exit code of a run that did not wait for a held lock.
const BUSY: i32 = 75;

/// Waits (at most 20 s) until `path` holds a line, and returns it.
pub fn read_when_written(path: &Path) -> String {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        if !text.trim().is_empty() || Instant::now() >= deadline {
            return text.trim().to_owned();
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Two runs in a row get growing fencing tokens; while a third holds `jobs/held`, status
/// shows its process and a run that does not wait exits busy; SIGTERM reaches the held
/// command. Returns the holder as `status --json` showed it.
pub fn runs_guard_commands(url: &str, state: &Path) -> Value {
    let tokens: Vec<u64> = (0..2)
        .map(|_| {
            let run = [
                "run",
                "--name",
                "jobs/x",
                "--",
                "sh",
                "-c",
                "echo $DISTLOCK_FENCING_TOKEN",
            ];
            ok(&distlock(url, state, &run)).trim().parse().unwrap()
        })
        .collect();
    assert!(tokens[0] < tokens[1], "{tokens:?}");

    let started = state.join("started");
    let mut holder = Command::new(env!("CARGO_BIN_EXE_distlock"))
        .env("XDG_STATE_HOME", state)
        .args(["--url", url, "run", "--name", "jobs/held", "--", "sh", "-c"])
        .arg(format!("echo go > {}; exec sleep 30", started.display()))
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    assert_eq!(read_when_written(&started), "go");
    let out = distlock(url, state, &["status", "jobs/held", "--json"]);
    let shown: Value = serde_json::from_str(&ok(&out)).unwrap();
    let held = shown[0]["holders"][0].clone();
    assert_eq!(held["meta"]["pid"], holder.id());
    let busy = distlock(
        url,
        state,
        &["run", "--name", "jobs/held", "--no-wait", "--", "true"],
    );
    assert_eq!(busy.status.code(), Some(BUSY));
    distlock_testkit::send(holder.id(), distlock_testkit::Signal::Terminate);
    assert_eq!(
        holder.wait().unwrap().code(),
        Some(128 + 15),
        "SIGTERM reached the command"
    );
    held
}

/// The demo with and without a lock: the lock sells exactly the stock.
pub fn demo_never_oversells(url: &str, state: &Path) {
    let demo = [
        "demo",
        "--json",
        "--strategies",
        "none,lock",
        "--stock",
        "20",
        "--buyers",
        "60",
        "--workers",
        "3",
    ];
    let rows = json_lines(&ok(&distlock(url, state, &demo)));
    let lock = rows.iter().find(|r| r["strategy"] == "lock").unwrap();
    assert_eq!(lock["oversold"], 0);
    assert_eq!(lock["orders"], 20);
}

/// Ctrl-C (and SIGTERM, SIGHUP) while `distlock run` waits for `busy`: it withdraws its
/// request before it exits with 128 + the signal, so `status` shows no waiter left and the
/// next run, once the holder is gone, is not kept waiting for a session to expire.
pub fn interrupted_waits_leave_no_queue_entry(url: &str, state: &Path) {
    let started = state.join("started");
    let script = format!("echo go > {}; exec sleep 30", started.display());
    let mut holder = spawn(
        url,
        state,
        &["run", "--name", "busy", "--", "sh", "-c", &script],
    );
    assert_eq!(read_when_written(&started), "go");
    let waiters = || {
        let out = distlock(url, state, &["status", "busy", "--json"]);
        let shown: Value = serde_json::from_str(&ok(&out)).unwrap();
        shown[0]["waiters"].as_array().map_or(0, Vec::len)
    };
    for (signal, code) in [
        (Signal::Interrupt, 130),
        (Signal::Terminate, 143),
        (Signal::Hangup, 129),
    ] {
        let mut waiter = spawn(url, state, &["run", "--name", "busy", "--", "true"]);
        let deadline = Instant::now() + Duration::from_secs(10);
        while waiters() == 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert_eq!(waiters(), 1, "the waiter queued");
        send(waiter.0.id(), signal);
        assert_eq!(waiter.0.wait().unwrap().code(), Some(code), "{signal:?}");
        assert_eq!(
            waiters(),
            0,
            "{signal:?}: the request was withdrawn before the exit"
        );
    }
    send(holder.0.id(), Signal::Terminate);
    holder.0.wait().unwrap();
    let next = distlock(
        url,
        state,
        &["run", "--name", "busy", "--wait", "2s", "--", "true"],
    );
    assert_eq!(
        next.status.code(),
        Some(0),
        "the next run is not kept waiting"
    );
}

/// The exit code of a run whose lock was lost.
const LOST: i32 = 76;

/// `distlock run` frozen (SIGSTOP) past its grant's life (a 1 s lease, or a session with a
/// short validity): the store lets the grant go, another run takes the lock with a greater
/// token, and when the first resumes it stops its command and exits with the lost code.
pub fn a_frozen_run_stops_its_command_on_resume(url: &str, state: &Path) {
    let pid_file = state.join("child.pid");
    let script = format!(
        "echo $$ $DISTLOCK_FENCING_TOKEN > {}; exec sleep 60",
        pid_file.display()
    );
    let run = [
        "run", "--name", "frozen", "--ttl", "1s", "--", "sh", "-c", &script,
    ];
    let mut holder = spawn(url, state, &run);
    let written = read_when_written(&pid_file);
    let (child_pid, token) = written.split_once(' ').unwrap();
    let (child_pid, token): (u32, u64) = (child_pid.parse().unwrap(), token.parse().unwrap());

    send(holder.0.id(), Signal::Stop);
    let taker = distlock(
        url,
        state,
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
    send(holder.0.id(), Signal::Continue);

    assert_eq!(holder.0.wait().unwrap().code(), Some(LOST));
    // SAFETY: kill with signal 0 only checks whether the process exists.
    let alive = unsafe { libc::kill(child_pid as libc::pid_t, 0) } == 0;
    assert!(!alive, "the command was stopped when the grant was lost");
}

/// A `distlock` process started in the background, stopped (resumed first, then killed)
/// if the test ends before it exits.
pub struct Running(pub std::process::Child);

impl Drop for Running {
    fn drop(&mut self) {
        if matches!(self.0.try_wait(), Ok(None)) {
            send(self.0.id(), Signal::Continue);
            let _ = self.0.kill();
        }
        let _ = self.0.wait();
    }
}

/// `distlock --url URL ARGS…` started in the background, as [`distlock`] runs it.
pub fn spawn(url: &str, state: &Path, args: &[&str]) -> Running {
    let child = Command::new(env!("CARGO_BIN_EXE_distlock"))
        .env("XDG_STATE_HOME", state)
        .env_remove("DISTLOCK_URL")
        .arg("--url")
        .arg(url)
        .args(args)
        .stdin(Stdio::null())
        .spawn()
        .expect("distlock starts");
    Running(child)
}
