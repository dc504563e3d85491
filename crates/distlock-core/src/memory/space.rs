//! One memory lock space: every name's holders, queue and fencing counter.

use std::collections::HashMap;
use std::sync::Mutex as StdMutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use tokio::time::Instant;

use crate::admission::{Claim, Queued, STARVATION, admit};
use crate::backend::{
    HolderInfo, LeaseKey, LeaseOutcome, LockRequest, LockState, PollOutcome, Ticket, WaiterInfo,
};
use crate::error::Result;
use crate::owner::unix_ms;
use crate::wakers::LocalWakers;

/// How long a queue entry lives without being polled (its waiter may have vanished).
const WAITER_LEASE: Duration = Duration::from_secs(10);

#[derive(Debug)]
struct Entry {
    request: LockRequest,
    since: Instant,
    expires: Instant,
    seq: u64,
    fencing_token: u64,
}

impl Entry {
    fn claim(&self) -> Claim {
        Claim {
            kind: self.request.kind,
            permits: self.request.permits,
        }
    }
}

#[derive(Debug, Default)]
struct NameState {
    fencing: u64,
    holders: Vec<Entry>,
    queue: Vec<Entry>,
}

impl NameState {
    /// Drops expired grants and abandoned queue entries; true if anything went.
    fn purge(&mut self, now: Instant) -> bool {
        let before = self.holders.len() + self.queue.len();
        self.holders.retain(|e| e.expires > now);
        self.queue.retain(|e| e.expires > now);
        before != self.holders.len() + self.queue.len()
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

#[derive(Debug, Default)]
pub(super) struct Space {
    names: StdMutex<HashMap<String, NameState>>,
    next_seq: AtomicU64,
    pub(super) wakers: LocalWakers,
    pub(super) floor: tokio::sync::Mutex<()>,
}

impl Space {
    fn with_name<T>(&self, name: &str, f: impl FnOnce(&mut NameState) -> T) -> T {
        let mut names = self.names.lock().unwrap_or_else(|p| p.into_inner());
        let state = names.entry(name.to_owned()).or_default();
        let now = Instant::now();
        let changed = state.purge(now);
        if changed {
            self.hand_off(state);
        }
        f(state)
    }

    /// Grants the lock to every queued request that may now hold it, in queue order, and
    /// wakes exactly those. A released lock goes straight to its waiters, so a holder that
    /// releases and locks again at once cannot starve them.
    fn hand_off(&self, state: &mut NameState) {
        let now = Instant::now();
        for token in state.admissible() {
            let Some(at) = state.queue.iter().position(|e| e.request.token == token) else {
                continue;
            };
            let mut entry = state.queue.remove(at);
            state.fencing += 1;
            entry.fencing_token = state.fencing;
            entry.since = now;
            entry.expires = now + entry.request.ttl;
            entry.request.meta.acquired_at_unix_ms = unix_ms(SystemTime::now());
            state.holders.push(entry);
            self.wakers.wake(&token);
        }
    }

    pub(super) fn enqueue(&self, request: LockRequest) -> Ticket {
        if !request.wait {
            let seq = self.next_seq.fetch_add(1, Ordering::Relaxed);
            return Ticket::new(request, Some(seq));
        }
        let name = request.name.clone();
        // The wake-up slot exists before the entry, so no hand-off can miss it.
        self.wakers.register(&Ticket::new(request.clone(), None));
        // The sequence number is taken under the lock, so the queue stays in its order.
        self.with_name(&name, |state| {
            let seq = self.next_seq.fetch_add(1, Ordering::Relaxed);
            let now = Instant::now();
            state.queue.push(Entry {
                request: request.clone(),
                since: now,
                expires: now + WAITER_LEASE,
                seq,
                fencing_token: 0,
            });
            Ticket::new(request, Some(seq))
        })
    }

    pub(super) fn poll(&self, ticket: &Ticket) -> Result<PollOutcome> {
        let request = &ticket.request;
        let seq = ticket.seq.unwrap_or(u64::MAX);
        self.with_name(&request.name, |state| {
            let now = Instant::now();
            if let Some(granted) = state
                .holders
                .iter_mut()
                .find(|e| e.request.token == request.token)
            {
                // Handed off while we slept: the lease runs from this poll, which began
                // after the caller's clock started.
                granted.expires = now + request.ttl;
                self.wakers.forget(&request.token);
                return Ok(PollOutcome::Granted {
                    fencing_token: granted.fencing_token,
                });
            }
            let me = Claim {
                kind: request.kind,
                permits: request.permits,
            };
            let queue = state.queued_except(&request.token, now);
            let my_seq = request.wait.then_some(seq);
            if admit(&state.holder_claims(), &queue, &me, my_seq, request.fair)? {
                state.fencing += 1;
                state.queue.retain(|e| e.request.token != request.token);
                let mut granted = request.clone();
                granted.meta.acquired_at_unix_ms = unix_ms(SystemTime::now());
                self.wakers.forget(&request.token);
                state.holders.push(Entry {
                    request: granted,
                    since: now,
                    expires: now + request.ttl,
                    seq,
                    fencing_token: state.fencing,
                });
                return Ok(PollOutcome::Granted {
                    fencing_token: state.fencing,
                });
            }
            if request.wait {
                let expires = now + WAITER_LEASE;
                match state
                    .queue
                    .iter_mut()
                    .find(|e| e.request.token == request.token)
                {
                    Some(entry) => entry.expires = expires,
                    None => {
                        state.queue.push(Entry {
                            request: request.clone(),
                            since: now,
                            expires,
                            seq,
                            fencing_token: 0,
                        });
                        state.queue.sort_by_key(|e| e.seq);
                    }
                }
            }
            let retry_within = state.holders.iter().map(|e| e.expires - now).min();
            Ok(PollOutcome::Pending { retry_within })
        })
    }

    pub(super) fn cancel(&self, ticket: &Ticket) {
        let token = &ticket.request.token;
        self.wakers.forget(token);
        self.with_name(&ticket.request.name, |state| {
            state.queue.retain(|e| &e.request.token != token);
            state.holders.retain(|e| &e.request.token != token);
            self.hand_off(state);
        });
    }

    pub(super) fn renew(&self, lease: &LeaseKey, ttl: Duration) -> LeaseOutcome {
        self.with_name(&lease.name, |state| {
            match state
                .holders
                .iter_mut()
                .find(|e| e.request.token == lease.token)
            {
                Some(entry) => {
                    entry.expires = Instant::now() + ttl;
                    LeaseOutcome::Done
                }
                None => LeaseOutcome::NotHeld,
            }
        })
    }

    pub(super) fn release(&self, lease: &LeaseKey) -> LeaseOutcome {
        self.with_name(&lease.name, |state| {
            let before = state.holders.len();
            state.holders.retain(|e| e.request.token != lease.token);
            if state.holders.len() == before {
                return LeaseOutcome::NotHeld;
            }
            self.hand_off(state);
            LeaseOutcome::Done
        })
    }

    pub(super) fn inspect(&self, name: Option<&str>) -> Vec<LockState> {
        let mut names = self.names.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        let mut states: Vec<LockState> = names
            .iter_mut()
            .filter(|(n, _)| name.is_none_or(|wanted| wanted == n.as_str()))
            .filter_map(|(n, state)| {
                state.purge(now);
                let empty = state.holders.is_empty() && state.queue.is_empty();
                (name.is_some() || !empty).then(|| LockState {
                    name: n.clone(),
                    last_fencing_token: state.fencing,
                    holders: state
                        .holders
                        .iter()
                        .map(|e| HolderInfo {
                            owner: e.request.owner.to_string(),
                            kind: e.request.kind,
                            permits: e.request.permits,
                            fencing_token: e.fencing_token,
                            remaining_ms: (e.expires - now).as_millis() as u64,
                            meta: e.request.meta.clone(),
                        })
                        .collect(),
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
