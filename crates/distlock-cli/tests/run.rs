//! `distlock run` as users drive it: from the shell, against the SQLite default.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use distlock_testkit::{Signal, send};

mod min_ttl;

const BUSY: i32 = 75;
const LOST: i32 = 76;

fn distlock(state: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_distlock"));
    command
        .env("XDG_STATE_HOME", state)
        .env_remove("DISTLOCK_URL")
        .env_remove("DISTLOCK_URL_FILE")
        .stdin(Stdio::null());
    command
}

fn output(command: &mut Command) -> Output {
    command.output().expect("distlock runs")
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn child_gets_name_and_growing_tokens_and_its_exit_code_is_kept() {
    let state = tempfile::tempdir().unwrap();
    let mut tokens = Vec::new();
    for _ in 0..3 {
        let out = output(distlock(state.path()).args([
            "run",
            "--name",
            "jobs/nightly",
            "--",
            "sh",
            "-c",
            "echo $DISTLOCK_NAME $DISTLOCK_FENCING_TOKEN; exit 7",
        ]));
        assert_eq!(out.status.code(), Some(7), "{out:?}");
        let text = stdout(&out);
        let mut words = text.split_whitespace();
        assert_eq!(words.next(), Some("jobs/nightly"));
        tokens.push(words.next().unwrap().parse::<u64>().unwrap());
    }
    assert!(tokens.windows(2).all(|w| w[0] < w[1]), "{tokens:?}");
    assert!(
        state.path().join("distlock/locks.db").is_file(),
        "the default SQLite file is created in the state directory"
    );
}

#[test]
fn no_wait_on_a_held_lock_exits_at_once_with_the_busy_code() {
    let state = tempfile::tempdir().unwrap();
    let marker = state.path().join("started");
    let mut holder = distlock(state.path())
        .args(["run", "--name", "x", "--", "sh", "-c"])
        .arg(format!("touch {}; sleep 5", marker.display()))
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while !marker.exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(marker.exists(), "the holder's command started");
    let started = Instant::now();
    let out =
        output(distlock(state.path()).args(["run", "--name", "x", "--no-wait", "--", "true"]));
    assert_eq!(out.status.code(), Some(BUSY));
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "--no-wait does not wait"
    );
    let out = output(
        distlock(state.path()).args(["run", "--name", "x", "--wait", "200ms", "--", "true"]),
    );
    assert_eq!(
        out.status.code(),
        Some(BUSY),
        "a timed-out wait is busy too"
    );
    send(holder.id(), Signal::Terminate);
    let status = holder.wait().unwrap();
    assert_eq!(
        status.code(),
        Some(128 + 15),
        "SIGTERM is forwarded to the command"
    );
}

#[test]
fn two_shell_loops_never_overlap() {
    let state = tempfile::tempdir().unwrap();
    let inside = state.path().join("inside");
    let log = state.path().join("log");
    let section = format!(
        "mkdir {inside} || echo OVERLAP >> {log}; sleep 0.02; echo $DISTLOCK_FENCING_TOKEN >> {log}; rmdir {inside}",
        inside = inside.display(),
        log = log.display()
    );
    let script = format!(
        "for i in 1 2 3 4 5 6 7 8; do \"$0\" run --name loop -- sh -c '{section}' || exit 1; done"
    );
    let loops: Vec<_> = (0..2)
        .map(|_| {
            Command::new("sh")
                .env("XDG_STATE_HOME", state.path())
                .args(["-c", &script, env!("CARGO_BIN_EXE_distlock")])
                .spawn()
                .unwrap()
        })
        .collect();
    for mut child in loops {
        assert!(child.wait().unwrap().success());
    }
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        !text.contains("OVERLAP"),
        "two commands ran at once:\n{text}"
    );
    let tokens: Vec<u64> = text.lines().map(|l| l.trim().parse().unwrap()).collect();
    assert_eq!(tokens.len(), 16);
    assert!(
        tokens.windows(2).all(|w| w[0] < w[1]),
        "tokens in run order grow: {tokens:?}"
    );
}

#[test]
fn a_lost_lease_stops_the_command_and_exits_with_the_lost_code() {
    // A grace period too long to add to any instant is no limit, not a crash.
    for kill_grace in ["1s", "300000000000y"] {
        lose_the_lease_of_a_command(kill_grace);
    }
}

/// Runs a command under a lock, takes the lock over while `distlock run` is stopped, and
/// checks that the command was stopped and the lost code returned.
fn lose_the_lease_of_a_command(kill_grace: &str) {
    let state = tempfile::tempdir().unwrap();
    let pid_file = state.path().join("child.pid");
    let mut holder = distlock(state.path())
        .args([
            "run",
            "--name",
            "lost",
            "--ttl",
            "3s",
            "--kill-grace",
            kill_grace,
            "--",
            "sh",
            "-c",
        ])
        .arg(format!("echo $$ > {}; exec sleep 60", pid_file.display()))
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::fs::read_to_string(&pid_file).map_or(true, |s| s.trim().is_empty())
        && Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(20));
    }
    let child_pid: u32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();

    send(holder.id(), Signal::Stop);
    let taker = output(distlock(state.path()).args([
        "run",
        "--name",
        "lost",
        "--wait",
        "10s",
        "--",
        "sh",
        "-c",
        "echo $DISTLOCK_FENCING_TOKEN",
    ]));
    assert_eq!(
        taker.status.code(),
        Some(0),
        "another run takes over: {taker:?}"
    );
    send(holder.id(), Signal::Continue);

    let status = holder.wait().unwrap();
    assert_eq!(status.code(), Some(LOST), "--kill-grace {kill_grace}");
    // SAFETY: kill with signal 0 only checks whether the process exists.
    let alive = unsafe { libc::kill(child_pid as libc::pid_t, 0) } == 0;
    assert!(!alive, "the command was stopped when the lease was lost");
}

#[test]
fn bad_input_gets_a_clear_error_and_a_usage_code() {
    let state = tempfile::tempdir().unwrap();
    let out = output(distlock(state.path()).args(["--url", "bogus://x", "status"]));
    assert_eq!(out.status.code(), Some(64));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no backend for URL scheme `bogus`"));
    let out = output(distlock(state.path()).args(["run", "--name", "", "--", "true"]));
    assert_eq!(out.status.code(), Some(64));
    let out = output(distlock(state.path()).args(["run", "--name", "a", "--", "/no/such/program"]));
    assert_eq!(out.status.code(), Some(127));
}

#[test]
fn durations_too_long_for_any_clock_are_no_limit_or_refused_never_a_crash() {
    let state = tempfile::tempdir().unwrap();
    let huge = "300000000000y";
    for (flag, expected) in [("--wait", 0), ("--kill-grace", 0), ("--ttl", 64)] {
        let out = output(
            distlock(state.path()).args(["run", "--name", "huge", flag, huge, "--", "true"]),
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(expected), "{flag} {huge}: {stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
    let out = output(
        distlock(state.path()).args(["run", "--name", "tiny", "--ttl", "1ns", "--", "true"]),
    );
    assert_eq!(out.status.code(), Some(64));
    assert!(String::from_utf8_lossy(&out.stderr).contains("shorter than the minimum"));
}

/// `DISTLOCK_URL=` (set, but empty) is the same as not set: the SQLite default.
#[test]
fn an_empty_distlock_url_counts_as_unset() {
    let state = tempfile::tempdir().unwrap();
    let out = output(
        distlock(state.path())
            .env("DISTLOCK_URL", "")
            .args(["run", "--name", "x", "--", "true"]),
    );
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(state.path().join("distlock/locks.db").is_file());
}

/// Logs carry no colour codes when stderr is not a terminal (a file, a pipe, a journal).
#[test]
fn logs_to_a_pipe_have_no_colour_codes() {
    let state = tempfile::tempdir().unwrap();
    let out = output(
        distlock(state.path())
            .env("DISTLOCK_LOG", "debug")
            .args(["run", "--name", "x", "--", "true"]),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("DEBUG"),
        "DISTLOCK_LOG=debug logs: {stderr}"
    );
    assert!(!stderr.contains('\u{1b}'), "no escape codes: {stderr:?}");
    let help = output(distlock(state.path()).arg("--help"));
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(
        help.contains("DISTLOCK_LOG"),
        "--help tells of DISTLOCK_LOG: {help}"
    );
}

/// A typo in a URL parameter (`min_replica` for `min_replicas`) is refused on every
/// backend, naming the parameter and without the password, before any connection: it is
/// never silently dropped.
#[test]
fn unknown_url_parameters_are_refused_on_every_backend() {
    let state = tempfile::tempdir().unwrap();
    let db = state.path().join("locks.db").display().to_string();
    // Each with a misspelled parameter, and the right spelling the refusal must list.
    let urls = [
        (
            "redis://:pw-123@127.0.0.1:1/0?min_replica=1".to_owned(),
            "min_replicas",
        ),
        (
            "rediss://:pw-123@127.0.0.1:1/0?tls_cert=x".to_owned(),
            "tls_ca",
        ),
        (
            "redis+cluster://:pw-123@127.0.0.1:1?hosts=127.0.0.1:1&conections=2".to_owned(),
            "connections",
        ),
        (
            "redlock://:pw-123@127.0.0.1:1,127.0.0.1:2,127.0.0.1:3/0?prefx=a".to_owned(),
            "prefix",
        ),
        (
            "postgres://app:pw-123@127.0.0.1:1/app?min_pool=2".to_owned(),
            "pool",
        ),
        (
            "mysql://app:pw-123@127.0.0.1:1/app?ssl_mode=REQUIRED".to_owned(),
            "ssl-mode",
        ),
        (
            "mariadb://app:pw-123@127.0.0.1:1/app?mod=lease".to_owned(),
            "mode",
        ),
        (format!("sqlite://{db}?busy=1s"), "busy_timeout"),
        (
            "zk://app:pw-123@127.0.0.1:1/base?session=1s".to_owned(),
            "session_timeout",
        ),
        (
            "zks://app:pw-123@127.0.0.1:1/base?ca=x".to_owned(),
            "tls_ca",
        ),
        (
            "etcd://app:pw-123@127.0.0.1:1/base?ttl=1s".to_owned(),
            "session_ttl",
        ),
        ("memory://?livenes=session".to_owned(), "liveness"),
    ];
    for (url, right) in urls {
        let out = output(distlock(state.path()).args(["--url", &url, "status"]));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(64), "{url}: {stderr}");
        assert!(stderr.contains("unknown"), "{url}: {stderr}");
        let known = stderr.split_once("known: ").map_or("", |(_, known)| known);
        assert!(
            known.split([',', ' ', '(', ')']).any(|word| word == right),
            "{url}: the valid ones are listed, {right} among them: {stderr}"
        );
        assert!(!stderr.contains("pw-123"), "{url}: {stderr}");
    }
}

/// A run at the shortest TTL it takes on SQLite (3 s: each renewal flushes to disk) holds
/// its lock for ten times its length, and a shorter one is refused.
#[test]
fn a_run_at_the_minimum_ttl_holds_its_lock() {
    let state = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", state.path().join("locks.db").display());
    min_ttl::holds_at_the_minimum_ttl(&url, state.path(), Duration::from_secs(3));
}

/// `--url-file` and `DISTLOCK_URL_FILE`: read once, one URL on one line, a file others can
/// read warned about, every mistake a clear usage error.
#[test]
fn a_url_file_is_read_checked_and_warned_about() {
    use std::os::unix::fs::PermissionsExt;
    let state = tempfile::tempdir().unwrap();
    let locks = format!("sqlite://{}", state.path().join("file-locks.db").display());
    let private = state.path().join("private");
    std::fs::write(&private, format!("  {locks}\n")).unwrap();
    std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o600)).unwrap();
    let shared = state.path().join("shared");
    std::fs::write(&shared, &locks).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o644)).unwrap();
    let empty = state.path().join("empty");
    std::fs::write(&empty, "\n").unwrap();
    let two = state.path().join("two-lines");
    std::fs::write(&two, format!("{locks}\n{locks}\n")).unwrap();
    let missing = state.path().join("missing");
    let path = |p: &Path| p.display().to_string();

    let out = output(distlock(state.path()).args(["--url-file", &path(&private), "status"]));
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("warning"),
        "{out:?}"
    );
    assert!(
        state.path().join("file-locks.db").is_file(),
        "the file's URL was used"
    );

    // A nested distlock finds the same store through the file alone (it refuses both).
    let nested = format!(
        "echo url=${{DISTLOCK_URL-unset}}; \"{}\" status",
        env!("CARGO_BIN_EXE_distlock")
    );
    let out = output(distlock(state.path()).args([
        "--url-file",
        &path(&private),
        "run",
        "--name",
        "nested",
        "--",
        "sh",
        "-c",
        &nested,
    ]));
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let shown = stdout(&out);
    assert!(
        shown.contains("url=unset") && shown.contains("nested  (last"),
        "{shown}"
    );

    let out = output(
        distlock(state.path())
            .env("DISTLOCK_URL_FILE", &shared)
            .arg("status"),
    );
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("chmod 600") && stderr.contains("644"),
        "{stderr}"
    );

    for (file, says) in [
        (&empty, "one lock URL on one line"),
        (&two, "one lock URL on one line"),
        (&missing, "cannot read"),
        (&state.path().to_path_buf(), "not a file"),
    ] {
        let out = output(distlock(state.path()).args(["--url-file", &path(file), "status"]));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(64), "{file:?}: {stderr}");
        assert!(stderr.contains(says), "{file:?}: {stderr}");
    }
    let out = output(
        distlock(state.path())
            .env("DISTLOCK_URL", &locks)
            .env("DISTLOCK_URL_FILE", &private)
            .arg("status"),
    );
    assert_eq!(out.status.code(), Some(64), "{out:?}");
    let out = output(distlock(state.path()).args([
        "--url",
        &locks,
        "--url-file",
        &path(&private),
        "status",
    ]));
    assert_eq!(
        out.status.code(),
        Some(2),
        "--url and --url-file conflict: {out:?}"
    );
}
