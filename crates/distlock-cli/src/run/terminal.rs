//! The controlling terminal, handed to the command while it runs.
//!
//! The command runs in a process group of its own, so that a lost lease can stop all of it.
//! A group that is not the terminal's foreground group is stopped (SIGTTIN) when it reads
//! the terminal, and gets no Ctrl-C or Ctrl-Z. So when distlock is a shell's job (it leads
//! its process group) and that job is in the foreground, distlock makes the command's group
//! the foreground group while the command runs, and takes the terminal back after, as a
//! shell does for a job. Run from a script, distlock is one process of the script's job: the
//! terminal stays with that job, and Ctrl-C and Ctrl-Z reach the script as they always did.

use std::os::fd::{IntoRawFd, RawFd};

/// The controlling terminal of a distlock that is a shell's job.
#[derive(Debug, Clone, Copy)]
pub struct Terminal {
    /// The controlling terminal (`/dev/tty`), open for the whole run.
    fd: RawFd,
    /// distlock's own process group: its job.
    own_group: libc::pid_t,
    /// Whether SIGTTOU was ignored when distlock started (the command inherits that).
    ttou_ignored: bool,
}

impl Terminal {
    /// The controlling terminal, when distlock has one and leads its own process group (a
    /// job of an interactive shell, in the foreground or not). distlock then ignores
    /// SIGTTOU, which would stop it when it hands the terminal over from the background.
    pub fn of_this_job() -> Option<Terminal> {
        // SAFETY: getpgrp and getpid only read the process's state.
        let own_group = unsafe { libc::getpgrp() };
        if own_group != unsafe { libc::getpid() } {
            return None;
        }
        let fd = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/tty")
            .ok()?
            .into_raw_fd();
        // SAFETY: setting a disposition and reading the previous one has no memory-safety
        // preconditions; the command's start restores the previous one for the command.
        let before = unsafe { libc::signal(libc::SIGTTOU, libc::SIG_IGN) };
        Some(Terminal {
            fd,
            own_group,
            ttou_ignored: before == libc::SIG_IGN,
        })
    }

    /// Makes `group` the foreground group, if distlock's own group is (a run in the
    /// background, or continued there by `bg`, leaves the terminal to the shell).
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

    /// Makes distlock's group the foreground group again if the group that has it has no
    /// process left (a command whose exec failed after it took the terminal).
    pub fn reclaim(&self) {
        // SAFETY: as in `give_to`; killpg with signal 0 only checks the group exists.
        unsafe {
            let holder = libc::tcgetpgrp(self.fd);
            if holder > 0 && holder != self.own_group && libc::killpg(holder, 0) != 0 {
                libc::tcsetpgrp(self.fd, self.own_group);
            }
        }
    }

    /// Gives the command (between fork and exec) the SIGTTOU disposition distlock had.
    ///
    /// Async-signal-safe.
    pub fn restore_ttou(&self) {
        if !self.ttou_ignored {
            // SAFETY: signal(2) is async-signal-safe.
            unsafe {
                libc::signal(libc::SIGTTOU, libc::SIG_DFL);
            }
        }
    }
}
