//! What a server database's backend does before it knows whether a request is a session
//! lock or a lease: route it, and run the session side. PostgreSQL and MySQL share it; each
//! keeps only its lease table's statements.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use distlock_core::backend::Ticket;
use distlock_core::backend::{Grant, LeaseOutcome, LocalWakers, LockRequest, PollOutcome};
use distlock_core::{Error, ErrorKind, HolderInfo, LockKind, LockState, Result};

use crate::session::{NoteWrite, SessionDialect, Sessions, slot_in, ticket_slot};

use crate::tasks::{detached, outcome, poll_detached, settled};

/// Session locks for the kinds `D` holds in sessions (in session mode), leases for the rest,
/// and local wake-ups for waiting leases.
pub(crate) struct Split<D: SessionDialect> {
    sessions: Option<Arc<Sessions<D>>>,
    /// Which kinds session mode holds in sessions.
    session_kinds: fn(LockKind) -> bool,
    /// The waiting lease requests of this client, woken when their turn may have come.
    pub(crate) wakers: Arc<LocalWakers>,
}

impl<D: SessionDialect> Split<D> {
    /// `sessions` in session mode (`None` in lease mode), holding `session_kinds`.
    pub(crate) fn new(sessions: Option<D>, session_kinds: fn(LockKind) -> bool) -> Self {
        Split {
            sessions: sessions.map(|dialect| Arc::new(Sessions::new(dialect))),
            session_kinds,
            wakers: Arc::new(LocalWakers::new()),
        }
    }

    /// The session store in session mode.
    pub(crate) fn sessions(&self) -> Option<&Arc<Sessions<D>>> {
        self.sessions.as_ref()
    }

    /// The session store, if it holds `request`.
    fn session_for(&self, request: &LockRequest) -> Option<&Arc<Sessions<D>>> {
        self.sessions
            .as_ref()
            .filter(|_| (self.session_kinds)(request.kind))
    }

    /// Registers a waiting lease request for wake-ups.
    pub(crate) fn enqueue(&self, ticket: &Ticket) {
        if ticket.request.wait && self.session_for(&ticket.request).is_none() {
            self.wakers.register(ticket);
        }
    }

    /// The poll of a session-held request, or `None` for a lease.
    pub(crate) async fn poll_session(&self, ticket: &mut Ticket) -> Option<Result<PollOutcome>> {
        let sessions = self.session_for(&ticket.request)?.clone();
        let request = ticket.request.clone();
        let slot = ticket_slot::<D>(ticket);
        let polled = poll_detached(ticket, D::BACKEND, async move {
            sessions.poll(&request, &slot).await
        })
        .await;
        Some(polled)
    }

    /// Waits for the request's session wait to end, or for a wake-up of its lease request,
    /// or for `backstop`.
    pub(crate) async fn wait_for_change(&self, ticket: &Ticket, backstop: Option<Duration>) {
        match self.session_for(&ticket.request) {
            Some(sessions) => {
                if let Some(slot) = slot_in::<D>(ticket.state()) {
                    sessions.wait_for_change(&slot, backstop).await;
                }
            }
            None => self.wakers.wait(ticket, backstop).await,
        }
    }

    /// Stops wake-ups for the ticket and waits for its poll in flight; then cancels a
    /// session-held request (`Some`), or leaves a lease to the caller (`None`).
    pub(crate) async fn cancel_session(&self, ticket: &mut Ticket) -> Option<Result<()>> {
        let token = ticket.request.token.clone();
        self.wakers.forget(&token);
        settled(ticket).await;
        let sessions = self.session_for(&ticket.request)?.clone();
        let Some(slot) = slot_in::<D>(ticket.state()) else {
            // Never polled: nothing was asked of the server.
            return Some(Ok(()));
        };
        Some(
            detached(
                D::BACKEND,
                async move { sessions.cancel(&slot, &token).await },
            )
            .await,
        )
    }

    /// Whether `grant` is a session lock granted before its server went away: the server
    /// forgot it, though its renewals have not said so yet.
    pub(crate) fn grant_lost(&self, grant: &Grant) -> bool {
        let Some(sessions) = self.sessions.as_ref() else {
            return false;
        };
        slot_in::<D>(grant.state()).is_some_and(|slot| sessions.lost(&slot))
    }

    /// In session mode, news of session locks that may have been lost all at once.
    pub(crate) fn loss_news(&self) -> Option<tokio::sync::watch::Receiver<u64>> {
        self.sessions.as_ref().map(|sessions| sessions.loss_news())
    }

    /// Releases a session lock (`Some`), or leaves a lease to the caller (`None`).
    pub(crate) async fn release_session(&self, lease: &Grant) -> Option<Result<LeaseOutcome>> {
        let sessions = self.sessions.as_ref()?.clone();
        let slot = slot_in::<D>(lease.state())?;
        let released = detached(D::BACKEND, async move { sessions.release(&slot).await }).await;
        Some(released.map(outcome))
    }

    /// Writes `grant.name`'s note (the server's time of the write; `NotHeld` if the grant
    /// is gone): a session-held grant's on its own connection, a lease's through `lease`.
    pub(crate) async fn write_note<F, Fut>(
        &self,
        grant: &Grant,
        (fencing_token, value): (u64, &str),
        quiet_for: Option<Duration>,
        lease: F,
    ) -> Result<Option<u64>>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<Option<u64>>>,
    {
        distlock_core::backend::check_note(value)?;
        let session = self
            .sessions
            .as_ref()
            .and_then(|sessions| Some((sessions, slot_in::<D>(grant.state())?)));
        let Some((sessions, slot)) = session else {
            return lease().await;
        };
        let note = NoteWrite {
            value,
            fence: i64::try_from(fencing_token).unwrap_or(i64::MAX),
            quiet_ms: crate::notes::quiet_ms(quiet_for),
        };
        match sessions.write_note(&slot, &grant.name, &note).await? {
            Some(at) => Ok(u64::try_from(at).ok()),
            None => Err(distlock_core::backend::note_refused(&grant.name)),
        }
    }

    /// Breaks lock `name`'s grants with `fencing_token` (every grant: `None`): those of the
    /// lease table through `force`. A session-mode lock lives as long as its holder's
    /// connection and cannot be deleted by another: one seen (through `inspect`) before
    /// `force` and still there after it is refused with `ends()`, the statements that end
    /// the connections holding it.
    pub(crate) async fn force_release<I, Seen, Ends>(
        &self,
        (name, fencing_token): (&str, Option<u64>),
        inspect: I,
        force: impl Future<Output = Result<Vec<HolderInfo>>>,
        ends: impl FnOnce() -> Ends,
    ) -> Result<Vec<HolderInfo>>
    where
        I: Fn() -> Seen,
        Seen: Future<Output = Result<Vec<LockState>>>,
        Ends: Future<Output = Result<Vec<String>>>,
    {
        let seen = match self.sessions {
            Some(_) => breakable(&inspect().await?, fencing_token),
            None => vec![],
        };
        let broken = force.await?;
        if seen.is_empty() || !still_held(&inspect().await?, &seen) {
            return Ok(broken);
        }
        Err(session_break_refused(
            name,
            broken.len(),
            D::BACKEND,
            &ends().await?,
        ))
    }
}

/// The fencing tokens of the holders `states` show that a forced release with
/// `fencing_token` would break.
fn breakable(states: &[LockState], fencing_token: Option<u64>) -> Vec<u64> {
    states
        .iter()
        .flat_map(|state| &state.holders)
        .map(|holder| holder.fencing_token)
        .filter(|token| fencing_token.is_none_or(|t| t == *token))
        .collect()
}

/// Whether a holder with one of `seen`'s tokens is among those `states` show, read once
/// the lease table's grants were broken: a session-mode lock.
fn still_held(states: &[LockState], seen: &[u64]) -> bool {
    states
        .iter()
        .flat_map(|state| &state.holders)
        .any(|holder| seen.contains(&holder.fencing_token))
}

/// The refusal to break `name`'s session-mode lock, which lives as long as its holder's
/// connection: `ends` are the statements that end the connections holding it now; `broken`
/// lease grants went before it.
fn session_break_refused(
    name: &str,
    broken: usize,
    backend: &'static str,
    ends: &[String],
) -> Error {
    let broke = match broken {
        0 => String::new(),
        n => format!(" ({n} lease grant(s) of it were broken)"),
    };
    let how = match ends {
        [] => "it was released meanwhile; run the break again".to_owned(),
        _ => format!("end the holder's connection instead: {}", ends.join("; ")),
    };
    Error::new(
        ErrorKind::Unsupported,
        format!(
            "lock {name:?} is held by a session-mode lock, which lives as long as its holder's database connection and cannot be deleted by another{broke}; {how}"
        ),
    )
    .with_backend(backend)
    .with_operation("force_release")
}
