//! A job's runs: a run that kept its lock for `at_least` after its grant (its release
//! said `kept`) is followed by no grant sooner than that; with `once_per`, a run that
//! succeeded is followed by no run's body sooner than that after its grant.

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

/// (j) For a history of a job's runs spaced by `once_per`: every run whose body started
/// (its `Enter`) sooner than `once_per` after the grant of a run that succeeded (and whose
/// worker was not faulted, nor its grant at risk, before its release: its success may not
/// have been recorded). The store
/// stamps a run's start after its grant and checks the window before the body, so a body
/// that entered that soon was certainly let in too soon, whatever the store's clock.
pub(super) fn check_once_per(timeline: &Timeline, verdict: &mut Verdict) {
    let events = timeline.events;
    let Some(once_per) = events.iter().find_map(|event| match event.what {
        What::OncePer { span } => Some(span),
        _ => None,
    }) else {
        return;
    };
    // A run whose worker was cut off from the store, or whose grant was at risk, before its
    // release may have failed to write its success: the store then keeps no window.
    let succeeded = timeline.holds.iter().filter(|hold| {
        let own = own_events(events, hold).collect::<Vec<_>>();
        let Some(released) = own
            .iter()
            .find(|event| matches!(&event.what, What::Released { outcome } if outcome == KEPT))
        else {
            return false;
        };
        let shaken = own
            .iter()
            .any(|event| matches!(&event.what, What::Health { health } if health != "held"));
        own.iter().any(|event| matches!(event.what, What::Exit))
            && !shaken
            && !faulted(events, hold.worker, events[hold.grant].at..released.at)
    });
    for done in succeeded {
        let granted = events[done.grant].at;
        let window = granted..granted.saturating_add(once_per);
        for next in timeline.holds.iter().filter(|next| next.grant > done.grant) {
            let entered = own_events(events, next).find(|event| matches!(event.what, What::Enter));
            let Some(entered) = entered.filter(|event| window.contains(&event.at)) else {
                continue;
            };
            verdict.violations.push(Violation {
                kind: Kind::JobTooSoon,
                message: format!(
                    "{} ran its body {} after the grant of {}, whose run succeeded, within once_per {}",
                    timeline.describe(next),
                    duration(entered.at - granted),
                    timeline.describe(done),
                    duration(once_per)
                ),
                events: vec![done.grant, next.grant],
                span: [granted, entered.at],
            });
        }
    }
}

/// What `hold`'s worker recorded from its grant to its next acquire.
fn own_events<'a>(events: &'a [Event], hold: &Hold) -> impl Iterator<Item = &'a Event> {
    let worker = hold.worker;
    events[hold.grant + 1..]
        .iter()
        .filter(move |event| event.worker == worker)
        .take_while(|event| !matches!(event.what, What::Acquire | What::Granted { .. }))
}

/// Whether `hold`'s release said its lock was kept for `at_least`.
fn was_kept(events: &[Event], hold: &Hold) -> bool {
    own_events(events, hold)
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
