//! The shortest TTL `distlock run` takes on a backend, held there.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

fn run(url: &str, state: &Path, ttl: Duration, command: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_distlock"))
        .env("XDG_STATE_HOME", state)
        .env_remove("DISTLOCK_URL")
        .args(["--url", url, "run", "--name", "min-ttl", "--ttl"])
        .arg(format!("{}ms", ttl.as_millis()))
        .arg("--")
        .args(command)
        .stdin(Stdio::null())
        .output()
        .expect("distlock runs")
}

/// A run at `shortest`, the shortest TTL `run` takes on the backend at `url`, holds its lock
/// for ten times its length (its command ends with 0, nothing lost), and a TTL a
/// millisecond shorter is refused as bad input.
pub fn holds_at_the_minimum_ttl(url: &str, state: &Path, shortest: Duration) {
    let ten_times = format!("{}", (shortest * 10).as_secs_f64());
    let out = run(url, state, shortest, &["sleep", &ten_times]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{url}: {stderr}");
    assert!(!stderr.contains("lost"), "{url}: {stderr}");
    let out = run(url, state, shortest - Duration::from_millis(1), &["true"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(64), "{url}: {stderr}");
    assert!(
        stderr.contains(&format!("shorter than the minimum {shortest:?}")),
        "{url}: {stderr}"
    );
}
