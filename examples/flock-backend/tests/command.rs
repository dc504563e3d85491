//! The whole `distlock` command on the flock backend, from `distlock_cli::main_with`: a
//! command guarded by a lock, the lock's status while a holder has it, and a torture run
//! of worker processes (each started from the same binary, so each knows `flock://`)
//! whose history the checker finds clean.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// `distlock-flock --url flock://DIR ARGS…` run to its end, its state in `dir` too.
fn distlock_flock(dir: &Path, args: &[&str]) -> Output {
    command(dir, args).output().expect("distlock-flock runs")
}

fn command(dir: &Path, args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_distlock-flock"));
    command
        .env("XDG_STATE_HOME", dir.join("state"))
        .env_remove("DISTLOCK_URL")
        .env_remove("DISTLOCK_URL_FILE")
        .arg("--url")
        .arg(format!("flock://{}", dir.join("locks").display()))
        .args(args)
        .stdin(Stdio::null());
    command
}

fn stdout_of(out: &Output) -> String {
    assert!(
        out.status.success(),
        "distlock-flock failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn run_guards_a_command_and_status_names_its_holder() {
    let dir = tempfile::tempdir().unwrap();
    let out = distlock_flock(dir.path(), &["run", "--name", "nightly", "--", "true"]);
    stdout_of(&out);
    let mut holder = command(
        dir.path(),
        &["run", "--name", "nightly", "--", "sleep", "30"],
    )
    .stdout(Stdio::null())
    .stderr(Stdio::null())
    .spawn()
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let holders = loop {
        let out = distlock_flock(dir.path(), &["status", "nightly", "--json"]);
        let status: serde_json::Value = serde_json::from_str(&stdout_of(&out)).unwrap();
        let holders = status[0]["holders"].as_array().cloned().unwrap_or_default();
        if !holders.is_empty() || Instant::now() > deadline {
            break holders;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let busy = distlock_flock(
        dir.path(),
        &["run", "--name", "nightly", "--no-wait", "--", "true"],
    );
    holder.kill().unwrap();
    holder.wait().unwrap();
    assert_eq!(holders.len(), 1, "the holder is not listed within 10 s");
    assert_eq!(holders[0]["kind"], "mutex", "{holders:?}");
    assert_eq!(busy.status.code(), Some(75), "{busy:?}");
}

#[test]
fn torture_of_the_flock_backend_is_clean() {
    let dir = tempfile::tempdir().unwrap();
    let history = dir.path().join("history.jsonl");
    let out = distlock_flock(
        dir.path(),
        &[
            "torture",
            "--json",
            "--seed",
            "7",
            "--workers",
            "3",
            "--duration",
            "6s",
            "--history",
            history.to_str().unwrap(),
        ],
    );
    // The verdict first: an unclean run fails too, and its violations say why.
    let stdout = String::from_utf8_lossy(&out.stdout);
    let Some(last) = stdout.lines().last() else {
        panic!("no verdict: {}", String::from_utf8_lossy(&out.stderr));
    };
    let verdict: serde_json::Value = serde_json::from_str(last).unwrap();
    assert_eq!(verdict["clean"], true, "violations: {verdict:#}");
    stdout_of(&out);
    let stats = &verdict["stats"];
    assert!(stats["faults"].as_u64().unwrap() >= 2, "{stats}");
    // Waiters in other processes poll (the backend has no queue), so a releasing holder
    // often takes the lock straight back: it changes hands for sure when a fault takes it
    // from its holder.
    assert!(stats["transfers"].as_u64().unwrap() >= 2, "{stats}");
    let lines = std::fs::read_to_string(history).unwrap();
    assert!(
        lines.contains("\"fault\":\"kill\""),
        "no worker was killed (at random or at a step of its lock)"
    );
}

#[test]
fn a_url_that_names_no_usable_directory_is_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a-file");
    std::fs::write(&file, "").unwrap();
    let under_a_file = format!("flock://{}/locks", file.display());
    for url in ["flock://", "flock:///", under_a_file.as_str()] {
        let out = Command::new(env!("CARGO_BIN_EXE_distlock-flock"))
            .env("XDG_STATE_HOME", dir.path().join("state"))
            .env_remove("DISTLOCK_URL")
            .args(["--url", url, "run", "--name", "a", "--", "true"])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(64), "{url}: {stderr}");
        assert!(stderr.contains("invalid_input"), "{url}: {stderr}");
    }
}
