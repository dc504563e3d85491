//! A history: every operation of every worker, the fenced resource's verdicts and the
//! faults, each stamped from the one clock all processes on the machine share
//! (`CLOCK_MONOTONIC`, in nanoseconds), written as JSON lines (see [`Recorder`]).
//!
//! [`Recorder`]: crate::Recorder
//!
//! ```
//! use distlock_check::history::{What, parse};
//! let history = parse(concat!(
//!     r#"{"at":20,"worker":1,"ev":"enter"}"#, "\n",
//!     r#"{"at":10,"worker":1,"ev":"granted","token":3,"safe_until":900}"#,
//! ))?;
//! assert_eq!(history[0].what, What::Granted { token: 3, safe_until: 900 });
//! # Ok::<(), String>(())
//! ```

use serde::{Deserialize, Serialize};

/// One event of the history.
///
/// # Examples
///
/// ```
/// use distlock_check::history::{Event, What};
/// let event = Event { at: 1_000, worker: 2, what: What::Enter };
/// assert_eq!(serde_json::to_string(&event)?, r#"{"at":1000,"worker":2,"ev":"enter"}"#);
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Event {
    /// When it happened: `CLOCK_MONOTONIC` nanoseconds.
    pub at: u64,
    /// The worker it concerns (the worker a fault hit; the writer of a resource write).
    pub worker: u32,
    /// What happened.
    #[serde(flatten)]
    pub what: What,
}

/// What happened. New kinds of events may come: match with a `_` arm.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "ev", rename_all = "kebab-case")]
#[non_exhaustive]
pub enum What {
    /// The run started (written by the coordinator, worker 0).
    Start {
        /// Each lease's TTL, in nanoseconds.
        ttl: u64,
        /// How many workers the run started with.
        workers: u32,
        /// The lock scheme: `distlock`, or a broken scheme used as a negative control.
        scheme: String,
        /// The backend's URL scheme.
        backend: String,
        /// Whether the workers asked for fair (FIFO) grants.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        fair: bool,
    },
    /// The workers run a job (written by the coordinator after `Start`): a run whose
    /// release says `kept` keeps the lock until its grant plus `at_least`.
    JobRuns {
        /// How long after each grant a kept run keeps the lock, in nanoseconds.
        at_least: u64,
        /// Whether the store keeps a grant once its holder's process is gone (a lease
        /// store): a run then keeps its `at_least` though its worker is killed or paused.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        detachable: bool,
    },
    /// The job's runs are also spaced by `once_per` (written by the coordinator after
    /// `JobRuns`): no run's body starts sooner than that after the start of a run that
    /// succeeded (its `Exit`, and a release that says `kept`). A grant found too
    /// soon is no run: its worker records an `AcquireFailed`.
    OncePer {
        /// The window, in nanoseconds.
        span: u64,
    },
    /// The worker asks for the lock.
    Acquire,
    /// Its acquire returned the lock.
    Granted {
        /// The grant's fencing token (0 for a scheme that has none).
        token: u64,
        /// Until when the guard is valid, on the shared clock (`u64::MAX` for a scheme
        /// that does not say).
        safe_until: u64,
    },
    /// Its acquire failed: it does not hold the lock.
    AcquireFailed {
        /// Why.
        error: String,
    },
    /// The guard's validity moved on (a renewal).
    Renewed {
        /// Until when the guard is valid now, on the shared clock.
        safe_until: u64,
    },
    /// The guard reported a change of health.
    Health {
        /// `held`, `at-risk` or `lost`.
        health: String,
    },
    /// The worker entered its critical section.
    Enter,
    /// It read the shared counter.
    CounterRead {
        /// The value it read.
        value: u64,
    },
    /// It wrote the shared counter.
    CounterWrite {
        /// The value it wrote: the one it read, plus one.
        value: u64,
    },
    /// It left its critical section, done.
    Exit,
    /// It left its critical section before its writes: its guard was no longer valid.
    Abandon,
    /// The fenced resource's verdict on a write (written by the resource).
    Write {
        /// The token the write carried (0: a scheme without tokens).
        token: u64,
        /// Whether the resource took it: a fenced resource, only a token greater than
        /// every one before; one that ignores tokens, every write.
        accepted: bool,
    },
    /// The worker releases the lock: it acts under it no more.
    Release,
    /// After its `Release`, the worker offered its grant to another (a hand-off) until
    /// `deadline`; its `Released` then says `handed` (it is no longer its) or `released`
    /// (nobody took it by the deadline).
    Offered {
        /// Until when the offer stands, on the shared clock.
        deadline: u64,
    },
    /// The release's outcome.
    Released {
        /// `ok`, `fail` (the lock was not held any more) or `unknown`; a job's `kept`; a
        /// hand-off's `handed` or `released`.
        outcome: String,
    },
    /// The coordinator did this to the worker, or had the worker do it to itself at a step
    /// of its lock scheme.
    Fault {
        /// `pause`, `resume` or `kill`.
        fault: String,
        /// The step of the lock scheme the worker was at, for a fault it did to itself.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        step: Option<String>,
    },
}

/// The current `CLOCK_MONOTONIC` time in nanoseconds: the same in every process on the
/// machine.
///
/// # Examples
///
/// ```
/// use distlock_check::history::monotonic_ns;
/// let (a, b) = (monotonic_ns(), monotonic_ns());
/// assert!(b >= a);
/// ```
pub fn monotonic_ns() -> u64 {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `now` is a valid timespec for clock_gettime to fill; CLOCK_MONOTONIC always
    // exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now) };
    (now.tv_sec as u64) * 1_000_000_000 + now.tv_nsec as u64
}

/// `instant` on the shared clock (std's `Instant` is `CLOCK_MONOTONIC` on Linux, but keeps
/// its value private): measured from now.
///
/// # Examples
///
/// ```
/// use distlock_check::history::{instant_ns, monotonic_ns};
/// let later = std::time::Instant::now() + std::time::Duration::from_secs(1);
/// assert!(instant_ns(later) > monotonic_ns());
/// ```
pub fn instant_ns(instant: std::time::Instant) -> u64 {
    let (now, now_ns) = (std::time::Instant::now(), monotonic_ns());
    match instant.checked_duration_since(now) {
        Some(ahead) => now_ns.saturating_add(ahead.as_nanos() as u64),
        None => now_ns.saturating_sub((now - instant).as_nanos() as u64),
    }
}

/// Parses a history's JSON lines, in order of time (lines from several writers interleave
/// out of order by a little).
///
/// # Examples
///
/// ```
/// use distlock_check::history::{parse, What};
/// let events = parse(r#"{"at":5,"worker":1,"ev":"enter"}"#)?;
/// assert_eq!(events[0].what, What::Enter);
/// # Ok::<(), String>(())
/// ```
pub fn parse(text: &str) -> Result<Vec<Event>, String> {
    let mut events = text
        .lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(n, line)| {
            serde_json::from_str::<Event>(line)
                .map_err(|e| format!("history line {}: {e}: {line}", n + 1))
        })
        .collect::<Result<Vec<_>, _>>()?;
    events.sort_by_key(|e| e.at);
    Ok(events)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_are_json_lines_and_back() {
        let event = Event {
            at: 1_000,
            worker: 2,
            what: What::Granted {
                token: 7,
                safe_until: 9,
            },
        };
        let line = serde_json::to_string(&event).unwrap();
        assert_eq!(
            line,
            r#"{"at":1000,"worker":2,"ev":"granted","token":7,"safe_until":9}"#
        );
        assert_eq!(parse(&line).unwrap(), [event]);
        assert!(parse("{\"at\":1}").unwrap_err().contains("line 1"));
    }

    #[test]
    fn instants_map_onto_the_shared_clock() {
        let now = std::time::Instant::now();
        let (before, at, after) = (monotonic_ns(), instant_ns(now), monotonic_ns());
        assert!(at <= after && at + 1_000_000 >= before);
        let later = instant_ns(now + std::time::Duration::from_secs(1));
        assert!(later > after);
    }
}
