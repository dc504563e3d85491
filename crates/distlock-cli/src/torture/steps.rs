//! Faults a worker does to itself at a step of its lock scheme: between two store calls of
//! an acquire or a release, or between its last look at the lock and its fenced write.
//! A fault from outside lands at a random moment, and the moments a broken scheme is weak
//! at last microseconds; the coordinator orders a worker to stop or die at a named step
//! instead, over its standard input (one line per order, after its task), and the worker
//! does so when it next gets there, recording the fault first.

use std::io::BufRead;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use distlock_check::history::What;
use tokio::sync::Notify;

use super::record::Recorder;
use crate::args::Scheme;

/// Between the last look at the lock and the write to the fenced resource.
pub const BEFORE_FENCED_WRITE: &str = "before-fenced-write";
/// Right after a grant, before the critical section.
pub const AFTER_GRANT: &str = "after-grant";
/// After the critical section, before the release's first store call.
pub const BEFORE_RELEASE: &str = "before-release";
/// `setnx-expire`: the lock taken by `SETNX`, its `EXPIRE` not sent.
pub const BETWEEN_SETNX_AND_EXPIRE: &str = "between-setnx-and-expire";
/// `get-then-del` and `getset-timestamp` releases: the `GET` answered, the `DEL` not sent.
pub const BETWEEN_GET_AND_DEL: &str = "between-get-and-del";
/// `getset-timestamp` acquires: an expired time read, the `GETSET` not sent.
pub const BETWEEN_GET_AND_GETSET: &str = "between-get-and-getset";
/// `version-cas`: the value and its version read, the update not sent.
pub const BETWEEN_READ_AND_CAS: &str = "between-read-and-cas";

/// The steps of `scheme` a step fault lands on, in the order faults of a kind take them:
/// the scheme's own store calls first, then the steps every scheme has.
pub fn of(scheme: Scheme) -> &'static [&'static str] {
    match scheme {
        Scheme::Distlock
        | Scheme::NoRenewal
        | Scheme::NoFencing
        | Scheme::SelectForUpdate
        | Scheme::Election
        | Scheme::Job
        | Scheme::HandOff => &[BEFORE_FENCED_WRITE, AFTER_GRANT, BEFORE_RELEASE],
        Scheme::VersionCas => &[BETWEEN_READ_AND_CAS, BEFORE_FENCED_WRITE],
        Scheme::SetnxExpire => &[BETWEEN_SETNX_AND_EXPIRE, BEFORE_FENCED_WRITE],
        Scheme::GetThenDel => &[BETWEEN_GET_AND_DEL, BEFORE_FENCED_WRITE],
        Scheme::GetsetTimestamp => &[
            BETWEEN_GET_AND_DEL,
            BETWEEN_GET_AND_GETSET,
            BEFORE_FENCED_WRITE,
        ],
    }
}

/// Whether the lock's holder reaches `step` next (in its critical section or its
/// release), rather than a worker waiting for the lock.
pub fn holder_reaches(step: &str) -> bool {
    [BEFORE_FENCED_WRITE, BEFORE_RELEASE, BETWEEN_GET_AND_DEL].contains(&step)
}

/// What a worker does to itself at a step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Act {
    /// Stop (SIGSTOP to itself); the coordinator resumes it.
    Pause,
    /// Die (SIGKILL to itself); the coordinator starts another worker.
    Crash,
}

impl Act {
    /// The order's line, without its newline: `pause <step>` or `crash <step>`.
    pub fn order(self, step: &str) -> String {
        match self {
            Act::Pause => format!("pause {step}"),
            Act::Crash => format!("crash {step}"),
        }
    }
}

/// The order to withdraw an armed fault.
pub const DISARM: &str = "disarm";

/// The order to stop: the run was interrupted. The worker withdraws a request it waits
/// on, or ends its critical section and releases, and exits.
pub const STOP: &str = "stop";

/// A worker's armed fault, if any, and whether it is to stop, as the coordinator ordered.
#[derive(Debug, Default)]
pub struct Orders {
    armed: Mutex<Option<(Act, String)>>,
    stop: AtomicBool,
    stopping: Notify,
}

impl Orders {
    /// Listens for orders on standard input (after the task, which has been read), in a
    /// thread of its own, until the coordinator closes it.
    pub fn listen() -> Arc<Orders> {
        let orders = Arc::new(Orders::default());
        let listening = orders.clone();
        std::thread::spawn(move || {
            for line in std::io::stdin().lock().lines() {
                let Ok(line) = line else { return };
                if line == STOP {
                    listening.stop.store(true, Ordering::SeqCst);
                    listening.stopping.notify_waiters();
                    continue;
                }
                let order = match line.split_once(' ') {
                    Some(("pause", step)) => Some((Act::Pause, step.to_owned())),
                    Some(("crash", step)) => Some((Act::Crash, step.to_owned())),
                    _ => None,
                };
                *listening.armed.lock().unwrap_or_else(|p| p.into_inner()) = order;
            }
        });
        orders
    }

    /// Whether the worker was ordered to stop.
    pub fn stopped(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }

    /// Waits until the worker is ordered to stop.
    pub async fn stop_ordered(&self) {
        loop {
            // Registered before the look, so an order between the two still wakes it.
            let ordered = self.stopping.notified();
            if self.stopped() {
                return;
            }
            ordered.await;
        }
    }

    /// The worker `me` is at `step`: if a fault is armed for it, records it and does it.
    pub fn at(&self, step: &str, recorder: &Recorder, me: u32) {
        let act = {
            let mut armed = self.armed.lock().unwrap_or_else(|p| p.into_inner());
            match armed.as_ref() {
                Some((act, at)) if at == step => {
                    let act = *act;
                    *armed = None;
                    act
                }
                _ => return,
            }
        };
        let (fault, signal) = match act {
            Act::Pause => ("pause", libc::SIGSTOP),
            Act::Crash => ("kill", libc::SIGKILL),
        };
        recorder.record(
            me,
            What::Fault {
                fault: fault.into(),
                step: Some(step.into()),
            },
        );
        // SAFETY: kill(2) of this process by itself; SIGSTOP stops every thread until the
        // coordinator's SIGCONT, SIGKILL ends them.
        unsafe { libc::kill(libc::getpid(), signal) };
    }
}
