//! Signals the fault tests send to processes.

/// A signal a test sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    /// SIGKILL: die now, no cleanup.
    Kill,
    /// SIGSTOP: freeze (a long GC pause, a stalled VM).
    Stop,
    /// SIGCONT: thaw after SIGSTOP.
    Continue,
    /// SIGTERM: please exit.
    Terminate,
    /// SIGINT: Ctrl-C in a terminal.
    Interrupt,
    /// SIGHUP: the terminal closed.
    Hangup,
}

/// Sends `signal` to process `pid`; a process that is already gone is not an error.
///
/// # Examples
///
/// ```
/// let mut child = std::process::Command::new("sleep").arg("5").spawn().unwrap();
/// distlock_servers::send(child.id(), distlock_servers::Signal::Kill);
/// assert!(!child.wait().unwrap().success());
/// ```
pub fn send(pid: u32, signal: Signal) {
    let number = match signal {
        Signal::Kill => libc::SIGKILL,
        Signal::Stop => libc::SIGSTOP,
        Signal::Continue => libc::SIGCONT,
        Signal::Terminate => libc::SIGTERM,
        Signal::Interrupt => libc::SIGINT,
        Signal::Hangup => libc::SIGHUP,
    };
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return;
    };
    // SAFETY: kill(2) has no memory-safety preconditions.
    unsafe {
        libc::kill(pid, number);
    }
}
