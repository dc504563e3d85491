//! The worker processes as the coordinator sees them: their state, the signals it sends
//! them, and the faults it records.

use distlock_check::history::What;

/// What became of a worker.
pub enum State {
    /// Running.
    Running,
    /// Stopped by SIGSTOP (its own, at a step).
    Stopped,
    /// Killed (by itself, at a step).
    Killed,
    /// Ended otherwise: the run is over for it.
    Ended,
}

/// A fault the coordinator did.
pub fn fault(fault: &str) -> What {
    What::Fault {
        fault: fault.into(),
        step: None,
    }
}

/// Whether process `pid` is stopped (by SIGSTOP): its state, the field after its
/// command's name (in parentheses) in `/proc/<pid>/stat`, is `T`.
pub fn stopped(pid: u32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    stat.rsplit_once(") ")
        .and_then(|(_, rest)| rest.chars().next())
        == Some('T')
}

/// Sends `signal` to the worker process `pid`.
pub fn signal(pid: u32, signal: i32) {
    // SAFETY: kill(2) on a child of ours that has not been reaped.
    unsafe { libc::kill(pid as i32, signal) };
}
