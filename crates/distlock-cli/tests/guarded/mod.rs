//! What `distlock run`, `status` and `demo` must do on every backend, checked the
//! same way on each.

use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::Value;

use crate::common::{distlock, json_lines, ok};
use crate::waits::read_when_written;

/// The exit code of a run that did not wait for a held lock.
const BUSY: i32 = 75;

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
