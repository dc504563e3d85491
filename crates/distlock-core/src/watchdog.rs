//! The client's watchdog: one task per client keeps the deadlines of every grant the client
//! holds. It renews a lease when it is due, marks a grant `Lost` when its safe deadline
//! passes or its session ends, and releases a session grant at its hold limit. Taking a
//! lock thus spawns nothing: it puts the grant in a schedule, and its release takes it out.
//!
//! The task runs on the runtime of the grant that started it. When that runtime ends, a new
//! task takes over the schedule on the runtime of a grant still scheduled, or, failing that,
//! on the runtime of the next grant.
//!
//! The schedule also lists every grant held, from its grant until its release, whether or
//! not it is due for a check, so that `Client::close` can release them all.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex as StdMutex, MutexGuard, Weak};
use std::time::Duration;

use slab::Slab;
use tokio::sync::{Notify, watch};
use tokio::task::AbortHandle;
use tokio::time::Instant;

use crate::backend::Session;
use crate::error::ErrorKind;
use crate::lease::{Health, LeaseCore};

/// Why a lease grant the backend reported dropped is `Lost`.
const DROPPED_EARLY: &str = "the store dropped the grant before its lease ran out (its server restarted or ended the session holding it)";

/// How many runtimes a task is tried on when the one that ran it ended.
const REVIVE_TRIES: usize = 8;

/// Where a grant sits in the schedule: when it is due, and a number that makes the key
/// unique.
pub(crate) type Slot = (Instant, u64);

/// A grant's place in its client's watchdog.
#[derive(Debug)]
pub(crate) struct Schedule {
    /// Its entry in the schedule, while it has one (not while its renewal is in flight).
    slot: Option<Slot>,
    /// When its lease is next renewed.
    next_renew: Instant,
    /// Released: never scheduled again.
    stopped: bool,
    /// The runtime the grant was first scheduled on, where a task may be started again.
    runtime: Option<tokio::runtime::Handle>,
    /// The renewal in flight, aborted when the grant is released.
    renewal: Option<AbortHandle>,
    /// Its place in the list of held grants, from its first scheduling until it is stopped.
    held: Option<usize>,
    /// A grant handed over whose first renewal, which confirms it, has not succeeded yet:
    /// renewed even where renewals are not automatic.
    pub(crate) unconfirmed: bool,
}

impl Schedule {
    /// A grant not yet scheduled, first renewed at `next_renew`; `unconfirmed` for a grant
    /// handed over.
    pub(crate) fn new(next_renew: Instant, unconfirmed: bool) -> Self {
        Schedule {
            slot: None,
            next_renew,
            stopped: false,
            runtime: None,
            renewal: None,
            held: None,
            unconfirmed,
        }
    }
}

/// A client's watchdog: its schedule, shared with the task that runs it.
pub(crate) struct Watchdog {
    shared: Arc<Shared>,
}

/// The schedule, and how to reach the task that runs it.
struct Shared {
    state: StdMutex<State>,
    /// Wakes the task when a grant is due earlier than it sleeps, or the client is gone.
    wake: Notify,
    /// The backend's session channel, for a session backend.
    session: Option<watch::Receiver<Session>>,
    /// The backend's news of grants the store dropped early, for a lease backend.
    news: Option<watch::Receiver<u64>>,
}

/// The grants by when they are due, and the task's whereabouts.
#[derive(Default)]
struct State {
    due: BTreeMap<Slot, Weak<LeaseCore>>,
    /// Every grant held (due or being checked), for `Client::close`.
    held: Slab<Weak<LeaseCore>>,
    next_id: u64,
    /// Whether a task is running the schedule.
    running: bool,
    /// Until when the task sleeps (`None`: until woken).
    sleeping_until: Option<Instant>,
    /// The client is gone.
    closed: bool,
    /// A task is being started again (see [`Shared::revive`]).
    reviving: bool,
}

impl Watchdog {
    /// A watchdog with nothing scheduled, watching `session` (a session backend's channel)
    /// and `news` (a lease backend's news of grants dropped early).
    pub(crate) fn new(
        session: Option<watch::Receiver<Session>>,
        news: Option<watch::Receiver<u64>>,
    ) -> Self {
        Watchdog {
            shared: Arc::new(Shared {
                state: StdMutex::new(State::default()),
                wake: Notify::new(),
                session,
                news,
            }),
        }
    }

    /// Puts a freshly granted lease in the schedule.
    pub(crate) fn start(&self, core: &Arc<LeaseCore>) {
        let at = first_check(core);
        self.shared.schedule(core, at);
        // A session that ended, or news of a dropped grant that came, between reading the
        // grant's status and scheduling it was seen by the task before the grant was in the
        // schedule: check it now.
        let session_lost = core.session.is_some() && core.status().health == Health::Lost;
        if session_lost || core.client.backend.grant_lost(&core.handle) {
            self.shared.schedule(core, Instant::now());
        }
    }

    /// Takes a grant out of the schedule for good (it is being released), stopping a
    /// renewal of it in flight.
    pub(crate) fn stop(&self, core: &LeaseCore) {
        let renewal = {
            let mut schedule = core.schedule();
            schedule.stopped = true;
            let (slot, held) = (schedule.slot.take(), schedule.held.take());
            if slot.is_some() || held.is_some() {
                let mut state = self.shared.state();
                if let Some(slot) = slot {
                    state.due.remove(&slot);
                }
                if let Some(held) = held {
                    state.held.try_remove(held);
                }
            }
            schedule.renewal.take()
        };
        // Aborted with no lock held: the renewal's drop takes the grant's lock.
        if let Some(renewal) = renewal {
            renewal.abort();
        }
    }
}

impl Watchdog {
    /// Every grant held, not yet released.
    pub(crate) fn held(&self) -> Vec<Arc<LeaseCore>> {
        let state = self.shared.state();
        state
            .held
            .iter()
            .filter_map(|(_, core)| core.upgrade())
            .collect()
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.shared.state().closed = true;
        self.shared.wake.notify_one();
    }
}

impl Shared {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Checks `core` again at `at`, unless it was stopped; wakes the task if that is
    /// earlier than it sleeps, and starts one if none runs.
    fn schedule(self: &Arc<Self>, core: &Arc<LeaseCore>, at: Instant) {
        let (earlier, start) = {
            let mut schedule = core.schedule();
            if schedule.stopped {
                return;
            }
            let mut state = self.state();
            self.insert(&mut state, &mut schedule, core, at);
            let earlier = state.sleeping_until.is_none_or(|until| at < until);
            let runtime = tokio::runtime::Handle::try_current().ok();
            if schedule.runtime.is_none() {
                schedule.runtime.clone_from(&runtime);
            }
            let start = runtime.filter(|_| !state.running);
            state.running |= start.is_some();
            (earlier, start)
        };
        // Spawned with no lock held: a runtime that is shutting down drops the task at
        // once, and its guard then takes the state's lock to say no task runs.
        if let Some(runtime) = start {
            runtime.spawn(run(Running(self.clone())));
        }
        if earlier {
            self.wake.notify_one();
        }
    }

    /// Puts `core` in the schedule at `at`, in place of its entry if it has one.
    fn insert(
        &self,
        state: &mut State,
        schedule: &mut Schedule,
        core: &Arc<LeaseCore>,
        at: Instant,
    ) {
        if let Some(old) = schedule.slot.take() {
            state.due.remove(&old);
        }
        let slot = (at, state.next_id);
        state.next_id += 1;
        state.due.insert(slot, Arc::downgrade(core));
        schedule.slot = Some(slot);
        if schedule.held.is_none() {
            schedule.held = Some(state.held.insert(Arc::downgrade(core)));
        }
    }

    /// Puts a grant whose renewal was dropped unfinished (its runtime ended) back in the
    /// schedule, due at once, for the next task to take on; starts nothing itself.
    fn requeue(self: &Arc<Self>, core: &Arc<LeaseCore>) {
        {
            let mut schedule = core.schedule();
            if schedule.stopped {
                return;
            }
            let mut state = self.state();
            self.insert(&mut state, &mut schedule, core, Instant::now());
        }
        self.revive();
    }

    /// Starts a task again when none runs but grants are scheduled (the task went with its
    /// runtime): on the runtime of a scheduled grant, trying the next one's where a runtime
    /// has ended too (it drops the task at once, which says so), a few at most.
    fn revive(self: &Arc<Self>) {
        let runtimes: Vec<tokio::runtime::Handle> = {
            let mut state = self.state();
            if state.running || state.reviving || state.closed || state.due.is_empty() {
                return;
            }
            state.reviving = true;
            state
                .due
                .values()
                .take(REVIVE_TRIES)
                .filter_map(Weak::upgrade)
                .collect::<Vec<_>>()
        }
        .iter()
        .filter_map(|core| core.schedule().runtime.clone())
        .collect();
        for runtime in runtimes {
            self.state().running = true;
            runtime.spawn(run(Running(self.clone())));
            if self.state().running {
                break;
            }
        }
        self.state().reviving = false;
    }

    /// Takes the entries due by `now` out of the schedule; notes until when the task will
    /// sleep.
    fn take_due(&self, now: Instant) -> (Vec<(Slot, Weak<LeaseCore>)>, Option<Instant>) {
        let mut state = self.state();
        let later = state.due.split_off(&(now, u64::MAX));
        let due = std::mem::replace(&mut state.due, later);
        let next = state.due.first_key_value().map(|(slot, _)| slot.0);
        state.sleeping_until = next;
        (due.into_iter().collect(), next)
    }

    /// Every scheduled grant that lives by session.
    fn session_grants(&self) -> Vec<Arc<LeaseCore>> {
        let scheduled: Vec<Arc<LeaseCore>> = self
            .state()
            .due
            .values()
            .filter_map(Weak::upgrade)
            .collect();
        // Filtered with the lock let go: dropping the last hold of a grant can drop the
        // client, whose watchdog then takes the lock.
        scheduled
            .into_iter()
            .filter(|core| core.session.is_some())
            .collect()
    }

    /// Every held grant that lives by its lease, its renewal in flight or not.
    fn lease_grants(&self) -> Vec<Arc<LeaseCore>> {
        let held: Vec<Arc<LeaseCore>> = self
            .state()
            .held
            .iter()
            .filter_map(|(_, core)| core.upgrade())
            .collect();
        // Filtered with the lock let go, as above.
        held.into_iter()
            .filter(|core| core.session.is_none())
            .collect()
    }
}

/// Marks the task gone when its future is dropped: it finished, or its runtime ended.
struct Running(Arc<Shared>);

impl Drop for Running {
    fn drop(&mut self) {
        {
            let mut state = self.0.state();
            state.running = false;
            state.sleeping_until = None;
        }
        self.0.revive();
    }
}

/// The task: checks each grant when it is due, and every session grant when the session
/// changes; ends when the client is gone. `running` is made before the task is spawned, so
/// a task dropped before it ever ran still says so.
async fn run(running: Running) {
    let shared = &running.0;
    let mut session = shared.session.clone();
    let mut news = shared.news.clone();
    loop {
        let now = Instant::now();
        let (due, next) = shared.take_due(now);
        for (slot, lease) in due {
            if let Some(core) = lease.upgrade()
                && core.fired(slot)
            {
                check(shared, &core, now);
            }
        }
        if shared.state().closed {
            return;
        }
        let sleep = async {
            match next {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        let session_changed = async {
            match session.as_mut() {
                Some(channel) => channel.changed().await.is_ok(),
                None => std::future::pending().await,
            }
        };
        let news_came = async {
            match news.as_mut() {
                Some(channel) => channel.changed().await.is_ok(),
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = sleep => {}
            open = news_came => {
                if !open {
                    news = None;
                }
                for core in shared.lease_grants() {
                    let held = core.status().health != Health::Lost;
                    if held && core.client.backend.grant_lost(&core.handle) {
                        dropped_early(&core);
                    }
                }
            }
            _ = shared.wake.notified() => {}
            alive = session_changed => {
                if !alive {
                    session = None;
                }
                let now = Instant::now();
                for core in shared.session_grants() {
                    match alive {
                        true => check(shared, &core, now),
                        false => core.mark_lost("the backend's session channel closed"),
                    }
                }
            }
        }
    }
}

/// Marks a lease grant the backend reported dropped `Lost`, and gives it back: where the
/// store still holds it after all (the backend could not tell), it is freed at once.
fn dropped_early(core: &Arc<LeaseCore>) {
    core.mark_lost(DROPPED_EARLY);
    core.release_in_background();
}

/// When a fresh grant is first checked: its first renewal, or its safe deadline.
fn first_check(core: &LeaseCore) -> Instant {
    let status = core.status();
    match renews_at(core) {
        Some(renew) => renew.min(status.safe_until),
        None => status.safe_until,
    }
}

/// When the lease is next renewed, if it is renewed at all.
fn renews_at(core: &LeaseCore) -> Option<Instant> {
    let schedule = core.schedule();
    if core.session.is_some() || !(core.plan.auto || schedule.unconfirmed) {
        return None;
    }
    let next_renew = schedule.next_renew;
    drop(schedule);
    let renew_until = core.plan.max_hold.and_then(|m| core.sent.checked_add(m));
    renew_until
        .is_none_or(|until| next_renew < until)
        .then_some(next_renew)
}

/// Does what is due for `core` at `now`, and schedules its next check.
fn check(shared: &Arc<Shared>, core: &Arc<LeaseCore>, now: Instant) {
    let status = core.status();
    if core.session.is_some() {
        if core.release_at.is_some_and(|at| now >= at) {
            core.mark_lost("the grant reached its hold limit and was released");
            core.release_in_background();
            return;
        }
        if core.client.backend.grant_lost(&core.handle) {
            core.mark_lost(
                "the store deleted the grant, or gave it to an adopter, while its session lived (removed by an operator, a forced release, or a hand-off)",
            );
            return;
        }
        // Lost by the session's account: marked so here, which resolves `lost()`.
        if status.health == Health::Lost || now >= status.safe_until {
            core.mark_lost(
                "the session the grant lived in expired, was replaced, or went without contact past its validity",
            );
            return;
        }
        shared.schedule(core, status.safe_until);
        return;
    }
    if status.health == Health::Lost {
        return;
    }
    if core.client.backend.grant_lost(&core.handle) {
        dropped_early(core);
        return;
    }
    if now >= status.safe_until {
        core.mark_lost("the safe deadline passed without a successful renewal");
        return;
    }
    match renews_at(core) {
        Some(renew) if now >= renew => {
            // Spawned with no lock held (a renewal dropped at once takes the grant's lock);
            // one whose grant was released meanwhile is stopped again.
            let renewal = tokio::spawn(renew_and_reschedule(Renewing {
                shared: shared.clone(),
                core: core.clone(),
                done: false,
            }))
            .abort_handle();
            let mut schedule = core.schedule();
            match schedule.stopped {
                true => {
                    drop(schedule);
                    renewal.abort();
                }
                false => schedule.renewal = Some(renewal),
            }
        }
        Some(renew) => shared.schedule(core, renew.min(status.safe_until)),
        None => shared.schedule(core, status.safe_until),
    }
}

/// A renewal in flight. Dropped unfinished (its runtime ended), it puts the grant back in
/// the schedule, so that the next task renews it.
struct Renewing {
    shared: Arc<Shared>,
    core: Arc<LeaseCore>,
    done: bool,
}

impl Drop for Renewing {
    fn drop(&mut self) {
        if !self.done {
            self.shared.requeue(&self.core);
        }
    }
}

/// Renews a due lease, then schedules its next renewal: a period on after success, a
/// quarter period after a failure (it is at risk); none once it is gone.
async fn renew_and_reschedule(mut renewing: Renewing) {
    let core = renewing.core.clone();
    let every = core.plan.every;
    let started = Instant::now();
    let renewed = core.renew_once(Some(every)).await;
    renewing.done = true;
    core.schedule().renewal = None;
    let next_renew = match renewed {
        Ok(()) => core.client.renewals.align(started + every, every),
        Err(err) if err.kind() == ErrorKind::NotHeld || err.kind() == ErrorKind::LockLost => {
            return;
        }
        Err(_) => started + (every / 4).max(Duration::from_millis(5)),
    };
    core.schedule().next_renew = next_renew;
    let safe_until = core.status().safe_until;
    renewing.shared.schedule(&core, next_renew.min(safe_until));
}

impl LeaseCore {
    /// Notes that the schedule entry `slot` was taken out to be checked; false if it was no
    /// longer the grant's entry (the grant was rescheduled meanwhile) or it was released.
    fn fired(&self, slot: Slot) -> bool {
        let mut schedule = self.schedule();
        if schedule.slot != Some(slot) || schedule.stopped {
            return false;
        }
        schedule.slot = None;
        true
    }
}
