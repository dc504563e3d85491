//! The checker: judges a torture run's [history](crate::history). It finds two workers
//! holding the lock at once, counter updates lost between valid holders, stale writes the
//! fenced resource accepted, fencing tokens out of grant order, writes that went through
//! after their writer had lost the lock, and a lock left free while workers waited. An
//! election's history (scheme `election`) has its violations named as an election's (two
//! leaders, terms out of order, a stale leader's write); a job's (a `JobRuns` event) is
//! checked for runs sooner than `at_least` after a run that kept its lock.
//!
//! ```
//! use distlock_check::checker::{Kind, Limits, check};
//! use distlock_check::history::parse;
//! let history = parse(concat!(
//!     r#"{"at":0,"worker":1,"ev":"granted","token":1,"safe_until":100}"#, "\n",
//!     r#"{"at":50,"worker":2,"ev":"granted","token":2,"safe_until":150}"#,
//! ))?;
//! let verdict = check(&history, &Limits { liveness: 1_000 });
//! assert_eq!(verdict.violations[0].kind, Kind::Overlap);
//! # Ok::<(), String>(())
//! ```

use std::collections::BTreeMap;

use serde::Serialize;

use crate::history::{Event, What};
use timeline::{Hold, Timeline};

mod hand_off;
mod job;
mod liveness;
#[cfg(test)]
mod tests;
mod timeline;

/// The bounds a history is judged against.
///
/// # Examples
///
/// ```
/// use distlock_check::checker::Limits;
/// let limits = Limits { liveness: 2_000_000_000 }; // 2 s
/// assert_eq!(limits.liveness, 2_000_000_000);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The longest time, in nanoseconds, the lock may sit free while a worker waits for
    /// it (a wait longer than that is counted among the starved).
    pub liveness: u64,
}

/// Judges `events`, sorted by time (as [`parse`](crate::history::parse) returns them).
///
/// A hold is one grant: from its `Granted` to its `Release`, its `Health` lost, its
/// worker's kill or next `Acquire`, or the moment its validity (the last `safe_until`
/// recorded) ran out, whichever comes first. An acquire left unanswered by a kill or the
/// end may have left a lease for a TTL: the lock does not count as free under it, but
/// its worker never acted under it, so it overlaps nothing. A paused worker's acquire
/// does not wait while it is paused.
///
/// # Examples
///
/// ```
/// use distlock_check::checker::{Limits, check};
/// use distlock_check::history::{Event, What};
/// let events = [
///     Event { at: 0, worker: 1, what: What::Acquire },
///     Event { at: 5, worker: 1, what: What::Granted { token: 1, safe_until: 100 } },
///     Event { at: 9, worker: 1, what: What::Release },
/// ];
/// let verdict = check(&events, &Limits { liveness: 1_000 });
/// assert!(verdict.clean());
/// assert_eq!(verdict.stats.acquisitions, 1);
/// ```
pub fn check(events: &[Event], limits: &Limits) -> Verdict {
    let timeline = Timeline::new(events);
    let mut verdict = Verdict {
        violations: Vec::new(),
        stats: Stats::default(),
    };
    count_grants_and_faults(&timeline, &mut verdict);
    check_overlaps(&timeline, &mut verdict);
    check_counter(&timeline, &mut verdict);
    check_resource(&timeline, &mut verdict);
    check_tokens(&timeline, &mut verdict);
    check_late_loss(&timeline, &mut verdict);
    liveness::check_free_waits(&timeline, limits, &mut verdict);
    liveness::check_fifo(&timeline, &mut verdict);
    liveness::count_starved(&timeline, limits, &mut verdict);
    job::check_too_soon(&timeline, &mut verdict);
    job::check_once_per(&timeline, &mut verdict);
    hand_off::check_hand_offs(&timeline, limits, &mut verdict);
    if scheme_of(events) == Some("election") {
        as_election(&mut verdict);
    }
    verdict
        .violations
        .sort_by(|a, b| (a.kind, &a.events).cmp(&(b.kind, &b.events)));
    verdict
}

/// One grant of the lock as the checker sees it: from its `Granted` event to whatever
/// ended it (see [`check`]).
///
/// # Examples
///
/// ```
/// use distlock_check::checker::holds;
/// use distlock_check::history::{Event, What};
/// let events = [
///     Event { at: 5, worker: 1, what: What::Granted { token: 1, safe_until: 100 } },
///     Event { at: 9, worker: 1, what: What::Release },
/// ];
/// let held = &holds(&events)[0];
/// assert_eq!((held.worker, held.token, held.grant, held.start, held.end), (1, 1, 0, 5, 9));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Held {
    /// The worker it was granted to.
    pub worker: u32,
    /// Its `Granted` event: an index into the history.
    pub grant: usize,
    /// Its fencing token.
    pub token: u64,
    /// When it began, on the history's clock.
    pub start: u64,
    /// When it ended, on the history's clock (`u64::MAX` if nothing bounds it).
    pub end: u64,
}

/// Every grant's hold in `events` (sorted by time), in grant order.
///
/// # Examples
///
/// ```
/// use distlock_check::checker::holds;
/// assert!(holds(&[]).is_empty());
/// ```
pub fn holds(events: &[Event]) -> Vec<Held> {
    Timeline::new(events)
        .holds
        .into_iter()
        .map(|hold| Held {
            worker: hold.worker,
            grant: hold.grant,
            token: hold.token,
            start: hold.span.start,
            end: hold.span.end,
        })
        .collect()
}

/// A history's judgement: what was found wrong, and what happened.
///
/// # Examples
///
/// ```
/// use distlock_check::checker::{Limits, check};
/// let verdict = check(&[], &Limits { liveness: 1 });
/// assert!(verdict.violations.is_empty());
/// assert_eq!(verdict.stats.acquisitions, 0);
/// ```
#[derive(Debug, Clone, Serialize)]
pub struct Verdict {
    /// Everything found wrong, by kind, then by the events it names.
    pub violations: Vec<Violation>,
    /// What happened, counted and measured.
    pub stats: Stats,
}

impl Verdict {
    /// Whether nothing was found wrong.
    ///
    /// # Examples
    ///
    /// ```
    /// use distlock_check::checker::{Limits, check};
    /// assert!(check(&[], &Limits { liveness: 1 }).clean());
    /// ```
    pub fn clean(&self) -> bool {
        self.violations.is_empty()
    }
}

/// One thing found wrong.
///
/// # Examples
///
/// ```
/// use distlock_check::checker::{Kind, Limits, check};
/// use distlock_check::history::{Event, What};
/// let events = [
///     Event { at: 0, worker: 1, what: What::Write { token: 5, accepted: true } },
///     Event { at: 1, worker: 2, what: What::Write { token: 4, accepted: true } },
/// ];
/// let violation = &check(&events, &Limits { liveness: 1 }).violations[0];
/// assert_eq!(violation.kind, Kind::StaleWriteAccepted);
/// assert_eq!(violation.events, [0, 1]);
/// ```
#[derive(Debug, Clone, Serialize)]
pub struct Violation {
    /// What kind of thing went wrong.
    pub kind: Kind,
    /// What went wrong, in one line: worker ids, tokens, times in ms from the first event.
    pub message: String,
    /// The events involved: indexes into the history checked.
    pub events: Vec<usize>,
    /// When it went wrong, on the history's clock: from and to (the same for a moment).
    pub span: [u64; 2],
}

/// What kind of thing went wrong.
///
/// # Examples
///
/// ```
/// use distlock_check::checker::Kind;
/// assert_eq!(serde_json::to_string(&Kind::StaleWriteAccepted)?, r#""stale-write-accepted""#);
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// Two workers held the lock at once.
    Overlap,
    /// A valid holder's counter write overwrote another valid holder's write made after
    /// its read: an update was lost.
    LostUpdate,
    /// The fenced resource accepted a write whose token was below one it had accepted (or
    /// equal to another worker's).
    StaleWriteAccepted,
    /// A grant's fencing token was not above the tokens granted before it.
    TokenOrder,
    /// The resource accepted a worker's write after a worker granted the lock later had
    /// written: the first had lost the lock and wrote anyway.
    LateLoss,
    /// The lock sat free too long while a worker waited, or a worker waited too long.
    Liveness,
    /// A fair lock granted a worker before another that had asked earlier and still
    /// waited.
    Fifo,
    /// Two leaderships of an election were valid at once (an overlap, in an election's
    /// history).
    TwoLeaders,
    /// A term was not above the terms before it (a token out of order, in an election's
    /// history).
    TermOrder,
    /// The resource accepted a leader's write after a later term had made itself known
    /// to it, or with a term not above one it had accepted (a stale or late write, in an
    /// election's history: each leader writes its term as its term begins).
    StaleLeaderWrite,
    /// A job ran again sooner than its `at_least` after a run that kept its lock for it,
    /// or sooner than its `once_per` after the start of a run that succeeded.
    JobTooSoon,
    /// A hand-off went wrong: the resource accepted a write of the sender after another
    /// worker took its grant over, or nobody was granted the lock within the offer's
    /// deadline (and the liveness limit after it) while a worker waited.
    Adopt,
}

/// What happened in a history, counted and measured.
///
/// # Examples
///
/// ```
/// use distlock_check::checker::{Limits, check};
/// use distlock_check::history::{Event, What};
/// let events = [
///     Event { at: 0, worker: 1, what: What::CounterRead { value: 0 } },
///     Event { at: 1, worker: 1, what: What::CounterWrite { value: 1 } },
/// ];
/// let stats = check(&events, &Limits { liveness: 1 }).stats;
/// assert_eq!((stats.critical_sections, stats.counter_final), (1, 1));
/// ```
#[derive(Debug, Clone, Default, Serialize)]
pub struct Stats {
    /// `Granted` events.
    pub acquisitions: u64,
    /// Grants to another worker than the grant before.
    pub transfers: u64,
    /// Writes the fenced resource accepted.
    pub writes_accepted: u64,
    /// Writes the fenced resource refused.
    pub stale_writes_refused: u64,
    /// `CounterWrite` events.
    pub critical_sections: u64,
    /// The last value written to the counter (0 if none was).
    pub counter_final: u64,
    /// Critical sections whose update the counter lost: `critical_sections` minus
    /// `counter_final`.
    pub lost_updates: u64,
    /// Counter writes made by a worker whose hold had ended: only fencing stops those.
    pub stale_unfenced_writes: u64,
    /// The longest the lock sat free while a worker waited, in nanoseconds.
    pub longest_free_wait_ns: u64,
    /// When that began (the history's clock, in nanoseconds).
    pub longest_free_wait_at: u64,
    /// Workers whose acquire waited longer than the liveness limit.
    pub starved_workers: Vec<u32>,
    /// `Granted` events of each worker.
    pub grants_per_worker: BTreeMap<u32, u64>,
    /// `Fault` events.
    pub faults: u64,
}

/// The lock scheme the history's `Start` names.
fn scheme_of(events: &[Event]) -> Option<&str> {
    events.iter().find_map(|event| match &event.what {
        What::Start { scheme, .. } => Some(scheme.as_str()),
        _ => None,
    })
}

/// Says an election's violations as an election's: two leaders, terms out of order, a
/// leader's write accepted after a later term began.
fn as_election(verdict: &mut Verdict) {
    for violation in &mut verdict.violations {
        let (kind, said) = match violation.kind {
            Kind::Overlap => (Kind::TwoLeaders, "two leaders"),
            Kind::TokenOrder => (Kind::TermOrder, "terms out of order"),
            Kind::StaleWriteAccepted | Kind::LateLoss => {
                (Kind::StaleLeaderWrite, "a stale leader's write")
            }
            _ => continue,
        };
        violation.kind = kind;
        violation.message = format!("{said}: {}", violation.message);
    }
}

/// A duration in ms.
fn duration(ns: u64) -> String {
    format!("{:.3} ms", ns as f64 / 1e6)
}

fn count_grants_and_faults(timeline: &Timeline, verdict: &mut Verdict) {
    let stats = &mut verdict.stats;
    let mut previous_grantee = None;
    for event in timeline.events {
        match event.what {
            What::Granted { .. } => {
                stats.acquisitions += 1;
                *stats.grants_per_worker.entry(event.worker).or_default() += 1;
                if previous_grantee.is_some_and(|previous| previous != event.worker) {
                    stats.transfers += 1;
                }
                previous_grantee = Some(event.worker);
            }
            What::Fault { .. } => stats.faults += 1,
            _ => {}
        }
    }
}

/// (a) Holds of different workers overlapping: one violation per pair.
fn check_overlaps(timeline: &Timeline, verdict: &mut Verdict) {
    let mut holds: Vec<&Hold> = timeline
        .holds
        .iter()
        .filter(|hold| !hold.span.is_empty())
        .collect();
    holds.sort_by_key(|hold| (hold.span.start, hold.grant));
    // The faults the run's coordinator (worker 0) struck the store with, in order (not
    // the store's recoveries from them).
    let store_faults: Vec<&Event> = timeline
        .events
        .iter()
        .filter(|event| {
            event.worker == 0
                && matches!(&event.what, What::Fault { fault, .. }
                    if !RECOVERIES.contains(&fault.as_str()))
        })
        .collect();
    for (position, earlier) in holds.iter().enumerate() {
        let overlapping = holds[position + 1..]
            .iter()
            .take_while(|later| later.span.start < earlier.span.end);
        for later in overlapping.filter(|later| later.worker != earlier.worker) {
            let struck = store_faults.partition_point(|fault| fault.at <= later.span.start);
            let after = match struck.checked_sub(1).map(|last| store_faults[last]) {
                Some(Event {
                    at,
                    what: What::Fault { fault, .. },
                    ..
                }) if *at >= earlier.span.start => {
                    format!(", after {fault} at {}", timeline.ms(*at))
                }
                _ => String::new(),
            };
            verdict.violations.push(Violation {
                kind: Kind::Overlap,
                message: format!(
                    "{} and {} held the lock at once from {} to {}{after}",
                    timeline.describe(earlier),
                    timeline.describe(later),
                    timeline.ms(later.span.start),
                    timeline.ms(earlier.span.end.min(later.span.end)),
                ),
                events: vec![earlier.grant, later.grant],
                span: [later.span.start, earlier.span.end.min(later.span.end)],
            });
        }
    }
}

/// The coordinator's records of a store coming back from a fault, not faults themselves.
const RECOVERIES: [&str; 3] = ["server-up", "server-resume", "master-back"];

/// (b) Each counter write against the other workers' writes since its read. A stale
/// write (its writer's hold over, on either side) is no lost update of the lock's: only
/// fencing would stop it.
fn check_counter(timeline: &Timeline, verdict: &mut Verdict) {
    let stats = &mut verdict.stats;
    // Each worker's last read not yet written back; every valid holder's write so far.
    let mut reads: BTreeMap<u32, usize> = BTreeMap::new();
    let mut held_writes: Vec<usize> = Vec::new();
    for (index, event) in timeline.events.iter().enumerate() {
        match event.what {
            What::CounterRead { .. } => {
                reads.insert(event.worker, index);
            }
            What::CounterWrite { value } => {
                stats.critical_sections += 1;
                stats.counter_final = value;
                let read = reads.remove(&event.worker);
                if timeline.unheld_counter_writes.binary_search(&index).is_ok() {
                    stats.stale_unfenced_writes += 1;
                    continue;
                }
                let lost =
                    read.and_then(|read| lost_update(timeline, read, index, value, &held_writes));
                verdict.violations.extend(lost);
                held_writes.push(index);
            }
            _ => {}
        }
    }
    stats.lost_updates = stats.critical_sections.saturating_sub(stats.counter_final);
}

/// The lost update if other workers' `held_writes` came between the counter's `read` and
/// its `write` of `value` by the same worker, one of them writing `value` or more: the
/// write then did not build on it. (A write in between of less than `value` is one the
/// read saw after all: the store made it before the read, and its worker recorded it
/// after; a counter kept in the store, updated atomically, records so.)
fn lost_update(
    timeline: &Timeline,
    read: usize,
    write: usize,
    value: u64,
    held_writes: &[usize],
) -> Option<Violation> {
    let events = timeline.events;
    let writer = &events[write];
    let since_read = held_writes.partition_point(|&other| other < read);
    let overwritten: Vec<usize> = held_writes[since_read..]
        .iter()
        .copied()
        .filter(|&other| events[other].worker != writer.worker)
        .filter(|&other| {
            matches!(events[other].what, What::CounterWrite { value: theirs } if theirs >= value)
        })
        .collect();
    if overwritten.is_empty() {
        return None;
    }
    let others: Vec<String> = overwritten
        .iter()
        .map(|&other| {
            let other = &events[other];
            format!("worker {} at {}", other.worker, timeline.ms(other.at))
        })
        .collect();
    Some(Violation {
        kind: Kind::LostUpdate,
        message: format!(
            "worker {} read the counter at {} and wrote {value} at {}, but {} wrote it in \
             between: an update was lost",
            writer.worker,
            timeline.ms(events[read].at),
            timeline.ms(writer.at),
            others.join(", "),
        ),
        span: [events[read].at, writer.at],
        events: [read]
            .into_iter()
            .chain(overwritten)
            .chain([write])
            .collect(),
    })
}

/// (c) The fenced resource's verdicts: a write accepted with a token below the highest
/// accepted before, or equal to another worker's, is a stale write accepted. A write without a token (0, from a
/// scheme that has none) is no evidence either way: (e) judges it by its grant.
fn check_resource(timeline: &Timeline, verdict: &mut Verdict) {
    let events = timeline.events;
    let stats = &mut verdict.stats;
    let mut highest_accepted: Option<(usize, u64)> = None;
    // A grant may write many times with its token (a leader, in its term); another
    // worker's write with the same token is no grant's.
    for (index, event) in events.iter().enumerate() {
        let What::Write { token, accepted } = event.what else {
            continue;
        };
        if !accepted {
            stats.stale_writes_refused += 1;
            continue;
        }
        stats.writes_accepted += 1;
        if token == 0 {
            continue;
        }
        match highest_accepted {
            Some((highest, highest_token))
                if token < highest_token
                    || (token == highest_token && events[highest].worker != event.worker) =>
            {
                verdict.violations.push(Violation {
                    kind: Kind::StaleWriteAccepted,
                    message: format!(
                        "the resource accepted worker {}'s write with token {token} at {} after \
                         accepting token {highest_token} from worker {} at {}",
                        event.worker,
                        timeline.ms(event.at),
                        events[highest].worker,
                        timeline.ms(events[highest].at),
                    ),
                    events: vec![highest, index],
                    span: [events[highest].at, event.at],
                });
            }
            _ => highest_accepted = Some((index, token)),
        }
    }
}

/// (e) A write the resource accepted from a worker after it had accepted one from a
/// worker granted the lock later (while the first still acted under its grant: until its
/// `Release`, next `Acquire` or kill). A stale write that comes before the new holder's
/// first write is ordered before it at the resource, which is all fencing promises.
fn check_late_loss(timeline: &Timeline, verdict: &mut Verdict) {
    let events = timeline.events;
    // The grant each worker acts under; every accepted write with its writer's grant.
    let mut acting_under: BTreeMap<u32, usize> = BTreeMap::new();
    let mut accepted_writes: Vec<(usize, Option<usize>)> = Vec::new();
    for (index, event) in events.iter().enumerate() {
        match &event.what {
            What::Granted { .. } => {
                acting_under.insert(event.worker, index);
            }
            What::Release | What::Acquire => {
                acting_under.remove(&event.worker);
            }
            What::Fault { fault, .. } if fault == "kill" => {
                acting_under.remove(&event.worker);
            }
            &What::Write {
                token,
                accepted: true,
            } => {
                let grant = acting_under.get(&event.worker).copied();
                accepted_writes.push((index, grant));
                let Some(grant) = grant else {
                    continue;
                };
                let since_grant = accepted_writes.partition_point(|&(write, _)| write < grant);
                let newer = accepted_writes[since_grant..]
                    .iter()
                    .find_map(|&(write, of)| {
                        of.filter(|&newer| newer > grant && events[write].worker != event.worker)
                            .map(|newer| (write, newer))
                    });
                let Some((newer_write, newer_grant)) = newer else {
                    continue;
                };
                verdict.violations.push(Violation {
                    kind: Kind::LateLoss,
                    message: format!(
                        "worker {} granted at {} had its write with token {token} accepted at {}, \
                         after worker {} granted at {} had written at {}: it had lost the lock",
                        event.worker,
                        timeline.ms(events[grant].at),
                        timeline.ms(event.at),
                        events[newer_grant].worker,
                        timeline.ms(events[newer_grant].at),
                        timeline.ms(events[newer_write].at),
                    ),
                    events: vec![grant, newer_grant, newer_write, index],
                    span: [events[newer_write].at, event.at],
                });
            }
            _ => {}
        }
    }
}

/// (d) Tokens strictly increasing in grant order, leaving out grants already invalid
/// when recorded; skipped when every token is 0 (a scheme without tokens).
fn check_tokens(timeline: &Timeline, verdict: &mut Verdict) {
    let events = timeline.events;
    let grants: Vec<(usize, u64, u64)> = events
        .iter()
        .enumerate()
        .filter_map(|(index, event)| match event.what {
            What::Granted { token, safe_until } => Some((index, token, safe_until)),
            _ => None,
        })
        .collect();
    if grants.iter().all(|&(_, token, _)| token == 0) {
        return;
    }
    let mut highest: Option<(usize, u64)> = None;
    for (index, token, safe_until) in grants {
        let event = &events[index];
        if safe_until <= event.at {
            continue;
        }
        match highest {
            Some((highest, highest_token)) if token <= highest_token => {
                verdict.violations.push(Violation {
                    kind: Kind::TokenOrder,
                    message: format!(
                        "worker {} was granted token {token} at {}, not above token \
                         {highest_token} granted to worker {} at {}",
                        event.worker,
                        timeline.ms(event.at),
                        events[highest].worker,
                        timeline.ms(events[highest].at),
                    ),
                    events: vec![highest, index],
                    span: [events[highest].at, event.at],
                });
            }
            _ => highest = Some((index, token)),
        }
    }
}
