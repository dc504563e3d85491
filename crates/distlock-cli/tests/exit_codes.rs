//! The README's table of exit codes, row by row, as a user meets each code.

use std::path::Path;
use std::process::{Command, Stdio};

/// `distlock` with its state in `state`, no lock URL from the environment, and nothing on
/// its standard input.
fn distlock(state: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_distlock"));
    command
        .env("XDG_STATE_HOME", state)
        .env_remove("DISTLOCK_URL")
        .env_remove("DISTLOCK_URL_FILE")
        .stdin(Stdio::null());
    command
}

/// Each row of the README's exit-code table that needs no server, as a user meets it.
#[test]
fn exit_codes_are_the_documented_ones() {
    let state = tempfile::tempdir().unwrap();
    let not_executable = state.path().join("script.txt");
    std::fs::write(&not_executable, "echo hi\n").unwrap();
    let not_executable = not_executable.display().to_string();
    let directory = format!("sqlite://{}", state.path().display());
    let cases: [(&[&str], i32, &str); 27] = [
        (
            &["run", "--name", "a", "--", "sh", "-c", "exit 7"],
            7,
            "the command's own",
        ),
        (
            &["run", "--name", "a", "--", "sh", "-c", "kill -TERM $$"],
            143,
            "128 + the signal",
        ),
        (
            &["run", "--name", "a", "--", &not_executable],
            126,
            "not executable",
        ),
        (
            &["run", "--name", "a", "--", "/no/such/program"],
            127,
            "not found",
        ),
        (
            &["run", "--name", "a", "--ttl", "abc", "--", "true"],
            64,
            "a bad duration",
        ),
        (
            &["run", "--name", "a", "--wait=-1s", "--", "true"],
            64,
            "a negative duration",
        ),
        (
            &["--url", "sqlite:///", "status"],
            64,
            "a SQLite URL naming no file",
        ),
        (
            &["--url", &directory, "status"],
            64,
            "a SQLite URL naming a directory",
        ),
        (
            &["demo", "--shop", "zk://127.0.0.1:1", "--strategies", "none"],
            64,
            "a shop URL of a scheme that holds no shop",
        ),
        (
            &[
                "demo",
                "--shop",
                "redis://127.0.0.1:1",
                "--strategies",
                "select-for-update",
            ],
            64,
            "a strategy the Redis shop does not have, refused before connecting",
        ),
        (
            &["demo", "--strategies", "lock,atomic-script"],
            64,
            "a Redis strategy on a SQL shop",
        ),
        (
            &["--url", "redis://127.0.0.1:1", "status"],
            69,
            "nothing listening",
        ),
        (
            &[
                "demo",
                "--shop",
                "/no/such/directory/shop.db",
                "--strategies",
                "none",
            ],
            64,
            "a shop in a directory that does not exist",
        ),
        (
            &[
                "--url",
                "redis://127.0.0.1:1",
                "run",
                "--name",
                "",
                "--",
                "true",
            ],
            64,
            "an empty name, refused before the store that is down is asked",
        ),
        (
            &[
                "--url",
                "redis://127.0.0.1:1",
                "run",
                "--name",
                "a",
                "--ttl",
                "1000y",
                "--",
                "true",
            ],
            64,
            "a TTL past the maximum, refused before the store is asked",
        ),
        (
            &["--url", "redis://127.0.0.1:1", "status", "a\tb"],
            64,
            "a name with a control character, refused before the store is asked",
        ),
        (
            &["--url", "memory://", "run", "--name", "a", "--", "true"],
            64,
            "memory:// for run: no other process sees its locks",
        ),
        (
            &["--url", "memory://", "status"],
            64,
            "memory:// for status",
        ),
        (
            &["status"],
            74,
            "output that cannot be written (stdout is /dev/full here)",
        ),
        (&["break", "a"], 64, "break without --yes off a terminal"),
        (
            &[
                "--url",
                "redlock://127.0.0.1:1,127.0.0.1:2,127.0.0.1:3",
                "run",
                "--name",
                "a",
                "--fair",
                "--",
                "true",
            ],
            64,
            "--fair on a RedLock, refused before its masters (down) are asked",
        ),
        (
            &["demo", "--strategies", "segmented", "--segments", "0"],
            64,
            "no segments",
        ),
        (
            &[
                "demo",
                "--stock",
                "3",
                "--strategies",
                "segmented",
                "--segments",
                "4",
            ],
            64,
            "more segments than units",
        ),
        (
            &["break", "a", "--yes"],
            1,
            "break of a free lock breaks nothing",
        ),
        (
            &["--url", "memory://", "break", "a", "--yes"],
            64,
            "memory:// for break",
        ),
        (
            &["run", "--name", "a", "--no-such-flag", "--", "true"],
            2,
            "a syntax error",
        ),
        (&["run", "--help"], 0, "help"),
    ];
    for (args, expected, what) in cases {
        let mut command = distlock(state.path());
        if expected == 74 {
            let full = std::fs::OpenOptions::new().write(true).open("/dev/full");
            command.stdout(full.unwrap());
        }
        let out = command.args(args).output().expect("distlock runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            out.status.code(),
            Some(expected),
            "{what} ({args:?}): {stderr}"
        );
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
}
