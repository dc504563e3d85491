//! Running the `distlock` binary from the command tests.

use std::path::Path;
use std::process::{Command, Output, Stdio};

/// The command `distlock --url URL ARGS…`, its state directory in `state`, no
/// `DISTLOCK_URL`, and nothing on its standard input.
pub fn command(url: &str, state: &Path, args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_distlock"));
    command
        .env("XDG_STATE_HOME", state)
        .env_remove("DISTLOCK_URL")
        .env_remove("DISTLOCK_URL_FILE")
        .arg("--url")
        .arg(url)
        .args(args)
        .stdin(Stdio::null());
    command
}

/// `distlock --url URL ARGS…` run to its end (see [`command`]).
pub fn distlock(url: &str, state: &Path, args: &[&str]) -> Output {
    command(url, state, args).output().expect("distlock runs")
}

/// The standard output of a run that must have succeeded.
pub fn ok(out: &Output) -> String {
    assert!(
        out.status.success(),
        "distlock failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Output of `--json` commands that print one object per line.
pub fn json_lines(text: &str) -> Vec<serde_json::Value> {
    text.lines()
        .map(|l| serde_json::from_str(l).expect("one JSON object per line"))
        .collect()
}
