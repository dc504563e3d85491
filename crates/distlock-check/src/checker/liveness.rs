//! The liveness checks: the lock left free while workers waited, grants out of FIFO order
//! when the run asked for fair ones, and the workers that waited too long.

use super::timeline::{Timeline, Wait, subtract, union};
use super::{Kind, Limits, Verdict, Violation, duration};
use crate::history::What;

/// (f) The lock free (no hold, no lease a dead worker may have left) while a worker waited
/// (its pauses left out) longer than the limit.
pub(super) fn check_free_waits(timeline: &Timeline, limits: &Limits, verdict: &mut Verdict) {
    let held = union(
        timeline
            .holds
            .iter()
            .map(|hold| hold.span.clone())
            .chain(timeline.leases_left.iter().cloned()),
    );
    let waited = union(
        timeline
            .waits
            .iter()
            .flat_map(|wait| wait.running.iter().cloned()),
    );
    let stats = &mut verdict.stats;
    for gap in waited.into_iter().flat_map(|span| subtract(span, &held)) {
        let length = gap.end - gap.start;
        if length > stats.longest_free_wait_ns {
            (stats.longest_free_wait_ns, stats.longest_free_wait_at) = (length, gap.start);
        }
        if length <= limits.liveness {
            continue;
        }
        let ending_grant = timeline
            .holds
            .iter()
            .find(|hold| hold.span.start == gap.end && !hold.span.is_empty());
        let waits: Vec<&Wait> = timeline
            .waits
            .iter()
            .filter(|wait| {
                wait.running
                    .iter()
                    .any(|span| span.start < gap.end && gap.start < span.end)
            })
            .collect();
        let mut waiters: Vec<String> = waits.iter().map(|wait| wait.worker.to_string()).collect();
        waiters.dedup();
        let mut involved: Vec<usize> = waits.iter().map(|wait| wait.acquire).collect();
        involved.extend(ending_grant.map(|hold| hold.grant));
        involved.sort_unstable();
        verdict.violations.push(Violation {
            kind: Kind::Liveness,
            message: format!(
                "the lock sat free for {} from {} to {} while worker{} {} waited (limit {})",
                duration(length),
                timeline.ms(gap.start),
                timeline.ms(gap.end),
                if waiters.len() == 1 { "" } else { "s" },
                waiters.join(", "),
                duration(limits.liveness),
            ),
            events: involved,
            span: [gap.start, gap.end],
        });
    }
}

/// How much earlier one request must have been recorded than another for a fair lock to
/// owe it the grant first: a request reaches the store some time after its worker records
/// it (a session backend opens a connection for it; a loaded machine schedules it late),
/// so two asked within this of each other may be queued either way.
const FIFO_SLACK: u64 = 500_000_000;

/// (f) FIFO, when the run asked for fair grants: each grant must go to a worker that asked
/// no later than every other still waiting, give or take [`FIFO_SLACK`]. A wait its
/// worker was paused in is left out on both sides (a paused waiter may lose its place).
pub(super) fn check_fifo(timeline: &Timeline, verdict: &mut Verdict) {
    let events = timeline.events;
    let fair = events
        .iter()
        .any(|event| matches!(event.what, What::Start { fair: true, .. }));
    if !fair {
        return;
    }
    let asked = |wait: &Wait| events[wait.acquire].at;
    let mut steady: Vec<&Wait> = timeline
        .waits
        .iter()
        .filter(|wait| !wait.paused(asked(wait)))
        .collect();
    steady.sort_by_key(|wait| asked(wait));
    let mut granted: Vec<&Wait> = steady
        .iter()
        .copied()
        .filter(|wait| wait.granted.is_some())
        .collect();
    granted.sort_by_key(|wait| wait.answered);
    // Sweep the grants in time order, with the waits asked before each and not yet
    // answered, oldest first.
    let mut waiting: std::collections::BTreeSet<(u64, usize)> = std::collections::BTreeSet::new();
    let mut by_answer: Vec<&Wait> = steady.clone();
    by_answer.sort_by_key(|wait| wait.answered);
    let (mut next_asked, mut next_answered) = (0, 0);
    for wait in granted {
        let (grant, at) = (wait.granted.unwrap_or(wait.acquire), wait.answered);
        while next_asked < steady.len() && asked(steady[next_asked]) < at {
            let other = steady[next_asked];
            // One answered by now is no longer waiting, and later grants come later still.
            if other.answered > at {
                waiting.insert((asked(other), other.acquire));
            }
            next_asked += 1;
        }
        while next_answered < by_answer.len() && by_answer[next_answered].answered <= at {
            let other = by_answer[next_answered];
            waiting.remove(&(asked(other), other.acquire));
            next_answered += 1;
        }
        let Some(&(oldest, oldest_acquire)) = waiting.first() else {
            continue;
        };
        if oldest.saturating_add(FIFO_SLACK) >= asked(wait) {
            continue;
        }
        let first = &events[oldest_acquire];
        verdict.violations.push(Violation {
            kind: Kind::Fifo,
            message: format!(
                "worker {} asked at {} and was granted at {}, before worker {} who had asked at \
                 {} and still waited: out of FIFO order",
                events[grant].worker,
                timeline.ms(asked(wait)),
                timeline.ms(at),
                first.worker,
                timeline.ms(oldest),
            ),
            events: vec![oldest_acquire, wait.acquire, grant],
            span: [asked(wait), at],
        });
    }
}

/// (f) Workers whose acquire waited (while they ran) longer than the limit: a measure, not
/// a violation (a correct lock under load, many workers or long holds, keeps some waiting
/// long while it changes hands); the lock sitting free while they wait is the violation.
pub(super) fn count_starved(timeline: &Timeline, limits: &Limits, verdict: &mut Verdict) {
    let mut starved: Vec<u32> = timeline
        .waits
        .iter()
        .filter(|wait| wait.waited() > limits.liveness)
        .map(|wait| wait.worker)
        .collect();
    starved.sort_unstable();
    starved.dedup();
    verdict.stats.starved_workers = starved;
}
