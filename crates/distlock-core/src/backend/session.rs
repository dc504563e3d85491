//! How a backend's grants stay alive: by a lease of their own that the core renews, or by
//! the client's session, whose state the backend reports on one channel.

use tokio::time::Instant;

/// How the grants of a backend stay alive.
///
/// # Examples
///
/// ```
/// use distlock_core::backend::Liveness;
/// assert_ne!(Liveness::Lease, Liveness::Session);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Liveness {
    /// Each grant has a lease of its own (Redis, RedLock, the SQL lease tables); the core's
    /// watchdog renews it through [`Backend::renew_many`](super::Backend::renew_many).
    Lease,
    /// Grants live as long as the client's session (a ZooKeeper session, an etcd lease, a
    /// database connection). Nothing per lock is renewed; the backend reports the session's
    /// state through [`Backend::session`](super::Backend::session), and one expiry loses
    /// every grant of the client at once.
    Session,
}

/// One session of a client: which one, and how it stands.
///
/// # Examples
///
/// ```
/// use distlock_core::backend::{Session, SessionState};
/// let session = Session::new(1, SessionState::Expired);
/// assert!(!session.is_alive());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Session {
    /// Which session: a new one (after an expiry) gets a new id, and grants made in an
    /// earlier one are lost.
    pub id: u64,
    /// How it stands.
    pub state: SessionState,
}

impl Session {
    /// Session `id` in `state`.
    ///
    /// # Examples
    ///
    /// ```
    /// use distlock_core::backend::{Session, SessionState};
    /// let session = Session::new(1, SessionState::Expired);
    /// assert!(!session.is_alive());
    /// ```
    pub fn new(id: u64, state: SessionState) -> Self {
        Session { id, state }
    }

    /// Whether grants made in this session may still be valid now.
    ///
    /// # Examples
    ///
    /// See [`Session`].
    pub fn is_alive(&self) -> bool {
        self.valid_until()
            .is_some_and(|until| Instant::now() < until)
    }

    /// Until when grants made in this session are surely valid, or `None` once it expired.
    ///
    /// # Examples
    ///
    /// ```
    /// use distlock_core::backend::{Session, SessionState};
    /// let until = tokio::time::Instant::now();
    /// let session = Session::new(1, SessionState::connected(until));
    /// assert_eq!(session.valid_until(), Some(until));
    /// ```
    pub fn valid_until(&self) -> Option<Instant> {
        match self.state {
            SessionState::Connected { valid_until } => Some(valid_until),
            SessionState::Suspended { valid_until, .. } => Some(valid_until),
            SessionState::Expired => None,
        }
    }
}

/// How a session stands.
///
/// # Examples
///
/// ```
/// use distlock_core::backend::SessionState;
/// let now = tokio::time::Instant::now();
/// let state = SessionState::suspended(now, now);
/// assert!(matches!(state, SessionState::Suspended { .. }));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SessionState {
    /// The session is in touch with the server. `valid_until` is the latest moment, on this
    /// process's monotonic clock, before which the server cannot have expired it: the last
    /// contact plus the session timeout, less drift and a margin. Backends move it forward
    /// as the server answers.
    #[non_exhaustive]
    Connected {
        /// Grants are surely valid until then.
        valid_until: Instant,
    },
    /// The connection was lost at `since`; the session may still live on the server until
    /// `valid_until`. Every grant is `AtRisk`.
    #[non_exhaustive]
    Suspended {
        /// When contact was lost.
        since: Instant,
        /// Grants are surely valid until then, and `Lost` after.
        valid_until: Instant,
    },
    /// The session ended: every grant made in it is gone.
    Expired,
}

impl SessionState {
    /// In touch with the server, valid until `valid_until`.
    ///
    /// # Examples
    ///
    /// ```
    /// use distlock_core::backend::{Session, SessionState};
    /// let soon = tokio::time::Instant::now() + std::time::Duration::from_secs(5);
    /// assert!(Session::new(1, SessionState::connected(soon)).is_alive());
    /// ```
    pub fn connected(valid_until: Instant) -> Self {
        SessionState::Connected { valid_until }
    }

    /// Out of touch since `since`, maybe alive on the server until `valid_until`.
    ///
    /// # Examples
    ///
    /// ```
    /// use distlock_core::backend::{Session, SessionState};
    /// let now = tokio::time::Instant::now();
    /// let state = SessionState::suspended(now, now + std::time::Duration::from_secs(5));
    /// assert_eq!(Session::new(1, state).valid_until(), Some(now + std::time::Duration::from_secs(5)));
    /// ```
    pub fn suspended(since: Instant, valid_until: Instant) -> Self {
        SessionState::Suspended { since, valid_until }
    }
}
