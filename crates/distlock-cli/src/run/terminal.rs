//! The terminal on standard input, handed to the command while it runs.
//!
//! The command runs in a process group of its own, so that a lost lease can stop all of it.
//! A group that is not the terminal's foreground group is stopped (SIGTTIN) when it reads
//! the terminal, and gets no Ctrl-C or Ctrl-Z, so when distlock runs in the foreground of
//! a terminal it makes the command's group the foreground group while the command runs, and
//! takes the terminal back after, as a shell does for a job.

use std::os::fd::RawFd;

/// The terminal distlock runs in the foreground of.
#[derive(Debug, Clone, Copy)]
pub struct Terminal {
    /// Standard input, the terminal.
    fd: RawFd,
    /// distlock's own process group, the foreground group when the run started.
    own_group: libc::pid_t,
}

impl Terminal {
    /// The terminal on standard input, when there is one and distlock's process group is
    /// its foreground group (not a background job). distlock then ignores SIGTTOU, which
    /// would stop it when it hands the terminal over from the background.
    pub fn foreground() -> Option<Terminal> {
        let fd = libc::STDIN_FILENO;
        // SAFETY: isatty, getpgrp and tcgetpgrp only read the process's state.
        let own_group = unsafe {
            if libc::isatty(fd) != 1 {
                return None;
            }
            let own_group = libc::getpgrp();
            if libc::tcgetpgrp(fd) != own_group {
                return None;
            }
            own_group
        };
        // SAFETY: setting a signal's disposition to ignore has no memory-safety
        // preconditions; the command's start sets it back to the default for the command.
        unsafe {
            libc::signal(libc::SIGTTOU, libc::SIG_IGN);
        }
        Some(Terminal { fd, own_group })
    }

    /// Makes `group` the foreground group, if distlock's own group still is (a run
    /// continued in the background by `bg` leaves the terminal to the shell).
    ///
    /// Async-signal-safe: the command calls it between fork and exec too.
    pub fn give_to(&self, group: libc::pid_t) {
        // SAFETY: tcgetpgrp and tcsetpgrp are async-signal-safe system calls on a file
        // descriptor this process holds.
        unsafe {
            if libc::tcgetpgrp(self.fd) == self.own_group {
                libc::tcsetpgrp(self.fd, group);
            }
        }
    }

    /// Makes distlock's group the foreground group again, if `group` has it.
    pub fn take_back(&self, group: libc::pid_t) {
        // SAFETY: as in `give_to`.
        unsafe {
            if libc::tcgetpgrp(self.fd) == group {
                libc::tcsetpgrp(self.fd, self.own_group);
            }
        }
    }
}
