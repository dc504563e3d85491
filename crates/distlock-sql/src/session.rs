//! Session mode's connections, for every dialect whose server holds a lock for as long as
//! a connection lives (PostgreSQL's advisory locks, MySQL's `GET_LOCK`): each lock is held
//! by a connection of its own, taken from a small set of idle connections that hold
//! nothing, and given back only after its lock was released cleanly. A connection that
//! failed, or whose state is in doubt, is closed instead, which makes the server release
//! whatever it held. Each dialect supplies its statements through [`SessionDialect`]. A
//! [`Sentinel`] connection tells the client at once when the server went away, which
//! loses every lock at once.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use distlock_core::backend::{Grant, LeaseOutcome, LockRequest, PollOutcome, Ticket};
use distlock_core::{Error, ErrorKind, Result};

use crate::sentinel::Sentinel;
pub(crate) use crate::session_dialect::{NoteWrite, SessionDialect, Tried, WaitEnd};
use crate::tasks::{SqlTicket, detached, outcomes};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// How many idle connections are kept for later locks.
const IDLE_KEPT: usize = 16;
/// How long a cancellation waits for the server to stop a wait before closing the
/// connection instead.
const CANCEL_WITHIN: Duration = Duration::from_secs(2);

/// How long after the statement that made a waited-for grant its poll may count the
/// grant's validity from itself without asking the server again: within the margin every
/// validity leaves.
const FRESH_GRANT: Duration = Duration::from_millis(2);

/// One connection, the server's id for it, and the sentinel's generation when it was made
/// (it serves grants of that generation only).
struct Session<C> {
    conn: C,
    conn_id: i64,
    generation: u64,
}

/// A lock held by a session.
pub(crate) struct Held<D: SessionDialect> {
    session: tokio::sync::Mutex<Option<Session<D::Conn>>>,
    key: D::Key,
    /// The sentinel's generation before the statement that granted it: the lock is lost
    /// once the generation moves on.
    generation: u64,
}

/// A request waiting in the server's lock queue, on a task of its own.
pub(crate) struct Waiting<D: SessionDialect> {
    conn_id: i64,
    key: D::Key,
    /// The sentinel's generation before the wait started.
    generation: u64,
    done: watch::Receiver<bool>,
    task: JoinHandle<Waited<D::Conn>>,
}

/// How a wait ended.
struct Waited<C> {
    session: Session<C>,
    fence: sqlx::Result<WaitEnd>,
}

pub(crate) enum Slot<D: SessionDialect> {
    Waiting(Waiting<D>),
    Held(Arc<Held<D>>),
}

/// Where a session-mode request keeps its wait, then its lock: in its ticket's state, and
/// its grant's once granted, so no table keyed by token is needed.
pub(crate) type SlotCell<D> = Arc<Mutex<Option<Slot<D>>>>;

/// The slot `ticket` keeps in its state, made at first use.
pub(crate) fn ticket_slot<D: SessionDialect>(ticket: &mut Ticket) -> SlotCell<D> {
    let state = ticket.state_or_default::<SqlTicket>();
    if let Some(cell) = slot_in::<D>(Some(state)) {
        return cell;
    }
    let cell: SlotCell<D> = Arc::default();
    state.session = Some(cell.clone());
    cell
}

/// The slot kept in a ticket's or grant's state, if it has one.
pub(crate) fn slot_in<D: SessionDialect>(state: Option<&SqlTicket>) -> Option<SlotCell<D>> {
    state?.session.clone()?.downcast().ok()
}

/// The session-mode locks of one client.
pub(crate) struct Sessions<D: SessionDialect> {
    dialect: Arc<D>,
    idle: Mutex<Vec<Session<D::Conn>>>,
    collisions: Mutex<BTreeSet<(String, String)>>,
    sentinel: Sentinel,
}

impl<D: SessionDialect> Sessions<D> {
    pub(crate) fn new(dialect: D) -> Sessions<D> {
        Sessions {
            dialect: Arc::new(dialect),
            idle: Mutex::default(),
            collisions: Mutex::default(),
            sentinel: Sentinel::new(),
        }
    }

    /// A channel that changes whenever session locks may have been lost all at once (the
    /// server went away), for the core's news of lost grants.
    pub(crate) fn loss_news(&self) -> watch::Receiver<u64> {
        self.sentinel.subscribe()
    }

    /// Whether the lock held in `cell` was granted before the server went away.
    pub(crate) fn lost(&self, cell: &SlotCell<D>) -> bool {
        match locked(cell).as_ref() {
            Some(Slot::Held(held)) => held.generation != self.sentinel.current(),
            _ => false,
        }
    }

    /// Pairs of names found to share a lock key, so far (PostgreSQL's keys are hashes;
    /// MySQL's hashed keys are too long to collide).
    #[cfg(feature = "postgres")]
    pub(crate) fn collisions(&self) -> Vec<(String, String)> {
        locked(&self.collisions).iter().cloned().collect()
    }

    /// One poll of a session-mode request: the outcome of its wait if it is waiting, or a
    /// try of the lock, which starts a wait when the request waits and the lock is taken.
    pub(crate) async fn poll(
        self: &Arc<Self>,
        request: &LockRequest,
        cell: &SlotCell<D>,
    ) -> Result<PollOutcome> {
        /// What the slot says to do.
        enum Next<D: SessionDialect> {
            Try,
            Finish(Waiting<D>),
            Restart(Waiting<D>),
        }
        let next = {
            let mut slot = locked(cell);
            let current = self.sentinel.current();
            match slot.as_ref() {
                Some(Slot::Waiting(w)) if !*w.done.borrow() && w.generation == current => {
                    return Ok(pending());
                }
                Some(Slot::Held(_)) => {
                    return Err(Error::new(
                        ErrorKind::Backend,
                        "a session lock was polled after its grant",
                    )
                    .with_backend(D::BACKEND));
                }
                Some(Slot::Waiting(w)) => {
                    let done = *w.done.borrow();
                    match slot.take() {
                        Some(Slot::Waiting(w)) if done => Next::Finish(w),
                        // A wait on a server that went away by the sentinel's account (its
                        // connection may hang unanswered): stopped, and asked for again.
                        Some(Slot::Waiting(w)) => Next::Restart(w),
                        _ => Next::Try,
                    }
                }
                None => Next::Try,
            }
        };
        match next {
            Next::Finish(waiting) => self.finish_wait(request, waiting, cell).await,
            Next::Restart(stale) => {
                self.stop_wait(&request.token, stale).await?;
                self.try_lock(request, cell).await
            }
            Next::Try => self.try_lock(request, cell).await,
        }
    }

    async fn finish_wait(
        &self,
        request: &LockRequest,
        waiting: Waiting<D>,
        cell: &SlotCell<D>,
    ) -> Result<PollOutcome> {
        let waited = waiting.task.await.map_err(task_failed::<D>)?;
        match waited.fence {
            // Granted after the sentinel's connection broke: perhaps by a server that
            // restarted and forgot it. Given back, and asked for again.
            Ok(Ok(_)) if self.sentinel.current() != waiting.generation => {
                close::<D>(waited.session);
                Ok(PollOutcome::pending(Some(Duration::ZERO)))
            }
            Ok(Ok((fence, sent))) => {
                let mut session = waited.session;
                // The lock's validity is counted from this poll. A grant made well before
                // it (its process paused, or slow to wake, as the answer came) may have
                // outlived the server's limit on a silent session meanwhile: the session
                // is asked whether it still holds it, re-arming the limit, first.
                if sent.elapsed() > FRESH_GRANT {
                    let held = self
                        .dialect
                        .renew(&mut session.conn, &waiting.key, request.ttl)
                        .await;
                    if !matches!(held, Ok(true)) {
                        close::<D>(session);
                        return Ok(PollOutcome::pending(Some(Duration::ZERO)));
                    }
                }
                hold(cell, waiting.key, session, waiting.generation);
                Ok(granted(fence))
            }
            Ok(Err(other)) => {
                close::<D>(waited.session);
                Err(kind_clash(&request.name, other))
            }
            Err(err) => {
                close::<D>(waited.session);
                Err(D::error("acquire", err))
            }
        }
    }

    async fn try_lock(
        self: &Arc<Self>,
        request: &LockRequest,
        cell: &SlotCell<D>,
    ) -> Result<PollOutcome> {
        let key = self.dialect.key(request);
        let mut regranted = 0;
        loop {
            let generation = self.sentinel.ready(&self.dialect).await?;
            let (mut session, reused) = self.checkout(generation).await?;
            let tried = match self
                .dialect
                .try_lock(&mut session.conn, request, &key)
                .await
            {
                Ok(tried) => tried,
                Err(err) if reused && D::connection_gone(&err) => {
                    // The server went away since the connection was last used (a restart,
                    // say): every idle connection is as stale, so start afresh.
                    close::<D>(session);
                    let stale: Vec<_> = locked(&self.idle).drain(..).collect();
                    stale.into_iter().for_each(close::<D>);
                    continue;
                }
                Err(err) => {
                    close::<D>(session);
                    return Err(D::error("acquire", err));
                }
            };
            session.conn_id = tried.conn_id;
            self.report_collisions(&request.name, tried.others);
            if let Some(other) = tried.clash {
                self.checkin(session);
                return Err(kind_clash(&request.name, other));
            }
            // Granted after the sentinel's connection broke: perhaps by a server that
            // restarted and forgot it. Given back (closed before the next try, so it is
            // not refused by its own grant), and asked for again a few times.
            if tried.fence.is_some() && self.sentinel.current() != generation {
                close_now::<D>(session).await;
                regranted += 1;
                if regranted < 3 {
                    continue;
                }
                return Err(Error::new(
                    ErrorKind::Unavailable,
                    "the connection that watches the server broke as each grant was made",
                )
                .with_backend(D::BACKEND)
                .temporary());
            }
            return Ok(match tried.fence {
                Some(fence) => {
                    hold(cell, key, session, generation);
                    granted(fence)
                }
                None if request.wait => {
                    self.start_wait(request, key, session, cell, generation);
                    pending()
                }
                None => {
                    self.checkin(session);
                    pending()
                }
            });
        }
    }

    fn start_wait(
        self: &Arc<Self>,
        request: &LockRequest,
        key: D::Key,
        mut session: Session<D::Conn>,
        cell: &SlotCell<D>,
        generation: u64,
    ) {
        let (done, receiver) = watch::channel(false);
        let conn_id = session.conn_id;
        let (this, request, wait_key) = (self.clone(), request.clone(), key.clone());
        let task = tokio::spawn(async move {
            let fence = this
                .dialect
                .wait(&mut session.conn, &request, &wait_key)
                .await;
            let _ = done.send(true);
            Waited { session, fence }
        });
        *locked(cell) = Some(Slot::Waiting(Waiting {
            conn_id,
            key,
            generation,
            done: receiver,
            task,
        }));
    }

    /// Waits until the request's wait ended or `backstop` passed.
    pub(crate) async fn wait_for_change(&self, cell: &SlotCell<D>, backstop: Option<Duration>) {
        let mut done = match locked(cell).as_ref() {
            Some(Slot::Waiting(w)) => w.done.clone(),
            _ => return,
        };
        match backstop {
            Some(backstop) => {
                let _ = tokio::time::timeout(backstop, done.wait_for(|d| *d)).await;
            }
            None => {
                let _ = done.wait_for(|d| *d).await;
            }
        }
    }

    /// Withdraws a request: stops its wait (asking the server, or closing the connection
    /// if the server does not answer in time), or releases what it got.
    pub(crate) async fn cancel(&self, cell: &SlotCell<D>, token: &str) -> Result<()> {
        let slot = locked(cell).take();
        match slot {
            None => Ok(()),
            Some(Slot::Held(held)) => self.unlock(&held).await.map(drop),
            Some(Slot::Waiting(waiting)) => self.stop_wait(token, waiting).await,
        }
    }

    async fn stop_wait(&self, token: &str, waiting: Waiting<D>) -> Result<()> {
        let asked = self.dialect.interrupt(waiting.conn_id);
        let _ = tokio::time::timeout(CANCEL_WITHIN, asked).await;
        let mut task = waiting.task;
        let stopped = match tokio::time::timeout(CANCEL_WITHIN, &mut task).await {
            // Granted just before the interruption arrived: give it back.
            Ok(Ok(Waited {
                session,
                fence: Ok(Ok(_)),
            })) => {
                let held = Held::<D> {
                    session: tokio::sync::Mutex::new(Some(session)),
                    key: waiting.key,
                    generation: waiting.generation,
                };
                return self.unlock(&held).await.map(drop);
            }
            // The statement was stopped, possibly after the lock was taken: closing the
            // connection is the one sure way to leave nothing held.
            Ok(Ok(Waited { session, .. })) => {
                close::<D>(session);
                Ok(())
            }
            Ok(Err(err)) => Err(task_failed::<D>(err)),
            // The server does not answer: dropping the connection closes it, and the server
            // ends the wait once it notices.
            Err(_) => {
                task.abort();
                Ok(())
            }
        };
        let forget = self.dialect.forget_waiter(waiting.conn_id, token);
        let _ = tokio::time::timeout(CANCEL_WITHIN, forget).await;
        stopped
    }

    /// Renews a held lock on its own connection; `false` if the session is gone (which
    /// means the server released the lock), no longer holds it, or was made on a server
    /// that went away since.
    pub(crate) async fn renew(&self, cell: &SlotCell<D>, ttl: Duration) -> Result<bool> {
        let held = match locked(cell).as_ref() {
            Some(Slot::Held(held)) => held.clone(),
            _ => return Ok(false),
        };
        let mut session = held.session.lock().await;
        if held.generation != self.sentinel.current() {
            // Lost by the sentinel's account: closing the connection frees the lock at once
            // if the server still holds it.
            if let Some(gone) = session.take() {
                close::<D>(gone);
            }
            return Ok(false);
        }
        let Some(current) = session.as_mut() else {
            return Ok(false);
        };
        let check = self.dialect.renew(&mut current.conn, &held.key, ttl);
        match tokio::time::timeout(ttl, check).await {
            Ok(Ok(true)) => Ok(true),
            Ok(Ok(false)) | Ok(Err(_)) | Err(_) => {
                if let Some(gone) = session.take() {
                    close::<D>(gone);
                }
                Ok(false)
            }
        }
    }

    /// Writes lock `name`'s note on a held lock's own connection, if it still holds it:
    /// the server's time of the write, `None` if the lock is no longer held.
    pub(crate) async fn write_note(
        &self,
        cell: &SlotCell<D>,
        name: &str,
        note: &NoteWrite<'_>,
    ) -> Result<Option<i64>> {
        let held = match locked(cell).as_ref() {
            Some(Slot::Held(held)) => held.clone(),
            _ => return Ok(None),
        };
        let mut session = held.session.lock().await;
        if held.generation != self.sentinel.current() {
            return Ok(None);
        }
        let Some(current) = session.as_mut() else {
            return Ok(None);
        };
        self.dialect
            .write_note(&mut current.conn, &held.key, name, note)
            .await
            .map_err(|err| D::error("write_note", err))
    }

    /// Releases a held lock; `false` if its session was already gone.
    pub(crate) async fn release(&self, cell: &SlotCell<D>) -> Result<bool> {
        let held = {
            let mut slot = locked(cell);
            match slot.take() {
                Some(Slot::Held(held)) => held,
                other => {
                    *slot = other;
                    return Ok(false);
                }
            }
        };
        self.unlock(&held).await
    }

    async fn unlock(&self, held: &Held<D>) -> Result<bool> {
        let Some(mut session) = held.session.lock().await.take() else {
            return Ok(false);
        };
        match self.dialect.unlock(&mut session.conn, &held.key).await {
            Ok(true) => {
                self.checkin(session);
                Ok(true)
            }
            Ok(false) | Err(_) => {
                close::<D>(session);
                Ok(false)
            }
        }
    }

    /// An idle connection made in sentinel generation `generation` (`true`: reused), or a
    /// new one; idle connections of other generations are closed.
    async fn checkout(&self, generation: u64) -> Result<(Session<D::Conn>, bool)> {
        loop {
            let Some(session) = locked(&self.idle).pop() else {
                break;
            };
            match session.generation == generation {
                true => return Ok((session, true)),
                false => close::<D>(session),
            }
        }
        let conn = self.dialect.connect().await?;
        let session = Session {
            conn,
            conn_id: 0,
            generation,
        };
        Ok((session, false))
    }

    fn checkin(&self, session: Session<D::Conn>) {
        let mut idle = locked(&self.idle);
        if idle.len() < IDLE_KEPT {
            idle.push(session);
        } else {
            drop(idle);
            close::<D>(session);
        }
    }

    fn report_collisions(&self, name: &str, others: Vec<String>) {
        for other in others {
            let pair = match name < other.as_str() {
                true => (name.to_owned(), other),
                false => (other, name.to_owned()),
            };
            if locked(&self.collisions).insert(pair.clone()) {
                tracing::warn!(
                    backend = D::BACKEND,
                    first = %pair.0,
                    second = %pair.1,
                    "two lock names share one server lock key; they exclude each other"
                );
            }
        }
    }
}

/// Renews `leases` for a backend that keeps some locks on session connections and the
/// rest as lease rows: those `sessions` holds are checked on their own connections, the
/// others renewed by one call of `renew_rows` (with their tokens, answering in order). The
/// outcomes are in the order of `leases`; each part runs detached, so it finishes even if
/// the caller gives up.
pub(crate) async fn renew_split<D, F, Fut>(
    sessions: Option<&Arc<Sessions<D>>>,
    leases: &[Grant],
    ttl: Duration,
    renew_rows: F,
) -> Result<Vec<LeaseOutcome>>
where
    D: SessionDialect,
    F: FnOnce(Vec<String>) -> Fut,
    Fut: Future<Output = Result<Vec<bool>>> + Send + 'static,
{
    let held = |l: &&Grant| sessions.is_some() && slot_in::<D>(l.state()).is_some();
    let (on_sessions, rows): (Vec<&Grant>, Vec<&Grant>) = leases.iter().partition(held);
    let mut renewed: HashMap<String, bool> = HashMap::new();
    if !rows.is_empty() {
        let tokens: Vec<String> = rows.iter().map(|l| l.token.clone()).collect();
        let done = detached(D::BACKEND, renew_rows(tokens.clone())).await?;
        renewed.extend(tokens.into_iter().zip(done));
    }
    if let Some(store) = sessions.filter(|_| !on_sessions.is_empty()).cloned() {
        let slots: Vec<(String, SlotCell<D>)> = on_sessions
            .iter()
            .filter_map(|l| Some((l.token.clone(), slot_in::<D>(l.state())?)))
            .collect();
        let done = detached(D::BACKEND, async move {
            let checks = slots.iter().map(|(_, slot)| store.renew(slot, ttl));
            let done = futures_util::future::join_all(checks).await;
            slots
                .iter()
                .map(|(token, _)| token.clone())
                .zip(done)
                .map(|(token, done)| Ok((token, done?)))
                .collect::<Result<Vec<_>>>()
        })
        .await?;
        renewed.extend(done);
    }
    Ok(outcomes(
        leases
            .iter()
            .map(|l| renewed.get(&l.token).copied().unwrap_or(false))
            .collect(),
    ))
}

/// Keeps `session`, which holds `key` since a grant asked for in sentinel generation
/// `generation`, as the lock of the request whose slot is `cell`.
fn hold<D: SessionDialect>(
    cell: &SlotCell<D>,
    key: D::Key,
    session: Session<D::Conn>,
    generation: u64,
) {
    let held = Held {
        session: tokio::sync::Mutex::new(Some(session)),
        key,
        generation,
    };
    *locked(cell) = Some(Slot::Held(Arc::new(held)));
}

/// The error for a name used as two kinds at once: `other` is what already holds it.
pub(crate) fn kind_clash(name: &str, other: &str) -> Error {
    Error::invalid(format!(
        "lock `{name}` is in use as {other}; one name cannot be both"
    ))
}

/// Closes a connection in the background; the server releases everything it held.
fn close<D: SessionDialect>(session: Session<D::Conn>) {
    tokio::spawn(close_now::<D>(session));
}

/// Closes a connection, waiting at most 5 s; the server releases everything it held.
async fn close_now<D: SessionDialect>(session: Session<D::Conn>) {
    let _ = tokio::time::timeout(Duration::from_secs(5), D::close(session.conn)).await;
}

fn granted(fence: i64) -> PollOutcome {
    PollOutcome::granted(fence as u64)
}

fn pending() -> PollOutcome {
    PollOutcome::pending(None)
}

fn task_failed<D: SessionDialect>(err: tokio::task::JoinError) -> Error {
    Error::new(ErrorKind::Backend, format!("a database task failed: {err}"))
        .with_backend(D::BACKEND)
}

fn locked<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}
