//! A `distlock` process started in a process group of its own (as a shell starts a job),
//! so a test can signal it as a terminal does (the whole group, its workers included) or
//! as a supervisor does (the process alone), and count what of the group is still alive.

use std::process::{Child, Command, ExitStatus};
use std::time::{Duration, Instant};

/// A process leading a group of its own, which is killed whole if the test ends before it
/// does.
pub struct Group(pub Child);

impl Group {
    /// Starts `command` in a process group of its own.
    pub fn spawn(mut command: Command) -> Group {
        use std::os::unix::process::CommandExt;
        Group(command.process_group(0).spawn().expect("distlock runs"))
    }

    /// The group's id (the leader's process id).
    pub fn id(&self) -> i32 {
        self.0.id() as i32
    }

    /// Sends `signal` to the whole group (`whole`, as a terminal's Ctrl-C) or to the leader
    /// alone (as a supervisor's SIGTERM).
    pub fn signal(&self, signal: libc::c_int, whole: bool) {
        // SAFETY: kill(2) and killpg(2) have no memory-safety preconditions.
        unsafe {
            match whole {
                true => libc::killpg(self.id(), signal),
                false => libc::kill(self.id(), signal),
            }
        };
    }

    /// How the leader ended, if it does within `within`.
    pub fn ended_within(&mut self, within: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + within;
        loop {
            if let Some(status) = self.0.try_wait().unwrap() {
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits, at most `within`, until at least `count` processes of the group are alive.
    pub fn wait_for_alive(&self, count: usize, within: Duration) -> bool {
        let deadline = Instant::now() + within;
        while alive_in_group(self.id()) < count {
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        true
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        // SAFETY: killpg(2) has no memory-safety preconditions.
        unsafe { libc::killpg(self.id(), libc::SIGKILL) };
        let _ = self.0.wait();
    }
}

/// The processes of group `group` that have not ended (zombies left out).
pub fn alive_in_group(group: i32) -> usize {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return 0;
    };
    entries
        .flatten()
        .filter_map(|entry| std::fs::read_to_string(entry.path().join("stat")).ok())
        .filter(|stat| {
            // After the command's name, in parentheses: state, parent, group, …
            let fields: Vec<&str> = stat
                .rsplit_once(')')
                .map_or("", |(_, rest)| rest)
                .split_whitespace()
                .collect();
            fields.len() > 2 && fields[0] != "Z" && fields[2] == group.to_string()
        })
        .count()
}

/// The processes of group `group` still alive once none is, or once `within` has passed.
pub fn alive_in_group_after(group: i32, within: Duration) -> usize {
    let deadline = Instant::now() + within;
    loop {
        let alive = alive_in_group(group);
        if alive == 0 || Instant::now() >= deadline {
            return alive;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}
