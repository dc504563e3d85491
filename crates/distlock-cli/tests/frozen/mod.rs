//! `distlock run` frozen past its grant's life, checked the same way on every backend whose
//! grants a frozen holder loses.

use std::path::Path;

use distlock_testkit::{Signal, send};

use crate::common::{distlock, ok};
use crate::waits::{read_when_written, spawn};

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
