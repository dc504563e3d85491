//! The checker on hand-made histories.

use super::*;

mod schemes;

const MS: u64 = 1_000_000;
/// The clock's reading when each test history starts.
const T0: u64 = 7_000 * MS;
const TTL_MS: u64 = 100;
const LIMITS: Limits = Limits { liveness: 100 * MS };

/// A history written in order of time, times in ms from its start.
struct History {
    events: Vec<Event>,
}

/// The events of one uneventful critical section.
struct Turn {
    grant: usize,
    resource_write: usize,
}

impl History {
    /// A history that starts with the coordinator's `Start`: leases of `TTL_MS`.
    fn new() -> History {
        let mut history = History { events: Vec::new() };
        history.add(
            0,
            0,
            What::Start {
                ttl: TTL_MS * MS,
                workers: 3,
                scheme: "test".into(),
                backend: "memory".into(),
                fair: false,
            },
        );
        history
    }

    /// Appends `what` of `worker` at `ms`: its index.
    fn add(&mut self, ms: u64, worker: u32, what: What) -> usize {
        let at = T0 + ms * MS;
        assert!(self.events.last().is_none_or(|last| last.at <= at));
        self.events.push(Event { at, worker, what });
        self.events.len() - 1
    }

    fn granted(&mut self, ms: u64, worker: u32, token: u64, safe_until_ms: u64) -> usize {
        let safe_until = T0 + safe_until_ms * MS;
        self.add(ms, worker, What::Granted { token, safe_until })
    }

    fn fault(&mut self, ms: u64, worker: u32, fault: &str) -> usize {
        let fault = fault.into();
        self.add(ms, worker, What::Fault { fault, step: None })
    }

    fn health(&mut self, ms: u64, worker: u32, health: &str) -> usize {
        let health = health.into();
        self.add(ms, worker, What::Health { health })
    }

    fn write(&mut self, ms: u64, worker: u32, token: u64, accepted: bool) -> usize {
        self.add(ms, worker, What::Write { token, accepted })
    }

    fn released(&mut self, ms: u64, worker: u32, outcome: &str) -> usize {
        let outcome = outcome.into();
        self.add(ms, worker, What::Released { outcome })
    }

    /// From `ms` to `ms + 7`: `worker` granted `token` for a TTL, its critical section
    /// raising the counter to `counter`, its write to the resource accepted, its release.
    fn turn(&mut self, ms: u64, worker: u32, token: u64, counter: u64) -> Turn {
        let grant = self.granted(ms, worker, token, ms + TTL_MS);
        self.add(ms + 1, worker, What::Enter);
        let value = counter - 1;
        self.add(ms + 2, worker, What::CounterRead { value });
        self.add(ms + 3, worker, What::CounterWrite { value: counter });
        let resource_write = self.write(ms + 4, worker, token, true);
        self.add(ms + 5, worker, What::Exit);
        self.add(ms + 6, worker, What::Release);
        self.released(ms + 7, worker, "ok");
        Turn {
            grant,
            resource_write,
        }
    }

    fn check(&self) -> Verdict {
        check(&self.events, &LIMITS)
    }
}

fn kinds(verdict: &Verdict) -> Vec<Kind> {
    verdict.violations.iter().map(|v| v.kind).collect()
}

#[test]
fn three_workers_taking_turns_are_clean() {
    let mut history = History::new();
    for worker in 1..=3 {
        history.add(worker.into(), worker, What::Acquire);
    }
    history.turn(10, 1, 1, 1);
    history.turn(20, 2, 2, 2);
    history.turn(30, 3, 3, 3);
    let verdict = history.check();
    assert_eq!(kinds(&verdict), []);
    let stats = verdict.stats;
    assert_eq!((stats.acquisitions, stats.transfers), (3, 2));
    assert_eq!((stats.writes_accepted, stats.stale_writes_refused), (3, 0));
    assert_eq!((stats.critical_sections, stats.counter_final), (3, 3));
    assert_eq!((stats.lost_updates, stats.stale_unfenced_writes), (0, 0));
    // Worker 1 asked at 1 ms, with the lock free until its grant at 10 ms.
    assert_eq!(stats.longest_free_wait_ns, 9 * MS);
    assert_eq!(stats.longest_free_wait_at, T0 + MS);
    assert!(stats.starved_workers.is_empty());
    assert_eq!(
        stats.grants_per_worker,
        BTreeMap::from([(1, 1), (2, 1), (3, 1)])
    );
    assert_eq!(stats.faults, 0);
}

#[test]
fn overlapping_holds_are_an_overlap() {
    let mut history = History::new();
    history.add(1, 1, What::Acquire);
    let first = history.granted(2, 1, 1, 102);
    history.add(3, 2, What::Acquire);
    let second = history.granted(50, 2, 2, 150);
    history.add(60, 1, What::Release);
    history.add(70, 2, What::Release);
    let verdict = history.check();
    assert_eq!(kinds(&verdict), [Kind::Overlap]);
    assert_eq!(verdict.violations[0].events, [first, second]);
    assert_eq!(
        verdict.violations[0].message,
        "worker 1 (token 1, granted at 2.000 ms) and worker 2 (token 2, granted at 50.000 ms) \
         held the lock at once from 50.000 ms to 60.000 ms"
    );
}

#[test]
fn an_overlap_names_the_store_fault_struck_while_the_first_held() {
    let fault = |name: &str| What::Fault {
        fault: name.into(),
        step: None,
    };
    let mut history = History::new();
    history.add(1, 0, fault("server-pause"));
    history.granted(2, 1, 1, 102);
    history.add(10, 0, fault("master-aside 0"));
    history.add(20, 0, fault("master-restart 1"));
    history.add(25, 0, fault("master-back"));
    history.add(30, 3, fault("pause"));
    history.granted(50, 2, 2, 150);
    let verdict = history.check();
    assert_eq!(kinds(&verdict), [Kind::Overlap]);
    assert!(
        verdict.violations[0]
            .message
            .ends_with(", after master-restart 1 at 20.000 ms"),
        "{}",
        verdict.violations[0].message
    );

    let mut before = History::new();
    before.add(1, 0, fault("server-pause"));
    before.granted(2, 1, 1, 102);
    before.granted(50, 2, 2, 150);
    let message = &before.check().violations[0].message;
    assert!(message.ends_with("to 102.000 ms"), "{message}");
}

#[test]
fn renewals_extend_a_hold_and_a_loss_ends_it() {
    let mut renewed = History::new();
    let first = renewed.granted(1, 1, 1, 50);
    renewed.add(
        40,
        1,
        What::Renewed {
            safe_until: T0 + 140 * MS,
        },
    );
    let second = renewed.granted(100, 2, 2, 200);
    let verdict = renewed.check();
    assert_eq!(kinds(&verdict), [Kind::Overlap]);
    assert_eq!(verdict.violations[0].events, [first, second]);

    // A renewal recorded after the validity ran out revives nothing.
    let mut renewed_late = History::new();
    renewed_late.granted(1, 1, 1, 50);
    renewed_late.add(
        60,
        1,
        What::Renewed {
            safe_until: T0 + 160 * MS,
        },
    );
    renewed_late.granted(70, 2, 2, 170);
    assert_eq!(kinds(&renewed_late.check()), []);

    let mut lost = History::new();
    lost.granted(1, 1, 1, 1_000);
    lost.health(10, 1, "at-risk");
    lost.health(20, 1, "lost");
    lost.granted(30, 2, 2, 130);
    assert_eq!(kinds(&lost.check()), []);
}

/// Worker 1 granted at 2 ms until 92 ms reads the counter, then is paused until 200 ms;
/// worker 2, waiting since 6 ms, takes its turn from 100 ms. Worker 1's grant and worker
/// 2's turn.
fn paused_holder() -> (History, usize, Turn) {
    let mut history = History::new();
    history.add(1, 1, What::Acquire);
    let grant = history.granted(2, 1, 1, 92);
    history.add(3, 1, What::Enter);
    history.add(4, 1, What::CounterRead { value: 0 });
    history.fault(5, 1, "pause");
    history.add(6, 2, What::Acquire);
    let turn = history.turn(100, 2, 2, 1);
    history.fault(200, 1, "resume");
    (history, grant, turn)
}

#[test]
fn a_paused_holder_that_abandons_is_clean() {
    let (mut history, _, _) = paused_holder();
    history.health(201, 1, "lost");
    history.add(202, 1, What::Abandon);
    history.add(203, 1, What::Release);
    history.released(204, 1, "fail");
    let verdict = history.check();
    assert_eq!(kinds(&verdict), []);
    let stats = verdict.stats;
    assert_eq!(
        (stats.critical_sections, stats.stale_unfenced_writes),
        (1, 0)
    );
    assert_eq!(stats.faults, 2);
    // Worker 1's hold ended at its validity, 92 ms; worker 2 was granted at 100 ms.
    assert_eq!(stats.longest_free_wait_ns, 8 * MS);
    assert_eq!(stats.longest_free_wait_at, T0 + 92 * MS);
}

#[test]
fn a_paused_holder_that_writes_is_stopped_by_fencing() {
    let (mut history, _, _) = paused_holder();
    history.add(201, 1, What::CounterWrite { value: 1 });
    history.health(202, 1, "lost");
    history.write(203, 1, 1, false);
    history.add(204, 1, What::Exit);
    history.add(205, 1, What::Release);
    history.released(206, 1, "fail");
    let verdict = history.check();
    assert_eq!(kinds(&verdict), []);
    let stats = verdict.stats;
    assert_eq!(stats.stale_unfenced_writes, 1);
    assert_eq!((stats.critical_sections, stats.counter_final), (2, 1));
    assert_eq!(stats.lost_updates, 1);
    assert_eq!((stats.writes_accepted, stats.stale_writes_refused), (1, 1));
}

#[test]
fn without_fencing_the_paused_holders_write_goes_through() {
    let (mut history, grant, turn) = paused_holder();
    history.add(201, 1, What::CounterWrite { value: 1 });
    let stale = history.write(203, 1, 1, true);
    history.add(204, 1, What::Exit);
    history.add(205, 1, What::Release);
    let verdict = history.check();
    assert_eq!(kinds(&verdict), [Kind::StaleWriteAccepted, Kind::LateLoss]);
    assert_eq!(verdict.violations[0].events, [turn.resource_write, stale]);
    assert_eq!(
        verdict.violations[1].events,
        [grant, turn.grant, turn.resource_write, stale]
    );
    assert_eq!(
        verdict.violations[1].message,
        "worker 1 granted at 2.000 ms had its write with token 1 accepted at 203.000 ms, after \
         worker 2 granted at 100.000 ms had written at 104.000 ms: it had lost the lock"
    );
    let stats = verdict.stats;
    assert_eq!((stats.writes_accepted, stats.stale_writes_refused), (2, 0));
    assert_eq!(stats.stale_unfenced_writes, 1);
}

#[test]
fn a_write_recorded_after_a_read_that_saw_it_loses_nothing() {
    let mut history = History::new();
    // Worker 2 updates the counter to 1 in the store; worker 1 reads 1 from it and
    // records that first; worker 2 records its write after.
    history.add(1, 1, What::Acquire);
    history.add(2, 1, What::CounterRead { value: 1 });
    history.granted(3, 2, 1, 4);
    history.add(3, 2, What::CounterWrite { value: 1 });
    history.granted(10, 1, 2, 11);
    history.add(10, 1, What::CounterWrite { value: 2 });
    let verdict = history.check();
    assert_eq!(kinds(&verdict), []);
    assert_eq!(
        (verdict.stats.lost_updates, verdict.stats.counter_final),
        (0, 2)
    );
}

#[test]
fn writes_without_tokens_are_judged_by_their_grants() {
    let mut history = History::new();
    history.add(1, 1, What::Acquire);
    let grant = history.granted(2, 1, 0, 92);
    history.fault(5, 1, "pause");
    history.add(6, 2, What::Acquire);
    let turn = history.turn(100, 2, 0, 1);
    history.fault(200, 1, "resume");
    let stale = history.write(203, 1, 0, true);
    let verdict = history.check();
    // Token 0 after token 0 is no stale token: the write is late by its grant alone.
    assert_eq!(kinds(&verdict), [Kind::LateLoss]);
    assert_eq!(
        verdict.violations[0].events,
        [grant, turn.grant, turn.resource_write, stale]
    );
    assert_eq!(verdict.stats.writes_accepted, 2);
}

#[test]
fn stale_writes_before_the_new_holders_writes_are_no_violation() {
    let mut history = History::new();
    history.granted(1, 1, 1, 91);
    history.add(2, 1, What::CounterRead { value: 0 });
    history.fault(3, 1, "pause");
    history.add(4, 2, What::Acquire);
    history.granted(100, 2, 2, 200);
    history.add(101, 2, What::CounterRead { value: 0 });
    history.fault(150, 1, "resume");
    // Worker 1's stale writes come between worker 2's read and its writes.
    history.add(151, 1, What::CounterWrite { value: 1 });
    history.write(152, 1, 1, true);
    history.health(153, 1, "lost");
    history.add(154, 1, What::Release);
    history.add(160, 2, What::CounterWrite { value: 1 });
    history.write(161, 2, 2, true);
    history.add(162, 2, What::Release);
    let verdict = history.check();
    assert_eq!(kinds(&verdict), []);
    let stats = verdict.stats;
    assert_eq!(stats.stale_unfenced_writes, 1);
    assert_eq!((stats.critical_sections, stats.lost_updates), (2, 1));
    assert_eq!(stats.writes_accepted, 2);
}

#[test]
fn interleaved_critical_sections_of_valid_holders_lose_an_update() {
    let mut history = History::new();
    history.granted(1, 1, 1, 101);
    history.granted(2, 2, 2, 102);
    let read = history.add(10, 1, What::CounterRead { value: 0 });
    history.add(11, 2, What::CounterRead { value: 0 });
    let overwritten = history.add(12, 2, What::CounterWrite { value: 1 });
    let write = history.add(13, 1, What::CounterWrite { value: 1 });
    history.add(20, 2, What::Release);
    history.add(21, 1, What::Release);
    let verdict = history.check();
    assert_eq!(kinds(&verdict), [Kind::Overlap, Kind::LostUpdate]);
    assert_eq!(verdict.violations[1].events, [read, overwritten, write]);
    let stats = verdict.stats;
    assert_eq!((stats.critical_sections, stats.counter_final), (2, 1));
    assert_eq!((stats.lost_updates, stats.stale_unfenced_writes), (1, 0));
}

#[test]
fn tokens_must_increase_in_grant_order() {
    let mut history = History::new();
    let highest = history.granted(10, 1, 5, 110);
    history.add(15, 1, What::Release);
    let lower = history.granted(20, 2, 3, 120);
    history.add(25, 2, What::Release);
    let also_lower = history.granted(30, 3, 4, 130);
    history.add(35, 3, What::Release);
    // Recorded after its validity (its worker paused in between): left out.
    history.granted(40, 1, 1, 38);
    history.add(45, 1, What::Release);
    history.granted(50, 2, 6, 150);
    let verdict = history.check();
    assert_eq!(kinds(&verdict), [Kind::TokenOrder, Kind::TokenOrder]);
    assert_eq!(verdict.violations[0].events, [highest, lower]);
    assert_eq!(verdict.violations[1].events, [highest, also_lower]);
    assert_eq!(
        (verdict.stats.acquisitions, verdict.stats.transfers),
        (5, 4)
    );
}

#[test]
fn tokens_all_zero_are_not_checked() {
    let mut history = History::new();
    for (worker, ms) in [(1, 10), (2, 20), (3, 30)] {
        history.granted(ms, worker, 0, ms + TTL_MS);
        history.add(ms + 5, worker, What::Release);
    }
    let verdict = history.check();
    assert_eq!(kinds(&verdict), []);
    assert_eq!(verdict.stats.acquisitions, 3);
}

#[test]
fn an_unknown_acquire_keeps_the_lock_from_counting_free_for_a_ttl() {
    // Worker 1 is killed before its acquire was answered: it never acted under the lock,
    // so a grant within its TTL is no overlap, but the lock may have sat under its lease.
    let mut within = History::new();
    within.add(1, 1, What::Acquire);
    within.add(2, 2, What::Acquire);
    within.fault(5, 1, "kill");
    within.granted(50, 2, 1, 150);
    within.add(60, 2, What::Release);
    let verdict = within.check();
    assert_eq!(kinds(&verdict), []);
    assert_eq!(verdict.stats.longest_free_wait_ns, 0);

    // It may have been granted just before its kill at 5 ms: its lease (100 ms, the
    // longest validity granted) ran out at 105 ms; the lock was free until 250 ms.
    let mut after = History::new();
    let acquire = after.add(1, 1, What::Acquire);
    let waiter = after.add(2, 2, What::Acquire);
    after.fault(5, 1, "kill");
    let grant = after.granted(250, 2, 1, 350);
    after.add(260, 2, What::Release);
    let verdict = after.check();
    assert_eq!(kinds(&verdict), [Kind::Liveness]);
    assert_eq!(verdict.violations[0].events, [waiter, grant]);
    assert_eq!(verdict.stats.longest_free_wait_ns, 145 * MS);
    assert_eq!(verdict.stats.longest_free_wait_at, T0 + 105 * MS);
    assert_eq!(verdict.stats.starved_workers, [2]);
    assert!(
        !verdict
            .violations
            .iter()
            .any(|v| v.events.contains(&acquire))
    );
}

#[test]
fn a_lock_free_while_a_worker_waits_is_a_liveness_failure() {
    let mut history = History::new();
    history.granted(1, 1, 1, 101);
    let acquire = history.add(5, 2, What::Acquire);
    history.add(10, 1, What::Release);
    let grant = history.granted(300, 2, 2, 400);
    history.add(310, 2, What::Release);
    let verdict = history.check();
    // A wait over the limit is counted; the lock free meanwhile is the violation.
    assert_eq!(kinds(&verdict), [Kind::Liveness]);
    let gap = &verdict.violations[0];
    assert_eq!(gap.events, [acquire, grant]);
    assert_eq!(
        gap.message,
        "the lock sat free for 290.000 ms from 10.000 ms to 300.000 ms while worker 2 waited \
         (limit 100.000 ms)"
    );
    assert_eq!(verdict.stats.longest_free_wait_ns, 290 * MS);
    assert_eq!(verdict.stats.longest_free_wait_at, T0 + 10 * MS);
    assert_eq!(verdict.stats.starved_workers, [2]);
}

#[test]
fn a_paused_waiter_is_not_waiting() {
    let mut history = History::new();
    history.granted(1, 1, 1, 101);
    history.add(5, 2, What::Acquire);
    history.fault(6, 2, "pause");
    history.add(10, 1, What::Release);
    history.fault(300, 2, "resume");
    history.granted(301, 2, 2, 401);
    let verdict = history.check();
    assert_eq!(kinds(&verdict), []);
    assert_eq!(verdict.stats.longest_free_wait_ns, MS);
    assert!(verdict.stats.starved_workers.is_empty());
}

#[test]
fn a_killed_holders_hold_ends_at_its_kill_and_its_lease_at_its_validity() {
    // Its hold ends at the kill (a grant after it is no overlap), but the store may keep
    // its lease until its validity at 200 ms: no free lock before then.
    let mut history = History::new();
    history.add(1, 1, What::Acquire);
    history.granted(2, 1, 1, 200);
    history.add(3, 2, What::Acquire);
    history.fault(20, 1, "kill");
    history.granted(30, 2, 2, 130);
    history.add(40, 2, What::Release);
    history.add(41, 3, What::Acquire);
    history.granted(250, 3, 3, 350);
    let verdict = history.check();
    assert_eq!(kinds(&verdict), []);
    assert_eq!(verdict.stats.longest_free_wait_ns, 50 * MS);
    assert_eq!(verdict.stats.longest_free_wait_at, T0 + 200 * MS);
    assert_eq!(verdict.stats.faults, 1);
}

/// Worker 3 holds until 1000 ms; worker 1 asks at 10 ms, worker 2 at `second_asks` ms;
/// worker 2 is granted at 1001 ms while worker 1 still waits (granted at 1100 ms), worker
/// 1 paused in its wait if `paused`; the run asked for fair grants if `fair`.
fn second_comer_first(fair: bool, second_asks: u64, paused: bool) -> Verdict {
    let mut history = History::new();
    if let What::Start { fair: asked, .. } = &mut history.events[0].what {
        *asked = fair;
    }
    history.add(0, 3, What::Acquire);
    history.granted(1, 3, 1, 2_000);
    history.add(10, 1, What::Acquire);
    if paused {
        history.fault(20, 1, "pause");
        history.fault(30, 1, "resume");
    }
    history.add(second_asks, 2, What::Acquire);
    history.add(1_000, 3, What::Release);
    history.granted(1_001, 2, 2, 2_000);
    history.add(1_050, 2, What::Release);
    history.granted(1_100, 1, 3, 2_000);
    history.add(1_150, 1, What::Release);
    history.check()
}

#[test]
fn a_fair_lock_must_grant_in_the_order_asked() {
    let verdict = second_comer_first(true, 600, false);
    assert_eq!(kinds(&verdict), [Kind::Fifo]);
    let violation = &verdict.violations[0];
    assert_eq!(violation.events, [3, 4, 6]);
    assert_eq!(
        violation.message,
        "worker 2 asked at 600.000 ms and was granted at 1001.000 ms, before worker 1 who had \
         asked at 10.000 ms and still waited: out of FIFO order"
    );
    assert_eq!(violation.span, [T0 + 600 * MS, T0 + 1_001 * MS]);
}

#[test]
fn fifo_allows_requests_close_together_a_paused_waiter_and_unfair_locks() {
    // Asked 390 ms apart: either may have reached the store first.
    assert_eq!(kinds(&second_comer_first(true, 400, false)), []);
    // A waiter paused in its wait may lose its place.
    assert_eq!(kinds(&second_comer_first(true, 600, true)), []);
    // Not asked for.
    assert_eq!(kinds(&second_comer_first(false, 600, false)), []);
}

#[test]
fn a_release_of_unknown_outcome_leaves_the_lease_until_its_validity() {
    let mut history = History::new();
    history.add(0, 1, What::Acquire);
    history.granted(1, 1, 1, 101);
    history.add(5, 2, What::Acquire);
    history.add(10, 1, What::Release);
    history.released(40, 1, "unknown");
    // Worker 2 waits until the lease ran out at 101 ms: the lock was not free.
    history.granted(105, 2, 2, 205);
    let verdict = history.check();
    assert_eq!(kinds(&verdict), []);
    assert_eq!(verdict.stats.longest_free_wait_ns, 4 * MS);
}

#[test]
fn a_holder_killed_in_its_release_leaves_its_lease() {
    let mut history = History::new();
    history.add(0, 1, What::Acquire);
    history.granted(1, 1, 1, 101);
    history.add(5, 2, What::Acquire);
    history.add(10, 1, What::Release);
    history.fault(12, 1, "kill");
    // Worker 2 waits until the lease ran out at 101 ms: the lock was not free.
    history.granted(105, 2, 2, 205);
    let verdict = history.check();
    assert_eq!(kinds(&verdict), []);
    assert_eq!(verdict.stats.longest_free_wait_ns, 4 * MS);
}

#[test]
fn nobody_waits_while_the_server_is_down() {
    let mut history = History::new();
    history.add(0, 1, What::Acquire);
    history.granted(1, 1, 1, 101);
    history.add(5, 2, What::Acquire);
    history.add(10, 1, What::Release);
    history.fault(20, 0, "server-restart");
    history.fault(300, 0, "server-up");
    history.granted(310, 2, 2, 410);
    let verdict = history.check();
    // Free from 10 to 20 and from 300 to 310 ms while worker 2 waited, not the restart.
    assert_eq!(kinds(&verdict), []);
    assert_eq!(verdict.stats.longest_free_wait_ns, 10 * MS);
}
