//! `distlock run` interrupted while it waits, checked the same way on every backend, and
//! the helpers that start runs in the background.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;

use distlock_testkit::{Signal, send};

use crate::common::{command, distlock, ok};

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

/// Ctrl-C (and SIGTERM, SIGHUP) while `distlock run` waits for `busy`: it withdraws its
/// request before it exits with 128 + the signal, so `status` shows no waiter left and the
/// next run, once the holder is gone, is not kept waiting for a session to expire.
pub fn interrupted_waits_leave_no_queue_entry(url: &str, state: &Path) {
    interrupted_waits_with_flags_leave_no_queue_entry(url, state, &[]);
}

/// [`interrupted_waits_leave_no_queue_entry`] for runs with `flags` (`--fair`).
pub fn interrupted_waits_with_flags_leave_no_queue_entry(url: &str, state: &Path, flags: &[&str]) {
    let run = |command: &[&'static str]| {
        let mut args = vec!["run"];
        args.extend_from_slice(flags);
        args.extend_from_slice(&["--name", "busy", "--"]);
        args.extend_from_slice(command);
        args
    };
    let started = state.join("started");
    let script = format!("echo go > {}; exec sleep 30", started.display());
    let mut holder_args = run(&["sh", "-c"]);
    holder_args.push(&script);
    let mut holder = spawn(url, state, &holder_args);
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
        let mut waiter = spawn(url, state, &run(&["true"]));
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
    let child = command(url, state, args).spawn().expect("distlock starts");
    Running(child)
}
