//! The history read worker by worker: who held the lock when, who waited when.

use std::collections::BTreeMap;
use std::ops::Range;

use crate::history::{Event, What};

/// The holds and waits of a history, worked out once for all checks.
pub(super) struct Timeline<'a> {
    pub(super) events: &'a [Event],
    /// The first event's time: messages give times from it.
    origin: u64,
    /// Every grant's hold, in the order of their `Granted` events.
    pub(super) holds: Vec<Hold>,
    /// When a lease may still have held the lock in the store with no worker acting under
    /// it: a killed holder's, or one whose release's outcome is unknown, until its last
    /// recorded validity; an acquire its worker's kill (or the end
    /// of the history) left unanswered from its `Acquire` to a lease after the kill (a
    /// lease being the longest validity any grant was given, else the `Start`'s TTL). Its
    /// worker acts no more, so these keep the lock from counting as free, and are no hold
    /// to overlap.
    pub(super) leases_left: Vec<Range<u64>>,
    /// Every acquire's wait, worker by worker.
    pub(super) waits: Vec<Wait>,
    /// `CounterWrite` events made while no hold of their worker was open, in order.
    pub(super) unheld_counter_writes: Vec<usize>,
}

/// One grant of the lock to one worker.
pub(super) struct Hold {
    pub(super) worker: u32,
    /// Its `Granted` event.
    pub(super) grant: usize,
    pub(super) token: u64,
    /// When the worker held the lock (`end` is `u64::MAX` if nothing bounds it).
    pub(super) span: Range<u64>,
}

/// One acquire waiting for its answer.
pub(super) struct Wait {
    pub(super) worker: u32,
    pub(super) acquire: usize,
    /// When it was answered (granted, failed, its worker killed, or the history's end).
    pub(super) answered: u64,
    /// The `Granted` event that answered it, if one did.
    pub(super) granted: Option<usize>,
    /// The stretches it waited while its worker ran (its worker's pauses left out).
    pub(super) running: Vec<Range<u64>>,
}

impl Wait {
    /// How long it waited while its worker ran.
    pub(super) fn waited(&self) -> u64 {
        self.running.iter().map(|span| span.end - span.start).sum()
    }

    /// Whether its worker was paused or cut off from the store, or the server was down,
    /// while it waited (such a waiter may lose its place in a queue, and rightly so).
    pub(super) fn paused(&self, asked: u64) -> bool {
        match self.running.as_slice() {
            [only] => only.start != asked || only.end != self.answered,
            [] => asked != self.answered,
            _ => true,
        }
    }
}

impl<'a> Timeline<'a> {
    pub(super) fn new(events: &'a [Event]) -> Timeline<'a> {
        let granted_for = events
            .iter()
            .filter_map(|event| match event.what {
                What::Granted { safe_until, .. } if safe_until != u64::MAX => {
                    Some(safe_until.saturating_sub(event.at))
                }
                _ => None,
            })
            .max();
        let ttl = events.iter().find_map(|event| match event.what {
            What::Start { ttl, .. } => Some(ttl),
            _ => None,
        });
        let lease = granted_for.or(ttl);
        let mut events_of: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
        for (index, event) in events.iter().enumerate() {
            events_of.entry(event.worker).or_default().push(index);
        }
        let mut timeline = Timeline {
            events,
            origin: events.first().map_or(0, |event| event.at),
            holds: Vec::new(),
            leases_left: Vec::new(),
            waits: Vec::new(),
            unheld_counter_writes: Vec::new(),
        };
        let server_down = server_down(events);
        for indexes in events_of.values() {
            timeline.follow(indexes, lease, &server_down);
        }
        timeline.holds.sort_by_key(|hold| hold.grant);
        timeline.unheld_counter_writes.sort_unstable();
        timeline
    }

    /// Reads one worker's events (`indexes`, in order): its holds, its waits (less the
    /// times its worker was paused or cut off from the store, or the server was down:
    /// `server_down`), its counter writes made outside its holds.
    fn follow(&mut self, indexes: &[usize], lease_length: Option<u64>, server_down: &[Range<u64>]) {
        let events = self.events;
        let last = events.last().map_or(0, |event| event.at);
        let lease = |acquire: usize, ended: u64| {
            events[acquire].at..lease_length.map_or(u64::MAX, |lease| ended.saturating_add(lease))
        };
        let mut waiting = None;
        let mut waits = Vec::new();
        let mut paused_since = None;
        let mut pauses = Vec::new();
        let mut held = 0..0;
        for (position, &index) in indexes.iter().enumerate() {
            let event = &events[index];
            match &event.what {
                What::Acquire => waiting = Some(index),
                &What::Granted { token, safe_until } => {
                    waits.extend(
                        waiting
                            .take()
                            .map(|acquire| (acquire, event.at, Some(index))),
                    );
                    let (hold, left) = self.hold(
                        (index, token, safe_until),
                        &indexes[position + 1..],
                        lease_length,
                    );
                    held = hold.span.clone();
                    self.holds.push(hold);
                    self.leases_left.extend(left);
                }
                What::AcquireFailed { .. } => {
                    waits.extend(waiting.take().map(|acquire| (acquire, event.at, None)));
                }
                What::CounterWrite { .. } if !held.contains(&event.at) => {
                    self.unheld_counter_writes.push(index);
                }
                What::Fault { fault, .. } => match fault.as_str() {
                    // A worker cut off from the store is as good as paused to it.
                    "pause" | "cut" | "black-hole" => paused_since = Some(event.at),
                    "resume" | "heal" => {
                        pauses.extend(paused_since.take().map(|since| since..event.at));
                    }
                    "kill" => {
                        if let Some(acquire) = waiting.take() {
                            self.leases_left.push(lease(acquire, event.at));
                            waits.push((acquire, event.at, None));
                        }
                    }
                    _ => {}
                },
                _ => {}
            }
        }
        if let Some(acquire) = waiting {
            self.leases_left.push(lease(acquire, last));
            waits.push((acquire, last, None));
        }
        pauses.extend(paused_since.map(|since| since..u64::MAX));
        let pauses = union(pauses.into_iter().chain(server_down.iter().cloned()));
        for (acquire, answered, granted) in waits {
            self.waits.push(Wait {
                worker: events[acquire].worker,
                acquire,
                answered,
                granted,
                running: subtract(events[acquire].at..answered, &pauses),
            });
        }
    }

    /// The hold the `Granted` event at `grant` starts, `later` being its worker's events
    /// after it. It ends at its `Release`, its `Health` lost, its worker's kill or a new
    /// `Acquire`, unless its validity (the last `safe_until` recorded) ran out before: a
    /// hold nothing ended runs to its validity. A holder killed within its validity, or
    /// whose release's outcome is unknown, may leave its lease in the store until then
    /// (one with no validity, a lease's length, `lease_length`): that span comes second.
    fn hold(
        &self,
        (grant, token, safe_until): (usize, u64, u64),
        later: &[usize],
        lease_length: Option<u64>,
    ) -> (Hold, Option<Range<u64>>) {
        let start = self.events[grant].at;
        let mut end = safe_until;
        let mut left = None;
        for (position, event) in later.iter().map(|&index| &self.events[index]).enumerate() {
            if event.at >= end {
                break;
            }
            match &event.what {
                What::Renewed { safe_until } => end = *safe_until,
                What::Release => {
                    // A release whose outcome is unknown, or that its worker's kill cut
                    // short, may have left the lease in the store until its validity.
                    let left_behind = later[position + 1..]
                        .iter()
                        .map(|&index| &self.events[index].what)
                        .take_while(|what| !matches!(what, What::Acquire))
                        .find_map(|what| match what {
                            What::Released { outcome } => Some(outcome == "unknown"),
                            What::Fault { fault, .. } if fault == "kill" => Some(true),
                            _ => None,
                        });
                    if left_behind == Some(true) {
                        left = Some(event.at..capped(end, event.at, lease_length));
                    }
                    end = event.at;
                    break;
                }
                What::Acquire => {
                    end = event.at;
                    break;
                }
                What::Health { health } if health == "lost" => {
                    end = event.at;
                    break;
                }
                What::Fault { fault, .. } if fault == "kill" => {
                    left = Some(event.at..capped(end, event.at, lease_length));
                    end = event.at;
                    break;
                }
                _ => {}
            }
        }
        let hold = Hold {
            worker: self.events[grant].worker,
            grant,
            token,
            span: start..end.max(start),
        };
        (hold, left)
    }

    /// `at` in ms from the first event, or "the end" for an unbounded end.
    pub(super) fn ms(&self, at: u64) -> String {
        match at {
            u64::MAX => "the end".to_string(),
            at => format!("{:.3} ms", at.saturating_sub(self.origin) as f64 / 1e6),
        }
    }

    /// Who held the lock in `hold`, and since when.
    pub(super) fn describe(&self, hold: &Hold) -> String {
        format!(
            "worker {} (token {}, granted at {})",
            hold.worker,
            hold.token,
            self.ms(hold.span.start)
        )
    }
}

/// When the store's server was frozen or restarting (the coordinator's server faults):
/// every worker was as good as paused.
fn server_down(events: &[Event]) -> Vec<Range<u64>> {
    let mut down = Vec::new();
    let mut since = None;
    for event in events {
        let What::Fault { fault, .. } = &event.what else {
            continue;
        };
        match fault.as_str() {
            "server-pause" | "server-restart" => since = Some(event.at),
            "server-resume" | "server-up" => down.extend(since.take().map(|s| s..event.at)),
            _ => {}
        }
    }
    down.extend(since.map(|s| s..u64::MAX));
    down
}

/// Until when a lease valid until `end`, left behind at `at`, may hold the lock: a grant
/// with no validity (`u64::MAX`: a transaction's row lock, say) at most a lease's length.
fn capped(end: u64, at: u64, lease_length: Option<u64>) -> u64 {
    match end {
        u64::MAX => lease_length.map_or(end, |lease| at.saturating_add(lease)),
        end => end,
    }
}

/// The parts of `span` outside `holes` (sorted, disjoint spans).
pub(super) fn subtract(span: Range<u64>, holes: &[Range<u64>]) -> Vec<Range<u64>> {
    let mut parts = Vec::new();
    let mut from = span.start;
    let first = holes.partition_point(|hole| hole.end <= span.start);
    for hole in holes[first..]
        .iter()
        .take_while(|hole| hole.start < span.end)
    {
        if hole.start > from {
            parts.push(from..hole.start);
        }
        from = from.max(hole.end);
    }
    if from < span.end {
        parts.push(from..span.end);
    }
    parts
}

/// The union of `spans`: sorted, disjoint, none empty, none touching another.
pub(super) fn union(spans: impl Iterator<Item = Range<u64>>) -> Vec<Range<u64>> {
    let mut spans: Vec<_> = spans.filter(|span| !span.is_empty()).collect();
    spans.sort_by_key(|span| span.start);
    let mut merged: Vec<Range<u64>> = Vec::with_capacity(spans.len());
    for span in spans {
        match merged.last_mut() {
            Some(last) if span.start <= last.end => last.end = last.end.max(span.end),
            _ => merged.push(span),
        }
    }
    merged
}
