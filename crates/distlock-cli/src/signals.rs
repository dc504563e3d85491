//! The signals distlock catches. While `distlock run` waits for the lock, one that would end
//! it ends the wait instead (the request is withdrawn first); while the command runs, each is
//! forwarded to the command's process group, so no signal a supervisor or a terminal sends
//! kills distlock and leaves the command running without the lock. `distlock demo` stops on
//! one and removes its shop before it exits; `distlock bench` stops its phases, and its
//! clients release what they hold and forget the bench's names before it exits.

use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// Every signal a supervisor forwards: each one whose default action would end distlock
/// (hang-up, interrupt, quit, terminate, the user, timer, limit and real-time signals),
/// and those a terminal or job control sends (window change, continue, stop from the
/// keyboard). Left out: what cannot be caught (KILL, STOP), what the kernel raises for
/// distlock's own faults (SEGV, BUS, FPE, ILL, TRAP, SYS, ABRT), child and background-terminal
/// notices (CHLD, TTIN, TTOU), and PIPE, which Rust programs ignore.
pub fn forwarded() -> Vec<libc::c_int> {
    let mut numbers = vec![
        libc::SIGHUP,
        libc::SIGINT,
        libc::SIGQUIT,
        libc::SIGTERM,
        libc::SIGUSR1,
        libc::SIGUSR2,
        libc::SIGALRM,
        libc::SIGVTALRM,
        libc::SIGPROF,
        libc::SIGXCPU,
        libc::SIGXFSZ,
        libc::SIGPWR,
        libc::SIGIO,
        libc::SIGWINCH,
        libc::SIGCONT,
        libc::SIGTSTP,
        libc::SIGURG,
    ];
    // The runtime's signal table ends below SIGRTMAX, which keeps its default action.
    numbers.extend(libc::SIGRTMIN()..libc::SIGRTMAX());
    numbers
}

/// The signals of [`forwarded`] whose default action ends the process: those distlock
/// stops on, cleaning up first.
///
/// # Examples
///
/// ```ignore
/// assert!(signals::ending().contains(&libc::SIGINT));
/// assert!(!signals::ending().contains(&libc::SIGWINCH));
/// ```
pub fn ending() -> Vec<libc::c_int> {
    forwarded()
        .into_iter()
        .filter(|&n| ends_a_wait(n))
        .collect()
}

/// Whether a signal's default action ends the process (so a waiting run gives up on it).
pub fn ends_a_wait(number: libc::c_int) -> bool {
    !matches!(
        number,
        libc::SIGWINCH | libc::SIGCONT | libc::SIGTSTP | libc::SIGURG
    )
}

/// Whether a stop by this signal is job control's (Ctrl-Z, a background read or write of
/// the terminal), which stops a whole job, rather than a SIGSTOP sent to one process.
pub fn is_job_control(number: libc::c_int) -> bool {
    matches!(number, libc::SIGTSTP | libc::SIGTTIN | libc::SIGTTOU)
}

/// The caught signals. Those that arrive between two reads wait in the queue, so one sent
/// between the grant and the command's start is still forwarded; repeats of one signal
/// before it is read may be merged, and the order between different signals sent at once is
/// not kept.
pub struct Caught {
    received: mpsc::UnboundedReceiver<libc::c_int>,
    listeners: Vec<JoinHandle<()>>,
    /// Whether a signal that asks a program to end (SIGTERM, SIGINT, SIGHUP, SIGQUIT) was
    /// read.
    asked_to_end: bool,
}

impl Caught {
    /// Starts catching `numbers`, but for those distlock was started ignoring (`nohup`
    /// ignores SIGHUP; a shell's `&` without job control, SIGINT and SIGQUIT): they stay
    /// ignored, for distlock and for the command. A signal the runtime cannot catch keeps
    /// its default action. The others are caught from the moment this returns.
    pub fn listen(numbers: &[libc::c_int]) -> Caught {
        let (send, received) = mpsc::unbounded_channel();
        let listeners = numbers
            .iter()
            .filter(|&&number| !ignored(number))
            .filter_map(|&number| {
                let mut stream = match signal(SignalKind::from_raw(number)) {
                    Ok(stream) => stream,
                    Err(err) => {
                        tracing::debug!(signal = number, error = %err, "cannot catch a signal");
                        return None;
                    }
                };
                let send = send.clone();
                Some(tokio::spawn(async move {
                    while stream.recv().await.is_some() {
                        if send.send(number).is_err() {
                            break;
                        }
                    }
                }))
            })
            .collect();
        Caught {
            received,
            listeners,
            asked_to_end: false,
        }
    }

    /// The next signal caught.
    pub async fn next(&mut self) -> libc::c_int {
        match self.received.recv().await {
            Some(number) => {
                self.asked_to_end |= matches!(
                    number,
                    libc::SIGTERM | libc::SIGINT | libc::SIGHUP | libc::SIGQUIT
                );
                number
            }
            // Every listener holds a sender until it is aborted with this value.
            None => std::future::pending().await,
        }
    }
}

impl Caught {
    /// Whether a signal read so far asks distlock to end (SIGTERM, SIGINT, SIGHUP or
    /// SIGQUIT, forwarded to the command): a command stopped by it is not started again.
    pub fn asked_to_end(&self) -> bool {
        self.asked_to_end
    }
}

impl Drop for Caught {
    fn drop(&mut self) {
        for listener in &self.listeners {
            listener.abort();
        }
    }
}

/// Whether the process ignores a signal (as it was started, before any is caught).
fn ignored(number: libc::c_int) -> bool {
    // SAFETY: sigaction with no new action only reads the current one into `current`.
    unsafe {
        let mut current: libc::sigaction = std::mem::zeroed();
        libc::sigaction(number, std::ptr::null(), &mut current) == 0
            && current.sa_sigaction == libc::SIG_IGN
    }
}

/// The exit code of a process a signal ended, as a shell reports one: 128 + its number.
///
/// # Examples
///
/// ```ignore
/// assert_eq!(signals::exit_code(libc::SIGINT), 130);
/// ```
pub fn exit_code(number: libc::c_int) -> u8 {
    128u8.saturating_add(number as u8)
}

/// The exit code of `distlock <command>` stopped by signal `number`, told on stderr.
///
/// # Examples
///
/// ```ignore
/// assert_eq!(signals::stopped("bench", libc::SIGTERM), 143);
/// ```
pub fn stopped(command: &str, number: libc::c_int) -> u8 {
    crate::output::errln!("distlock {command}: stopped by signal {number}");
    exit_code(number)
}

/// Sends a signal to a process group.
pub fn to_group(group: libc::pid_t, number: libc::c_int) {
    // SAFETY: killpg(2) has no memory-safety preconditions.
    unsafe {
        libc::killpg(group, number);
    }
}

/// How long a stop waits for the client's writes under way to end before it stops anyway.
const WRITES_END_WITHIN: std::time::Duration = std::time::Duration::from_secs(1);

/// Stops distlock as job control stops a job, once none of `client`'s writes is under way
/// (or after [`WRITES_END_WITHIN`]): a SQLite writer stopped in the middle of one would
/// hold up every other client of the database until continued. Writes wait while it is
/// stopped, and go on once it is continued.
pub async fn stop_between_writes(client: &distlock::Client) {
    let paused = tokio::time::timeout(WRITES_END_WITHIN, client.pause_writes()).await;
    stop_self();
    drop(paused);
}

/// Stops distlock itself, as job control stops a job: the shell sees it stopped, and its
/// `fg` or `bg` continues it with SIGCONT.
pub fn stop_self() {
    // SAFETY: kill(2) has no memory-safety preconditions; SIGSTOP cannot be caught.
    unsafe {
        libc::kill(libc::getpid(), libc::SIGSTOP);
    }
}
