//! Every subcommand with its output closed (`| head -1`, whose reader is gone before the
//! first line) or full (`> /dev/full`): no panic, the clean-up it owes done, and the exit
//! code the run earned, or 74 where only the output failed.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The exit code of a run that succeeded but could not write all its output.
const IO_ERROR: i32 = 74;
const BUSY: i32 = 75;

/// Where a subcommand's output goes.
#[derive(Debug, Clone, Copy)]
enum Sink {
    /// A pipe whose reading end is closed before the command starts.
    ClosedPipe,
    /// `/dev/full`: every write fails with ENOSPC.
    Full,
}

impl Sink {
    fn stdio(self) -> Stdio {
        match self {
            Sink::ClosedPipe => {
                use std::os::fd::{FromRawFd, OwnedFd};
                let mut ends = [0; 2];
                // SAFETY: pipe(2) writes two descriptors into the array it is given.
                assert_eq!(unsafe { libc::pipe(ends.as_mut_ptr()) }, 0, "a pipe");
                // SAFETY: both descriptors were just made and are owned here alone.
                let (reader, writer) =
                    unsafe { (OwnedFd::from_raw_fd(ends[0]), OwnedFd::from_raw_fd(ends[1])) };
                drop(reader);
                writer.into()
            }
            Sink::Full => std::fs::OpenOptions::new()
                .write(true)
                .open("/dev/full")
                .expect("/dev/full opens")
                .into(),
        }
    }
}

const SINKS: [Sink; 2] = [Sink::ClosedPipe, Sink::Full];

fn distlock(state: &Path, args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_distlock"));
    command
        .env("XDG_STATE_HOME", state)
        .env_remove("DISTLOCK_URL")
        .env_remove("DISTLOCK_URL_FILE")
        .args(args)
        .stdin(Stdio::null());
    command
}

/// Runs `args` with standard output sent to `sink`, standard error kept for the message.
fn with_stdout(state: &Path, args: &[&str], sink: Sink) -> Output {
    distlock(state, args)
        .stdout(sink.stdio())
        .stderr(Stdio::piped())
        .output()
        .expect("distlock runs")
}

/// Runs `args` with standard output and standard error both sent to `sink`.
fn with_both(state: &Path, args: &[&str], sink: Sink) -> Output {
    distlock(state, args)
        .env("DISTLOCK_LOG", "debug")
        .stdout(sink.stdio())
        .stderr(sink.stdio())
        .output()
        .expect("distlock runs")
}

/// Runs `args` with stdout to `sink`, then with stdout and stderr both there: each time the
/// run goes to its end and exits 74, as only its output failed.
fn assert_output_lost(state: &Path, args: &[&str], sink: Sink) {
    let out = with_stdout(state, args, sink);
    assert_code(&out, IO_ERROR, &format!("{args:?}, stdout to {sink:?}"));
    let out = with_both(state, args, sink);
    assert_code(
        &out,
        IO_ERROR,
        &format!("{args:?}, stdout and stderr to {sink:?}"),
    );
}

fn assert_no_panic(out: &Output, what: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{what}: {stderr}");
    assert_ne!(out.status.code(), Some(101), "{what}: {stderr}");
}

fn assert_code(out: &Output, code: i32, what: &str) {
    assert_no_panic(out, what);
    assert_eq!(
        out.status.code(),
        Some(code),
        "{what}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn status_to_a_closed_or_full_stdout_exits_74() {
    let state = tempfile::tempdir().unwrap();
    for sink in SINKS {
        for args in [&["status"][..], &["status", "--json"], &["status", "a/b"]] {
            assert_output_lost(state.path(), args, sink);
        }
    }
}

/// `break` breaks what it showed even when the showing could not be written: 74 (output
/// lost) once it broke a grant, 1 when there was nothing to break.
#[test]
fn break_to_a_closed_or_full_stdout_still_breaks() {
    let state = tempfile::tempdir().unwrap();
    for sink in SINKS {
        let started = state.path().join("started");
        let _ = std::fs::remove_file(&started);
        let mut holder = distlock(state.path(), &["run", "--name", "b", "--", "sh", "-c"])
            .arg(format!("echo go > {}; exec sleep 30", started.display()))
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        while !started.exists() {
            assert!(Instant::now() < deadline, "the holder starts");
            std::thread::sleep(Duration::from_millis(20));
        }
        let out = with_stdout(state.path(), &["break", "b", "--yes"], sink);
        assert_code(&out, IO_ERROR, &format!("break, stdout to {sink:?}"));
        let _ = holder.kill();
        let _ = holder.wait();
        let out = with_stdout(state.path(), &["break", "b", "--yes"], sink);
        assert_code(&out, 1, &format!("nothing to break, stdout to {sink:?}"));
    }
}

#[test]
fn a_demo_that_cannot_print_still_sells_and_removes_its_shop() {
    for sink in SINKS {
        let state = tempfile::tempdir().unwrap();
        let args = [
            "demo",
            "--stock",
            "5",
            "--buyers",
            "10",
            "--workers",
            "2",
            "--strategies",
            "none,lock",
        ];
        let out = with_stdout(state.path(), &args, sink);
        assert_code(&out, IO_ERROR, &format!("demo to {sink:?}"));
        assert!(
            !state.path().join("distlock/shop.db").exists(),
            "demo to {sink:?}: its shop is removed"
        );
        let out = with_both(state.path(), &args, sink);
        assert_code(
            &out,
            IO_ERROR,
            &format!("demo, stdout and stderr to {sink:?}"),
        );
        assert!(!state.path().join("distlock/shop.db").exists());
    }
}

#[test]
fn bench_to_a_closed_or_full_stdout_exits_74() {
    let state = tempfile::tempdir().unwrap();
    for sink in SINKS {
        for json in [false, true] {
            let mut args = vec!["--url", "memory://", "bench", "--duration", "10ms"];
            if json {
                args.push("--json");
            }
            assert_output_lost(state.path(), &args, sink);
        }
    }
}

#[test]
fn torture_to_a_closed_or_full_stdout_checks_its_history_and_exits_74() {
    for sink in SINKS {
        let state = tempfile::tempdir().unwrap();
        let args = [
            "torture",
            "--workers",
            "2",
            "--duration",
            "1s",
            "--faults",
            "none",
            "--ttl",
            "3s",
        ];
        assert_output_lost(state.path(), &args, sink);
        let runs = state.path().join("distlock/torture");
        let report = std::fs::read_dir(&runs)
            .expect("the run has its directory")
            .flatten()
            .any(|run| run.path().join("report.html").is_file());
        assert!(report, "torture to {sink:?} wrote its report all the same");
    }
}

/// `distlock run --no-wait … 2>&1 | true` on a busy lock: busy, whatever became of the
/// message that says so; and a command that ran keeps its own exit code.
#[test]
fn run_keeps_its_exit_codes_when_its_messages_cannot_be_written() {
    let state = tempfile::tempdir().unwrap();
    let marker = state.path().join("started");
    let mut holder = distlock(state.path(), &["run", "--name", "x", "--", "sh", "-c"])
        .arg(format!("touch {}; sleep 30", marker.display()))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while !marker.exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(marker.exists(), "the holder's command started");
    for sink in SINKS {
        let out = distlock(
            state.path(),
            &["run", "--name", "x", "--no-wait", "--", "true"],
        )
        .stdout(sink.stdio())
        .stderr(sink.stdio())
        .output()
        .expect("distlock runs");
        assert_eq!(out.status.code(), Some(BUSY), "busy, output to {sink:?}");
        let out = distlock(
            state.path(),
            &["run", "--name", "y", "--", "sh", "-c", "exit 3"],
        )
        .stdout(sink.stdio())
        .stderr(sink.stdio())
        .output()
        .expect("distlock runs");
        assert_eq!(
            out.status.code(),
            Some(3),
            "the command's code, output to {sink:?}"
        );
        let out = distlock(state.path(), &["run", "--name", "y", "--", "true"])
            .stdout(sink.stdio())
            .stderr(sink.stdio())
            .output()
            .expect("distlock runs");
        assert_eq!(
            out.status.code(),
            Some(0),
            "run writes no output of its own"
        );
    }
    // SAFETY: kill(2) has no memory-safety preconditions.
    unsafe { libc::kill(holder.id() as libc::pid_t, libc::SIGTERM) };
    holder.wait().unwrap();
}

/// Errors and logs to a closed or full stderr: the exit code of the error, no panic.
#[test]
fn errors_to_a_closed_or_full_stderr_keep_their_codes() {
    let state = tempfile::tempdir().unwrap();
    for sink in SINKS {
        for (args, code) in [
            (&["--url", "bogus://x", "status"][..], 64),
            (&["--url", "redis://127.0.0.1:1", "status"], 69),
            (&["run", "--name", "", "--", "true"], 64),
        ] {
            let out = distlock(state.path(), args)
                .env("DISTLOCK_LOG", "debug")
                .stdout(Stdio::null())
                .stderr(sink.stdio())
                .output()
                .expect("distlock runs");
            assert_eq!(
                out.status.code(),
                Some(code),
                "{args:?}, stderr to {sink:?}"
            );
        }
    }
}

/// `--help` that cannot be printed is output lost (74); a usage error keeps its code (2).
#[test]
fn help_to_a_full_stdout_exits_74() {
    let state = tempfile::tempdir().unwrap();
    let out = with_stdout(state.path(), &["--help"], Sink::Full);
    assert_code(&out, IO_ERROR, "--help to /dev/full");
    let out = with_both(state.path(), &["--no-such-flag"], Sink::Full);
    assert_code(&out, 2, "a usage error to /dev/full");
}
