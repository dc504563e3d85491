//! A job's runs: a run that kept its lock for `at_least` after its grant (its release
//! said `kept`) is followed by no grant sooner than that.

use crate::history::{Event, What};

use super::timeline::{Hold, Timeline};
use super::{Kind, Verdict, Violation, duration};

/// The outcome a job's worker records when its run's lock was kept for `at_least`.
pub(super) const KEPT: &str = "kept";

/// (j) For a history of a job's runs: every grant that came sooner than `at_least` after
/// a kept run's grant, unless the store could not keep it (a session store whose holder
/// was killed or paused before the span ended).
pub(super) fn check_too_soon(timeline: &Timeline, verdict: &mut Verdict) {
    let events = timeline.events;
    let Some((at_least, detachable)) = events.iter().find_map(|event| match event.what {
        What::JobRuns {
            at_least,
            detachable,
        } => Some((at_least, detachable)),
        _ => None,
    }) else {
        return;
    };
    for kept in timeline.holds.iter().filter(|hold| was_kept(events, hold)) {
        let granted = events[kept.grant].at;
        let ends = granted.saturating_add(at_least);
        if !detachable && faulted(events, kept.worker, granted..ends) {
            continue;
        }
        let too_soon = timeline
            .holds
            .iter()
            .filter(|next| next.grant != kept.grant)
            .filter(|next| (granted + 1..ends).contains(&events[next.grant].at));
        for next in too_soon {
            let at = events[next.grant].at;
            verdict.violations.push(Violation {
                kind: Kind::JobTooSoon,
                message: format!(
                    "{} ran {} after {}, whose run kept the lock for at_least {}",
                    timeline.describe(next),
                    duration(at - granted),
                    timeline.describe(kept),
                    duration(at_least)
                ),
                events: vec![kept.grant, next.grant],
                span: [granted, at],
            });
        }
    }
}

/// Whether `hold`'s release said its lock was kept for `at_least`.
fn was_kept(events: &[Event], hold: &Hold) -> bool {
    events[hold.grant + 1..]
        .iter()
        .filter(|event| event.worker == hold.worker)
        .take_while(|event| !matches!(event.what, What::Acquire | What::Granted { .. }))
        .any(|event| matches!(&event.what, What::Released { outcome } if outcome == KEPT))
}

/// Whether `worker` was killed, paused or cut off from the store within `span`.
fn faulted(events: &[Event], worker: u32, span: std::ops::Range<u64>) -> bool {
    events.iter().any(|event| {
        event.worker == worker
            && span.contains(&event.at)
            && matches!(&event.what, What::Fault { fault, .. }
                if matches!(fault.as_str(), "kill" | "pause" | "cut" | "black-hole"))
    })
}
