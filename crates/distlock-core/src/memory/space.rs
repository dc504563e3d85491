//! One memory lock space: every name's holders, queue and fencing counter.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex as StdMutex, Weak};
use std::time::{Duration, SystemTime};

use tokio::sync::watch;
use tokio::time::Instant;

use crate::backend::{
    Claim, Grant, HolderInfo, LeaseOutcome, LocalWakers, LockRequest, LockState, Note, PollOutcome,
    Queued, STARVATION, Session, Ticket, WaiterInfo, admit, check_note,
};
use crate::error::{Error, ErrorKind, Result};
use crate::owner::unix_ms;

/// How long a queue entry of a lease-mode waiter lives without being polled (its waiter
/// may have vanished).
pub(super) const WAITER_LEASE: Duration = Duration::from_secs(10);

#[derive(Debug)]
struct Entry {
    request: LockRequest,
    since: Instant,
    /// When the entry lapses; `None` for a session's entries, which live until it expires.
    expires: Option<Instant>,
    seq: u64,
    fencing_token: u64,
    /// The session the entry belongs to, in session mode.
    session: Option<u64>,
}

impl Entry {
    /// An entry for `request` made `now`, lapsing `lease` from now unless it is a session's.
    fn new(
        request: LockRequest,
        now: Instant,
        seq: u64,
        session: Option<u64>,
        lease: Duration,
    ) -> Self {
        let mut entry = Entry {
            request,
            since: now,
            expires: None,
            seq,
            fencing_token: 0,
            session,
        };
        entry.extend(now, lease);
        entry
    }

    fn live(&self, now: Instant) -> bool {
        self.expires.is_none_or(|at| at > now)
    }

    /// A lease-mode entry lapses `lease` from now; a session's entry never does.
    fn extend(&mut self, now: Instant, lease: Duration) {
        if self.session.is_none() {
            self.expires = Some(now + lease);
        }
    }
}

/// What a memory ticket remembers: its place in the queue, and the session it queued in.
#[derive(Debug)]
pub(super) struct Place {
    seq: u64,
    session: Option<u64>,
}

impl Entry {
    /// The grant as `status` shows it.
    fn holder_info(&self, now: Instant) -> HolderInfo {
        HolderInfo {
            owner: self.request.owner.to_string(),
            kind: self.request.kind,
            permits: self.request.permits,
            fencing_token: self.fencing_token,
            remaining_ms: self
                .expires
                .map(|at| at.saturating_duration_since(now).as_millis() as u64),
            no_expiry: false,
            stored_as: None,
            meta: self.request.meta.clone(),
        }
    }

    fn claim(&self) -> Claim {
        Claim {
            kind: self.request.kind,
            permits: self.request.permits,
        }
    }
}

#[derive(Debug, Default)]
struct NameState {
    /// The last fencing token granted for this name (while the name is remembered).
    fencing: u64,
    holders: Vec<Entry>,
    queue: Vec<Entry>,
}

impl NameState {
    /// Drops expired grants and abandoned queue entries; true if anything went.
    fn purge(&mut self, now: Instant) -> bool {
        let before = self.holders.len() + self.queue.len();
        self.holders.retain(|e| e.live(now));
        self.queue.retain(|e| e.live(now));
        before != self.holders.len() + self.queue.len()
    }

    /// Drops every entry of `session`: true if anything went, and the tokens of its
    /// waiters, which must be woken to queue again in their client's next session.
    fn drop_session(&mut self, session: u64) -> (bool, Vec<String>) {
        let before = self.holders.len();
        self.holders.retain(|e| e.session != Some(session));
        let (gone, kept) = std::mem::take(&mut self.queue)
            .into_iter()
            .partition::<Vec<_>, _>(|e| e.session == Some(session));
        self.queue = kept;
        let waiters: Vec<String> = gone.into_iter().map(|e| e.request.token).collect();
        (before != self.holders.len() || !waiters.is_empty(), waiters)
    }

    fn is_idle(&self) -> bool {
        self.holders.is_empty() && self.queue.is_empty()
    }

    fn holder_claims(&self) -> Vec<Claim> {
        self.holders.iter().map(Entry::claim).collect()
    }

    fn queued_except(&self, token: &str, now: Instant) -> Vec<Queued> {
        self.queue
            .iter()
            .filter(|e| e.request.token != token)
            .map(|e| Queued {
                claim: e.claim(),
                seq: e.seq,
                starving: now - e.since >= STARVATION,
            })
            .collect()
    }

    /// The queued tokens that may be granted together now, in queue order: one writer, or
    /// every reader that can share.
    fn admissible(&self) -> Vec<String> {
        let queue = self.queued_except("", Instant::now());
        let mut granted = self.holder_claims();
        let mut woken = Vec::new();
        for (entry, queued) in self.queue.iter().zip(&queue) {
            if granted.iter().any(|c| c.kind.is_exclusive()) {
                break;
            }
            let me = entry.claim();
            if admit(&granted, &queue, &me, Some(queued.seq), entry.request.fair).unwrap_or(false) {
                granted.push(me);
                woken.push(entry.request.token.clone());
            }
        }
        woken
    }
}

/// Every name with holders or waiters, and the fencing counter they share.
#[derive(Debug, Default)]
struct Names {
    states: HashMap<String, NameState>,
    fencing: Fencing,
    /// The names' notes, kept while the space lives.
    notes: HashMap<String, StoredNote>,
}

/// A note, as the space keeps it: its quiet window ends at an instant of the space's
/// clock, which every client of the space shares.
#[derive(Debug)]
struct StoredNote {
    note: Note,
    quiet_until: Option<Instant>,
}

/// One counter for the whole space, so that a name forgotten when it fell idle still gets
/// tokens above every earlier one when it is locked again.
#[derive(Debug, Default)]
struct Fencing(u64);

impl Fencing {
    fn mint(&mut self) -> u64 {
        self.0 += 1;
        self.0
    }
}

#[derive(Debug, Default)]
pub(super) struct Space {
    names: StdMutex<Names>,
    next_seq: AtomicU64,
    pub(super) wakers: LocalWakers,
    pub(super) floor: tokio::sync::Mutex<()>,
    /// The session channels of the space's session-mode clients, told when one of their
    /// grants is broken.
    sessions: StdMutex<Vec<Weak<watch::Sender<Session>>>>,
}

impl Space {
    /// Runs `f` on the state of `name` (expired entries purged, their successors granted),
    /// and forgets the name again if it is left with no holders and no waiters.
    fn with_name<T>(&self, name: &str, f: impl FnOnce(&mut Fencing, &mut NameState) -> T) -> T {
        let mut names = self.names.lock().unwrap_or_else(|p| p.into_inner());
        let Names {
            states, fencing, ..
        } = &mut *names;
        match states.get_mut(name) {
            Some(state) => {
                if state.purge(Instant::now()) {
                    self.hand_off(fencing, state);
                }
                let out = f(fencing, state);
                if state.is_idle() {
                    states.remove(name);
                }
                out
            }
            None => {
                let mut state = NameState::default();
                let out = f(fencing, &mut state);
                if !state.is_idle() {
                    states.insert(name.to_owned(), state);
                }
                out
            }
        }
    }

    /// How many names the space remembers (those with holders or waiters).
    #[cfg(test)]
    pub(super) fn remembered(&self) -> usize {
        self.names
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .states
            .len()
    }

    /// Grants the lock to every queued request that may now hold it, in queue order, and
    /// wakes exactly those. A released lock goes straight to its waiters, so a holder that
    /// releases and locks again at once cannot starve them.
    fn hand_off(&self, fencing: &mut Fencing, state: &mut NameState) {
        let now = Instant::now();
        for token in state.admissible() {
            let Some(at) = state.queue.iter().position(|e| e.request.token == token) else {
                continue;
            };
            let mut entry = state.queue.remove(at);
            state.fencing = fencing.mint();
            entry.fencing_token = state.fencing;
            entry.since = now;
            entry.extend(now, entry.request.ttl);
            entry.request.meta.acquired_at_unix_ms = unix_ms(SystemTime::now());
            state.holders.push(entry);
            self.wakers.wake(&token);
        }
    }

    /// Grants the ticket if it may hold the lock now (in `session`, for session mode). A
    /// waiting request that may not takes its place in the queue at its first poll (or its
    /// first in a new session: its entry went with the old one), so a free lock costs no
    /// queue entry and no wake-up slot.
    pub(super) fn poll(&self, ticket: &mut Ticket, session: Option<u64>) -> Result<PollOutcome> {
        let registered = ticket.state::<Place>().is_some();
        let queued_seq = ticket
            .state::<Place>()
            .filter(|p| p.session == session)
            .map(|p| p.seq);
        let request = &ticket.request;
        let granted = |fencing_token| PollOutcome::Granted {
            fencing_token,
            session,
            handed_over: None,
        };
        let (outcome, queued) = self.with_name(&request.name, |fencing, state| {
            let now = Instant::now();
            if let Some(held) = state
                .holders
                .iter_mut()
                .find(|e| e.request.token == request.token)
            {
                // Handed off while we slept: the lease runs from this poll, which began
                // after the caller's clock started.
                held.extend(now, request.ttl);
                self.wakers.forget(&request.token);
                return (Ok(granted(held.fencing_token)), None);
            }
            // The place in line is taken under the lock, so the queue keeps arrival order.
            let seq = queued_seq.unwrap_or_else(|| self.next_seq.fetch_add(1, Ordering::Relaxed));
            let me = Claim {
                kind: request.kind,
                permits: request.permits,
            };
            let queue = state.queued_except(&request.token, now);
            let my_seq = request.wait.then_some(seq);
            match admit(&state.holder_claims(), &queue, &me, my_seq, request.fair) {
                Err(err) => return (Err(err), None),
                Ok(true) => {
                    state.fencing = fencing.mint();
                    if registered {
                        // Its entry, of this session or an earlier one, goes with it.
                        state.queue.retain(|e| e.request.token != request.token);
                        self.wakers.forget(&request.token);
                    }
                    let mut held = request.clone();
                    held.meta.acquired_at_unix_ms = unix_ms(SystemTime::now());
                    let mut entry = Entry::new(held, now, seq, session, request.ttl);
                    entry.fencing_token = state.fencing;
                    state.holders.push(entry);
                    return (Ok(granted(state.fencing)), None);
                }
                Ok(false) => {}
            }
            let mut queued = None;
            if request.wait {
                // An entry left from an earlier session is replaced by one of this session.
                state
                    .queue
                    .retain(|e| e.request.token != request.token || e.session == session);
                match state
                    .queue
                    .iter_mut()
                    .find(|e| e.request.token == request.token)
                {
                    Some(entry) => entry.extend(now, WAITER_LEASE),
                    None => {
                        // The wake-up slot exists before the entry, so no hand-off (made
                        // under the same lock) can miss it.
                        self.wakers.register(ticket);
                        let entry = Entry::new(request.clone(), now, seq, session, WAITER_LEASE);
                        state.queue.push(entry);
                        state.queue.sort_by_key(|e| e.seq);
                        queued = Some(Place { seq, session });
                    }
                }
            }
            let retry_within = state
                .holders
                .iter()
                .filter_map(|e| e.expires)
                .map(|at| at - now)
                .min();
            (Ok(PollOutcome::Pending { retry_within }), queued)
        });
        if let Some(place) = queued {
            ticket.set_state(place);
        }
        outcome
    }

    /// Gives `ticket`'s request the live exclusive grant `handed` of `fencing_token`, with
    /// a new fencing token and its own lease: the new token.
    pub(super) fn adopt(&self, handed: &Grant, fencing_token: u64, ticket: &Ticket) -> Result<u64> {
        let request = &ticket.request;
        self.with_name(&request.name, |fencing, state| {
            let now = Instant::now();
            let Some(entry) = state.holders.iter_mut().find(|e| {
                e.request.token == handed.token
                    && e.fencing_token == fencing_token
                    && e.request.kind == handed.kind
                    && e.live(now)
            }) else {
                return Err(crate::backend::adopt_refused(&request.name));
            };
            state.fencing = fencing.mint();
            let mut held = request.clone();
            held.meta.acquired_at_unix_ms = unix_ms(SystemTime::now());
            entry.request = held;
            entry.since = now;
            entry.fencing_token = state.fencing;
            entry.extend(now, request.ttl);
            Ok(state.fencing)
        })
    }

    pub(super) fn cancel(&self, ticket: &Ticket) {
        let token = &ticket.request.token;
        self.wakers.forget(token);
        self.with_name(&ticket.request.name, |fencing, state| {
            state.queue.retain(|e| &e.request.token != token);
            state.holders.retain(|e| &e.request.token != token);
            self.hand_off(fencing, state);
        });
    }

    pub(super) fn renew(&self, grant: &Grant, ttl: Duration) -> LeaseOutcome {
        self.with_name(&grant.name, |_, state| {
            match state
                .holders
                .iter_mut()
                .find(|e| e.request.token == grant.token)
            {
                Some(entry) => {
                    entry.extend(Instant::now(), ttl);
                    LeaseOutcome::Done
                }
                None => LeaseOutcome::NotHeld,
            }
        })
    }

    pub(super) fn release(&self, grant: &Grant) -> LeaseOutcome {
        self.with_name(&grant.name, |fencing, state| {
            let before = state.holders.len();
            state.holders.retain(|e| e.request.token != grant.token);
            if state.holders.len() == before {
                return LeaseOutcome::NotHeld;
            }
            self.hand_off(fencing, state);
            LeaseOutcome::Done
        })
    }

    /// Breaks the grant of `name` with `fencing_token` (every grant: `None`), after
    /// bumping the fencing counter, and grants whoever may hold the lock now. A broken
    /// session grant's session is told on its channel.
    pub(super) fn force_release(&self, name: &str, fencing_token: Option<u64>) -> Vec<HolderInfo> {
        let (broken, sessions) = self.with_name(name, |fencing, state| {
            let now = Instant::now();
            let (gone, kept) = std::mem::take(&mut state.holders)
                .into_iter()
                .partition::<Vec<_>, _>(|e| fencing_token.is_none_or(|t| t == e.fencing_token));
            state.holders = kept;
            if gone.is_empty() {
                return (vec![], vec![]);
            }
            state.fencing = fencing.mint();
            self.hand_off(fencing, state);
            let sessions: Vec<u64> = gone.iter().filter_map(|e| e.session).collect();
            (gone.iter().map(|e| e.holder_info(now)).collect(), sessions)
        });
        if !sessions.is_empty() {
            let mut channels = self.sessions.lock().unwrap_or_else(|p| p.into_inner());
            channels.retain(|channel| channel.strong_count() > 0);
            for channel in channels.iter().filter_map(Weak::upgrade) {
                if sessions.contains(&channel.borrow().id) {
                    channel.send_modify(|_| {});
                }
            }
        }
        broken
    }

    /// Writes `grant.name`'s note if `grant` is a live grant of it: `NotHeld` otherwise.
    pub(super) fn write_note(
        &self,
        grant: &Grant,
        fencing_token: u64,
        value: &str,
        quiet_for: Option<Duration>,
    ) -> Result<Option<u64>> {
        check_note(value)?;
        let now = Instant::now();
        let mut names = self.names.lock().unwrap_or_else(|p| p.into_inner());
        let live = names.states.get(&grant.name).is_some_and(|state| {
            state
                .holders
                .iter()
                .any(|e| e.request.token == grant.token && e.live(now))
        });
        if !live {
            return Err(Error::new(
                ErrorKind::NotHeld,
                format!(
                    "no live grant of lock `{}` is this one: the note is not written",
                    grant.name
                ),
            ));
        }
        let written = unix_ms(SystemTime::now());
        let mut note = Note::new(value, fencing_token);
        note.written_unix_ms = Some(written);
        let kept = names.notes.get(&grant.name).and_then(|old| old.quiet_until);
        let quiet_until = match quiet_for {
            Some(quiet) => now.checked_add(quiet),
            None => kept,
        };
        names
            .notes
            .insert(grant.name.clone(), StoredNote { note, quiet_until });
        Ok(Some(written))
    }

    /// `name`'s note, with what is left of its quiet window.
    pub(super) fn read_note(&self, name: &str) -> Option<Note> {
        let now = Instant::now();
        let names = self.names.lock().unwrap_or_else(|p| p.into_inner());
        let stored = names.notes.get(name)?;
        let mut note = stored.note.clone();
        note.quiet_for = stored
            .quiet_until
            .map(|until| until.saturating_duration_since(now))
            .filter(|left| !left.is_zero());
        Some(note)
    }

    /// Whether the grant is still among its name's holders (expired or not).
    pub(super) fn holds(&self, grant: &Grant) -> bool {
        let names = self.names.lock().unwrap_or_else(|p| p.into_inner());
        names
            .states
            .get(&grant.name)
            .is_some_and(|state| state.holders.iter().any(|e| e.request.token == grant.token))
    }

    /// Tells a session-mode client's session channel of its grants broken by others.
    pub(super) fn register_session(&self, channel: &Arc<watch::Sender<Session>>) {
        let mut channels = self.sessions.lock().unwrap_or_else(|p| p.into_inner());
        channels.retain(|channel| channel.strong_count() > 0);
        channels.push(Arc::downgrade(channel));
    }

    /// Deletes every grant and queue entry of `session` (it expired), granting whoever may
    /// hold the locks it held.
    pub(super) fn drop_session(&self, session: u64) {
        let mut names = self.names.lock().unwrap_or_else(|p| p.into_inner());
        let mut touched = Vec::new();
        for (name, state) in names.states.iter_mut() {
            let (changed, waiters) = state.drop_session(session);
            waiters.iter().for_each(|token| self.wakers.wake(token));
            if changed {
                touched.push(name.clone());
            }
        }
        for name in touched {
            let Some(mut state) = names.states.remove(&name) else {
                continue;
            };
            self.hand_off(&mut names.fencing, &mut state);
            if !state.is_idle() {
                names.states.insert(name, state);
            }
        }
    }

    pub(super) fn inspect(&self, name: Option<&str>) -> Vec<LockState> {
        let mut names = self.names.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        let mut states: Vec<LockState> = names
            .states
            .iter_mut()
            .filter(|(n, _)| name.is_none_or(|wanted| wanted == n.as_str()))
            .filter_map(|(n, state)| {
                state.purge(now);
                (name.is_some() || !state.is_idle()).then(|| LockState {
                    name: n.clone(),
                    last_fencing_token: state.fencing,
                    holders: state.holders.iter().map(|e| e.holder_info(now)).collect(),
                    waiters: state
                        .queue
                        .iter()
                        .map(|e| WaiterInfo {
                            owner: e.request.owner.to_string(),
                            kind: e.request.kind,
                            permits: e.request.permits,
                            fair: e.request.fair,
                            meta: e.request.meta.clone(),
                        })
                        .collect(),
                })
            })
            .collect();
        if let (Some(name), true) = (name, states.is_empty()) {
            states.push(LockState {
                name: name.to_owned(),
                last_fencing_token: 0,
                holders: vec![],
                waiters: vec![],
            });
        }
        states.sort_by(|a, b| a.name.cmp(&b.name));
        states
    }
}
