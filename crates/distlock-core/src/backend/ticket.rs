//! Tickets and grants: a request's state while it waits, and a grant's handle once held.
//! Each carries the backend's own state for it (a node path, a revision, a flag), so no
//! backend keeps a side table keyed by request token.

use std::any::Any;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::request::{LockKind, LockRequest};

/// A request registered with a backend, waiting for its grant.
///
/// The core owns the ticket from before [`Backend::enqueue`](super::Backend::enqueue) until
/// the grant or the end of [`Backend::cancel`](super::Backend::cancel), and hands it to every
/// call mutably, so a backend keeps what it learns about the request in the ticket's state:
/// any `'static + Send + Sync` value of its own type.
///
/// # Examples
///
/// ```
/// # use std::time::Duration;
/// # use distlock_core::{LockKind, Owner};
/// use distlock_core::backend::{LockRequest, Ticket};
/// # let request = LockRequest::new("n", LockKind::Mutex, Owner::random(), "t");
///
/// #[derive(Default)]
/// struct Queued { position: u64 }
///
/// let mut ticket = Ticket::new(request);
/// assert!(ticket.state::<Queued>().is_none());
/// ticket.state_or_default::<Queued>().position = 7;
/// assert_eq!(ticket.state::<Queued>().map(|q| q.position), Some(7));
/// ```
pub struct Ticket {
    /// The request this ticket stands for.
    pub request: LockRequest,
    state: Option<Box<dyn Any + Send + Sync>>,
}

impl fmt::Debug for Ticket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Ticket")
            .field("request", &self.request)
            .field("has_state", &self.state.is_some())
            .finish()
    }
}

impl Ticket {
    /// A ticket for `request`, with no backend state yet.
    ///
    /// # Examples
    ///
    /// See [`Ticket`].
    pub fn new(request: LockRequest) -> Self {
        Ticket {
            request,
            state: None,
        }
    }

    /// The backend's state, if it is of type `S`.
    ///
    /// # Examples
    ///
    /// See [`Ticket`].
    pub fn state<S: Any>(&self) -> Option<&S> {
        self.state.as_deref()?.downcast_ref()
    }

    /// The backend's state, mutably, if it is of type `S`.
    ///
    /// # Examples
    ///
    /// See [`Ticket`].
    pub fn state_mut<S: Any>(&mut self) -> Option<&mut S> {
        self.state.as_deref_mut()?.downcast_mut()
    }

    /// The backend's state of type `S`, set to `S::default()` first if the ticket has none of
    /// that type.
    ///
    /// # Examples
    ///
    /// See [`Ticket`].
    pub fn state_or_default<S: Any + Send + Sync + Default>(&mut self) -> &mut S {
        if self.state::<S>().is_none() {
            self.state = Some(Box::new(S::default()));
        }
        self.state
            .as_deref_mut()
            .and_then(|s| s.downcast_mut())
            .unwrap_or_else(|| unreachable!("the state was just set to this type"))
    }

    /// Replaces the backend's state. What the ticket holds when it is granted becomes the
    /// grant's state.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use distlock_core::{LockKind, Owner};
    /// # use distlock_core::backend::{LockRequest, Ticket};
    /// # let request = LockRequest::new("n", LockKind::Mutex, Owner::random(), "t");
    /// let mut ticket = Ticket::new(request);
    /// ticket.set_state(String::from("/locks/n/_c_1-lock-0000000001"));
    /// assert_eq!(ticket.into_grant().state::<String>().map(String::as_str),
    ///     Some("/locks/n/_c_1-lock-0000000001"));
    /// ```
    pub fn set_state<S: Any + Send + Sync>(&mut self, state: S) {
        self.state = Some(Box::new(state));
    }

    /// The grant this ticket became: its name, token and kind, and the ticket's state.
    ///
    /// # Examples
    ///
    /// See [`Ticket::set_state`].
    pub fn into_grant(self) -> Grant {
        Grant {
            name: self.request.name,
            token: self.request.token,
            kind: self.request.kind,
            state: self.state.map(Arc::from),
        }
    }
}

/// A held grant, as the core hands it back to renew, release and inspect it: the lock's
/// name, the request's unique token, the kind, and the state the backend left in the
/// ticket when it granted it.
///
/// # Examples
///
/// ```
/// use distlock_core::LockKind;
/// use distlock_core::backend::Grant;
///
/// let grant = Grant::new("a", "t", LockKind::Mutex);
/// assert_eq!(grant.name, "a");
/// assert!(grant.state::<u64>().is_none());
/// ```
#[derive(Clone)]
pub struct Grant {
    /// The lock's name.
    pub name: String,
    /// The grant's unique token (the request's).
    pub token: String,
    /// What is held.
    pub kind: LockKind,
    state: Option<Arc<dyn Any + Send + Sync>>,
}

impl fmt::Debug for Grant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Grant")
            .field("name", &self.name)
            .field("token", &self.token)
            .field("kind", &self.kind)
            .finish()
    }
}

impl Grant {
    /// A grant with no backend state (for backends that address grants by name and token
    /// alone, and for tools that release a grant found by `status`).
    ///
    /// # Examples
    ///
    /// See [`Grant`].
    pub fn new(name: impl Into<String>, token: impl Into<String>, kind: LockKind) -> Self {
        Grant {
            name: name.into(),
            token: token.into(),
            kind,
            state: None,
        }
    }

    /// The backend's state, if it is of type `S`.
    ///
    /// # Examples
    ///
    /// See [`Ticket::set_state`].
    pub fn state<S: Any>(&self) -> Option<&S> {
        self.state.as_deref()?.downcast_ref()
    }
}

/// The first lease of a grant a store made on its own, for a waiting request, and told it
/// of by a message rather than in answer to a poll (a release that passed the lock
/// straight on to the next waiter, so that it changes hands in one trip instead of a
/// release and a poll). The grant is held from when the message arrives, but its lease is
/// short (a waiter that died or stopped must not keep the lock for a TTL): it runs from no
/// earlier than `from` for `lasts`, and the core confirms it with a renewal, for the TTL,
/// within the first quarter of that.
///
/// # Examples
///
/// See [`PollOutcome::handed_over`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HandedOver {
    /// No later than when the store made the grant, on this process's clock.
    pub from: Instant,
    /// How long the store keeps the grant unconfirmed.
    pub lasts: Duration,
}

/// The answer to [`Backend::poll`](super::Backend::poll).
///
/// # Examples
///
/// ```
/// use distlock_core::backend::PollOutcome;
/// let granted = PollOutcome::granted(9);
/// assert!(matches!(granted, PollOutcome::Granted { fencing_token: 9, session: None, .. }));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum PollOutcome {
    /// The ticket holds the lock from now on, with this fencing token.
    #[non_exhaustive]
    Granted {
        /// Strictly greater than every token granted before for this name, whatever the
        /// kind (readers and permits too).
        fencing_token: u64,
        /// The session the grant lives in, on a backend whose grants live by session
        /// ([`Liveness::Session`](super::Liveness::Session)); `None` for leases.
        session: Option<u64>,
        /// For a grant the store handed over on its own (see [`HandedOver`]): its first,
        /// short lease. `None` for a grant this poll made, whose lease runs for the
        /// request's TTL from when the poll was sent.
        handed_over: Option<HandedOver>,
    },
    /// Not yet. `retry_within` bounds how long the caller may wait before polling again
    /// (typically the current holders' remaining lease); `None` asks for no poll until a
    /// wake-up (or the backend's [`waiter_refresh`](super::Capabilities::waiter_refresh)).
    #[non_exhaustive]
    Pending {
        /// Poll again no later than this.
        retry_within: Option<Duration>,
    },
}

impl PollOutcome {
    /// A grant of a lease with `fencing_token`.
    ///
    /// # Examples
    ///
    /// See [`PollOutcome`].
    pub fn granted(fencing_token: u64) -> Self {
        PollOutcome::Granted {
            fencing_token,
            session: None,
            handed_over: None,
        }
    }

    /// A grant with `fencing_token` the store made on its own and told the waiter of (a
    /// release that passed the lock straight on), whose lease is `lease` until confirmed.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use distlock_core::backend::{HandedOver, PollOutcome};
    /// let lease = HandedOver {
    ///     from: tokio::time::Instant::now(),
    ///     lasts: Duration::from_millis(50),
    /// };
    /// let granted = PollOutcome::handed_over(9, lease);
    /// assert!(matches!(granted, PollOutcome::Granted { handed_over: Some(_), .. }));
    /// ```
    pub fn handed_over(fencing_token: u64, lease: HandedOver) -> Self {
        PollOutcome::Granted {
            fencing_token,
            session: None,
            handed_over: Some(lease),
        }
    }

    /// A grant with `fencing_token` that lives by session `session` (a backend of
    /// [`Liveness::Session`](super::Liveness::Session)).
    ///
    /// # Examples
    ///
    /// ```
    /// use distlock_core::backend::PollOutcome;
    /// let granted = PollOutcome::granted_in_session(9, 2);
    /// assert!(matches!(granted, PollOutcome::Granted { session: Some(2), .. }));
    /// ```
    pub fn granted_in_session(fencing_token: u64, session: u64) -> Self {
        PollOutcome::Granted {
            fencing_token,
            session: Some(session),
            handed_over: None,
        }
    }

    /// Not granted yet: poll again within `retry_within` (`None`: when woken, or at the
    /// backend's [`waiter_refresh`](super::Capabilities::waiter_refresh)).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use distlock_core::backend::PollOutcome;
    /// let pending = PollOutcome::pending(Some(Duration::from_millis(40)));
    /// assert!(matches!(pending, PollOutcome::Pending { retry_within: Some(_), .. }));
    /// ```
    pub fn pending(retry_within: Option<Duration>) -> Self {
        PollOutcome::Pending { retry_within }
    }
}

/// The answer for each grant of [`Backend::renew_many`](super::Backend::renew_many), and of
/// [`Backend::release`](super::Backend::release).
///
/// # Examples
///
/// ```
/// use distlock_core::backend::LeaseOutcome;
/// assert_ne!(LeaseOutcome::Done, LeaseOutcome::NotHeld);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeaseOutcome {
    /// Renewed, or released.
    Done,
    /// The grant was already gone (expired, released, or taken over).
    NotHeld,
}
