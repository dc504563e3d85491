//! The checker on hand-made histories of elections and jobs.

use super::*;

/// Sets the history's scheme, and for a job (`job`: its `at_least` in ms, and whether its
/// store keeps a grant past its holder) says so after the `Start`.
fn start_as(history: &mut History, named: &str, job: Option<(u64, bool)>) {
    if let What::Start { scheme, .. } = &mut history.events[0].what {
        *scheme = named.into();
    }
    history
        .events
        .retain(|event| !matches!(event.what, What::JobRuns { .. }));
    if let Some((ms, detachable)) = job {
        let at = history.events[0].at;
        let what = What::JobRuns {
            at_least: ms * MS,
            detachable,
        };
        history.events.insert(
            1,
            Event {
                at,
                worker: 0,
                what,
            },
        );
    }
}

#[test]
fn an_elections_overlaps_and_late_writes_are_two_leaders_and_stale_leader_writes() {
    let mut history = History::new();
    start_as(&mut history, "election", None);
    history.granted(10, 1, 5, 200);
    history.granted(20, 2, 6, 200);
    history.write(30, 2, 6, true);
    history.write(40, 1, 5, true);
    let verdict = history.check();
    let found = kinds(&verdict);
    assert!(found.contains(&Kind::TwoLeaders), "{found:?}");
    assert!(found.contains(&Kind::StaleLeaderWrite), "{found:?}");
    assert!(
        !found.contains(&Kind::Overlap),
        "said as an election's: {found:?}"
    );
    assert!(verdict.violations[0].message.starts_with("two leaders: "));

    let mut terms = History::new();
    start_as(&mut terms, "election", None);
    terms.turn(10, 1, 5, 1);
    terms.turn(20, 2, 4, 2);
    assert!(kinds(&terms.check()).contains(&Kind::TermOrder));
}

#[test]
fn a_job_run_sooner_than_at_least_after_a_kept_run_is_too_soon() {
    let mut history = History::new();
    start_as(&mut history, "job", Some((50, true)));
    history.granted(10, 1, 1, 110);
    history.add(12, 1, What::Release);
    history.released(13, 1, "kept");
    history.granted(40, 2, 2, 140);
    history.add(42, 2, What::Release);
    history.released(43, 2, "kept");
    history.granted(95, 3, 3, 195);
    let verdict = history.check();
    assert_eq!(
        kinds(&verdict),
        [Kind::JobTooSoon],
        "{:#?}",
        verdict.violations
    );
    assert_eq!(verdict.violations[0].events, [2, 5]);
}

#[test]
fn a_job_run_after_a_run_that_was_not_kept_or_whose_keeper_died_is_no_violation() {
    // The first run's release failed: nothing was kept.
    let mut history = History::new();
    start_as(&mut history, "job", Some((50, false)));
    history.granted(10, 1, 1, 110);
    history.add(12, 1, What::Release);
    history.released(13, 1, "fail");
    history.granted(20, 2, 2, 120);
    history.add(22, 2, What::Release);
    history.released(23, 2, "kept");
    // The second was kept by its process, which was killed: a session store lets go.
    history.fault(30, 2, "kill");
    history.granted(40, 3, 3, 140);
    assert_eq!(kinds(&history.check()), []);

    // On a store that keeps grants past their holders, the kill changes nothing.
    start_as(&mut history, "job", Some((50, true)));
    assert_eq!(kinds(&history.check()), [Kind::JobTooSoon]);
}

#[test]
fn a_body_entered_within_once_per_of_a_successful_runs_grant_is_too_soon() {
    let mut history = History::new();
    start_as(&mut history, "job", Some((5, true)));
    let at = history.events[0].at;
    let once_per = Event {
        at,
        worker: 0,
        what: What::OncePer { span: 100 * MS },
    };
    history.events.insert(2, once_per);
    // A run that succeeded.
    history.granted(10, 1, 1, 110);
    history.add(11, 1, What::Enter);
    history.add(14, 1, What::Exit);
    history.add(15, 1, What::Release);
    history.released(16, 1, "kept");
    // A grant found too soon: no run.
    history.add(30, 2, What::Acquire);
    let error = "skipped: too soon".to_owned();
    history.add(31, 2, What::AcquireFailed { error });
    assert_eq!(kinds(&history.check()), [], "a skipped grant is no run");
    // A run whose body entered 60 ms after the successful run's grant.
    let grant = history.events.len();
    history.granted(68, 3, 3, 168);
    history.add(70, 3, What::Enter);
    let verdict = history.check();
    assert_eq!(
        kinds(&verdict),
        [Kind::JobTooSoon],
        "{:#?}",
        verdict.violations
    );
    assert_eq!(verdict.violations[0].events[1], grant);
    assert!(verdict.violations[0].message.contains("once_per"));

    // After a run that did not succeed (no exit), nothing is spaced.
    let mut failed = History::new();
    start_as(&mut failed, "job", Some((5, true)));
    failed.events.insert(
        2,
        Event {
            at,
            worker: 0,
            what: What::OncePer { span: 100 * MS },
        },
    );
    failed.granted(10, 1, 1, 110);
    failed.add(11, 1, What::Enter);
    failed.add(15, 1, What::Release);
    failed.released(16, 1, "fail");
    failed.granted(30, 2, 2, 130);
    failed.add(31, 2, What::Enter);
    assert_eq!(kinds(&failed.check()), []);
}

#[test]
fn a_senders_write_after_the_adoption_and_an_offer_nobody_took_are_adopt_violations() {
    let mut history = History::new();
    history.granted(10, 1, 1, 200);
    history.add(12, 1, What::Release);
    let deadline = T0 + 60 * MS;
    history.add(13, 1, What::Offered { deadline });
    history.add(14, 2, What::Acquire);
    history.granted(20, 2, 2, 300);
    history.write(25, 1, 1, true);
    history.released(30, 1, "handed");
    let verdict = history.check();
    assert!(
        kinds(&verdict).contains(&Kind::Adopt),
        "{:#?}",
        verdict.violations
    );

    let mut lapsed = History::new();
    lapsed.granted(10, 1, 1, 200);
    lapsed.add(12, 1, What::Release);
    lapsed.add(13, 1, What::Offered { deadline });
    lapsed.add(14, 2, What::Acquire);
    lapsed.released(70, 1, "released");
    lapsed.granted(400, 2, 2, 500);
    let found = kinds(&lapsed.check());
    assert!(found.contains(&Kind::Adopt), "{found:?}");

    let mut clean = History::new();
    clean.granted(10, 1, 1, 200);
    clean.add(12, 1, What::Release);
    clean.add(13, 1, What::Offered { deadline });
    clean.add(14, 2, What::Acquire);
    clean.granted(20, 2, 2, 300);
    clean.write(25, 2, 2, true);
    clean.released(30, 1, "handed");
    assert_eq!(kinds(&clean.check()), []);
}
