//! Runs the command under a held lock: starts it in its own process group, forwards
//! signals to it, hands it the terminal, stops with it when job control stops it, and stops
//! it when the lease is lost.

use std::os::unix::process::CommandExt;
use std::process::Command;
use std::time::Duration;

use tokio::signal::unix::{SignalKind, signal};
use tokio::time::Instant;

use super::terminal::Terminal;
use crate::args::RunArgs;
use crate::exit;
use crate::output::errln;
use crate::signals::{self, Caught};

/// How often the command is looked at even without a SIGCHLD (which the kernel may merge).
const REAP_BACKSTOP: Duration = Duration::from_millis(500);

/// A command to run under a grant, and how.
pub struct Supervised<'a> {
    /// The lock's or election's name (`DISTLOCK_NAME` in the command's environment).
    pub name: &'a str,
    /// The command and its arguments.
    pub command: &'a [String],
    /// How long the command gets to exit after SIGTERM.
    pub kill_grace: Duration,
    /// When to stop the command, counted from its start.
    pub max_hold: Option<Duration>,
    /// What is held, in the message that stops the command at a loss: `lock` or
    /// `leadership of`.
    pub held: &'static str,
    /// More variables for the command's environment.
    pub env: Vec<(&'static str, String)>,
}

impl<'a> Supervised<'a> {
    /// The command of `distlock run`.
    pub fn of_run(args: &'a RunArgs) -> Self {
        Supervised {
            name: &args.name,
            command: &args.command,
            kill_grace: args.kill_grace,
            max_hold: args.max_hold,
            held: "lock",
            env: Vec::new(),
        }
    }
}

/// Runs the command under the grant of fencing token `token`, and waits for it; `lost`
/// resolves when the grant is lost. `caught` holds the signals caught since before the
/// grant: each is forwarded once the command runs. Returns distlock's exit code.
pub async fn supervise(
    args: &Supervised<'_>,
    (url, client): (&str, &distlock::Client),
    token: u64,
    lost: impl Future<Output = ()>,
    caught: &mut Caught,
) -> u8 {
    let terminal = Terminal::of_this_job();
    // Listen before the command starts, so its end is never missed.
    let mut child_changed = match signal(SignalKind::child()) {
        Ok(stream) => stream,
        Err(err) => {
            errln!("distlock: cannot watch the command: {err}");
            return exit::SOFTWARE;
        }
    };
    let group = match spawn(args, url, token, terminal) {
        Ok(pid) => pid,
        Err(err) => {
            if let Some(terminal) = terminal {
                terminal.reclaim();
            }
            errln!("distlock: cannot run `{}`: {err}", args.command[0]);
            return match (err.kind(), err.raw_os_error()) {
                (std::io::ErrorKind::NotFound, _) => exit::NOT_FOUND,
                // Not the command's fault: this process has no descriptors for its pipes.
                (_, Some(libc::EMFILE | libc::ENFILE)) => {
                    errln!(
                        "distlock: this process has no file descriptors left (raise `ulimit -n`)"
                    );
                    exit::SOFTWARE
                }
                _ => exit::NOT_EXECUTABLE,
            };
        }
    };
    if let Some(terminal) = terminal {
        terminal.give_to(group);
    }
    tokio::pin!(lost);
    let mut lost_at: Option<Instant> = None;
    // The command is stopped at --max-hold, before the lease it no longer renews runs out.
    let hold_ends = args
        .max_hold
        .and_then(|max_hold| Instant::now().checked_add(max_hold));
    let code = loop {
        match look_at(group) {
            State::Running => {}
            State::Ended(code) => break code,
            State::Stopped(by) if signals::is_job_control(by) => {
                // Stopped by job control (Ctrl-Z, or a read of the terminal from the
                // background): the run stops with it, so the shell sees the job stopped,
                // and its SIGCONT, forwarded, continues both. The lease is not renewed
                // while stopped.
                if let Some(terminal) = terminal {
                    terminal.take_back(group);
                }
                signals::stop_between_writes(client).await;
            }
            // Stopped by SIGSTOP: whoever stopped it continues it.
            State::Stopped(_) => {}
            State::Gone(err) => {
                errln!("distlock: lost track of the command: {err}");
                break exit::SOFTWARE;
            }
        }
        // A grace period past the clock's range is no limit.
        let kill_at = lost_at.and_then(|at| at.checked_add(args.kill_grace));
        tokio::select! {
            _ = child_changed.recv() => {}
            _ = tokio::time::sleep(REAP_BACKSTOP) => {}
            _ = &mut lost, if lost_at.is_none() => {
                errln!("distlock: {} `{}` was lost; stopping the command", args.held, args.name);
                lost_at = Some(stop(group));
            }
            _ = sleep_until_opt(hold_ends), if lost_at.is_none() => {
                errln!(
                    "distlock: lock `{}` was held for --max-hold {}; stopping the command",
                    args.name,
                    humantime::format_duration(args.max_hold.unwrap_or_default())
                );
                lost_at = Some(stop(group));
            }
            _ = sleep_until_opt(kill_at) => {
                errln!("distlock: the command outlived the {:?} grace period; killing it", args.kill_grace);
                signals::to_group(group, libc::SIGKILL);
                lost_at = Some(Instant::now() + Duration::from_secs(3600));
            }
            number = caught.next() => {
                if number == libc::SIGCONT
                    && let Some(terminal) = terminal
                {
                    terminal.give_to(group);
                }
                signals::to_group(group, number);
            }
        }
    };
    if let Some(terminal) = terminal {
        terminal.take_back(group);
    }
    if lost_at.is_some() {
        return exit::LOST;
    }
    code
}

/// Asks the command's group to end (SIGTERM, and SIGCONT: a stopped command acts on
/// SIGTERM only once continued); the time it was asked.
fn stop(group: libc::pid_t) -> Instant {
    signals::to_group(group, libc::SIGTERM);
    signals::to_group(group, libc::SIGCONT);
    Instant::now()
}

/// Starts the command in a process group of its own (its pid), with the lock's name,
/// fencing token and store (`url`) in its environment. It gets SIGTERM from the kernel if
/// distlock dies, even by SIGKILL, so it does not run on without the lock (unless it ignores SIGTERM, or is a
/// set-user-ID program, for which the kernel drops the request); with a terminal, its group
/// is made the foreground group before it runs.
fn spawn(
    args: &Supervised<'_>,
    url: &str,
    token: u64,
    terminal: Option<Terminal>,
) -> std::io::Result<libc::pid_t> {
    let mut command = Command::new(&args.command[0]);
    command
        .args(&args.command[1..])
        .env("DISTLOCK_NAME", args.name)
        .env("DISTLOCK_FENCING_TOKEN", token.to_string())
        .envs(args.env.iter().map(|(key, value)| (key, value)))
        .process_group(0);
    // The store in use, for a nested distlock, one way only (it refuses both): the file the
    // URL came from, if it came from one; else the URL, unless it holds a password, which
    // is kept out of the command's environment (whatever it starts would inherit it).
    command
        .env_remove("DISTLOCK_URL")
        .env_remove("DISTLOCK_URL_FILE");
    match crate::location::url_file() {
        Some(file) => command.env("DISTLOCK_URL_FILE", file),
        None if distlock::redact_url(url) == url => command.env("DISTLOCK_URL", url),
        None => &mut command,
    };
    // SAFETY: getpid is async-signal-safe.
    let parent = unsafe { libc::getpid() };
    // SAFETY: the closure runs between fork and exec and calls only async-signal-safe
    // functions (prctl, getppid, getpid, tcgetpgrp, tcsetpgrp, signal), allocating nothing.
    unsafe {
        command.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // distlock died before the death signal was armed: do not run unlocked.
            if libc::getppid() != parent {
                return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
            }
            if let Some(terminal) = terminal {
                terminal.give_to(libc::getpid());
                terminal.restore_ttou();
            }
            Ok(())
        });
    }
    let child = command.spawn()?;
    Ok(child.id() as libc::pid_t)
}

/// What the command is doing.
enum State {
    Running,
    /// Stopped by this signal.
    Stopped(libc::c_int),
    /// Ended, with distlock's exit code for it: its own, or 128 + the signal that ended it.
    Ended(u8),
    /// It cannot be waited for.
    Gone(std::io::Error),
}

/// Looks at the command without waiting: reaps it if it ended, and reports a stop.
fn look_at(pid: libc::pid_t) -> State {
    let mut status = 0;
    loop {
        // SAFETY: waitpid writes the status to a local integer.
        let found = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG | libc::WUNTRACED) };
        if found == 0 {
            return State::Running;
        }
        if found < 0 {
            let err = std::io::Error::last_os_error();
            if err.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return State::Gone(err);
        }
        return if libc::WIFEXITED(status) {
            State::Ended(libc::WEXITSTATUS(status) as u8)
        } else if libc::WIFSIGNALED(status) {
            State::Ended(signals::exit_code(libc::WTERMSIG(status)))
        } else if libc::WIFSTOPPED(status) {
            State::Stopped(libc::WSTOPSIG(status))
        } else {
            State::Running
        };
    }
}

async fn sleep_until_opt(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
