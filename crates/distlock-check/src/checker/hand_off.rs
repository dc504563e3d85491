//! Hand-offs: once a worker offered its grant (`Offered`), no write of its is accepted
//! after another worker was granted the lock, and the lock is granted again by the
//! offer's deadline (plus the liveness limit) while a worker waits.

use crate::history::What;

use super::timeline::Timeline;
use super::{Kind, Limits, Verdict, Violation, duration};

/// (h) Each offer against what followed it.
pub(super) fn check_hand_offs(timeline: &Timeline, limits: &Limits, verdict: &mut Verdict) {
    let events = timeline.events;
    for (offered, event) in events.iter().enumerate() {
        let What::Offered { deadline } = event.what else {
            continue;
        };
        let sender = event.worker;
        let later = || events.iter().enumerate().skip(offered + 1);
        let taken =
            later().find(|(_, e)| e.worker != sender && matches!(e.what, What::Granted { .. }));
        if let Some((taken, by)) = taken {
            // The sender acts no more until it is granted the lock again.
            let late_write = later()
                .skip_while(|(at, _)| *at <= taken)
                .take_while(|(_, e)| {
                    !(e.worker == sender && matches!(e.what, What::Granted { .. }))
                })
                .find(|(_, e)| {
                    e.worker == sender && matches!(e.what, What::Write { accepted: true, .. })
                });
            if let Some((write, _)) = late_write {
                verdict.violations.push(Violation {
                    kind: Kind::Adopt,
                    message: format!(
                        "worker {sender} offered its grant at {}, worker {} was granted the lock at {}, and the resource still accepted worker {sender}'s write at {}",
                        timeline.ms(event.at),
                        by.worker,
                        timeline.ms(by.at),
                        timeline.ms(events[write].at)
                    ),
                    events: vec![offered, taken, write],
                    span: [by.at, events[write].at],
                });
            }
        }
        let granted_by = taken.map_or(u64::MAX, |(_, by)| by.at);
        let bound = deadline.saturating_add(limits.liveness);
        let waited = timeline
            .waits
            .iter()
            .any(|wait| events[wait.acquire].at <= bound && wait.answered > bound);
        if granted_by > bound && waited {
            verdict.violations.push(Violation {
                kind: Kind::Adopt,
                message: format!(
                    "worker {sender} offered its grant at {} until {}, and nobody was granted the lock in the {} after while a worker waited",
                    timeline.ms(event.at),
                    timeline.ms(deadline),
                    duration(limits.liveness)
                ),
                events: vec![offered],
                span: [event.at, bound],
            });
        }
    }
}
