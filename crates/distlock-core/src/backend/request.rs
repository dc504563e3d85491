//! What a request asks for: the kind of grant and the request as the core hands it over.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::owner::{HolderMeta, Owner};

/// What a request asks for.
///
/// # Examples
///
/// ```
/// use distlock_core::LockKind;
///
/// assert!(LockKind::Mutex.is_exclusive());
/// assert!(!LockKind::Semaphore { limit: 4 }.is_exclusive());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum LockKind {
    /// Exclusive ownership of a [`Mutex`](crate::Mutex).
    Mutex,
    /// A shared hold of an [`RwLock`](crate::RwLock).
    Read,
    /// The exclusive hold of an [`RwLock`](crate::RwLock).
    Write,
    /// Permits of a [`Semaphore`](crate::Semaphore) with `limit` permits in all.
    Semaphore {
        /// How many permits the semaphore has.
        limit: u32,
    },
}

impl LockKind {
    /// Whether a grant of this kind excludes every other grant.
    ///
    /// # Examples
    ///
    /// ```
    /// assert!(distlock_core::LockKind::Write.is_exclusive());
    /// ```
    pub fn is_exclusive(self) -> bool {
        matches!(self, LockKind::Mutex | LockKind::Write)
    }

    /// A stable text form for storage: `mutex`, `read`, `write`, `semaphore`.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(distlock_core::LockKind::Read.as_str(), "read");
    /// ```
    pub fn as_str(self) -> &'static str {
        match self {
            LockKind::Mutex => "mutex",
            LockKind::Read => "read",
            LockKind::Write => "write",
            LockKind::Semaphore { .. } => "semaphore",
        }
    }

    /// The inverse of [`LockKind::as_str`], with the semaphore's limit stored beside it.
    ///
    /// # Examples
    ///
    /// ```
    /// use distlock_core::LockKind;
    /// assert_eq!(LockKind::parse("semaphore", 3), Some(LockKind::Semaphore { limit: 3 }));
    /// assert_eq!(LockKind::parse("bogus", 0), None);
    /// ```
    pub fn parse(text: &str, limit: u32) -> Option<LockKind> {
        match text {
            "mutex" => Some(LockKind::Mutex),
            "read" => Some(LockKind::Read),
            "write" => Some(LockKind::Write),
            "semaphore" => Some(LockKind::Semaphore { limit }),
            _ => None,
        }
    }

    /// The semaphore's limit, or 1 for locks (stored beside the kind).
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(distlock_core::LockKind::Mutex.limit(), 1);
    /// ```
    pub fn limit(self) -> u32 {
        match self {
            LockKind::Semaphore { limit } => limit,
            _ => 1,
        }
    }
}

/// One request for a grant, as the core hands it to a backend.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use distlock_core::{HolderMeta, LockKind, Owner};
/// use distlock_core::backend::LockRequest;
///
/// let mut request = LockRequest::new("jobs/nightly", LockKind::Mutex, Owner::random(), "t-1");
/// request.ttl = Duration::from_secs(30);
/// assert!(request.kind.is_exclusive() && request.wait && request.permits == 1);
/// assert_eq!(request.meta.pid, HolderMeta::this_process().pid);
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct LockRequest {
    /// The lock's name (validated by the core).
    pub name: String,
    /// What is asked for.
    pub kind: LockKind,
    /// How many permits (1 for locks).
    pub permits: u32,
    /// Who the grant is for.
    pub owner: Owner,
    /// A token unique to this request; the grant is stored under it, and renew, release and
    /// cancel compare against it.
    pub token: String,
    /// Lease length.
    pub ttl: Duration,
    /// Grant in arrival order.
    pub fair: bool,
    /// Whether the caller will wait (`false`: a single attempt that leaves nothing behind).
    pub wait: bool,
    /// Who and where, for status displays.
    pub meta: HolderMeta,
}

impl LockRequest {
    /// A waiting request of `owner` for one permit of `kind` on lock `name`, stored under
    /// `token`, for the default TTL, not fair, stamped with this process's metadata.
    ///
    /// # Examples
    ///
    /// See [`LockRequest`].
    pub fn new(
        name: impl Into<String>,
        kind: LockKind,
        owner: Owner,
        token: impl Into<String>,
    ) -> Self {
        LockRequest {
            name: name.into(),
            kind,
            permits: 1,
            owner,
            token: token.into(),
            ttl: crate::options::DEFAULT_TTL,
            fair: false,
            wait: true,
            meta: HolderMeta::this_process(),
        }
    }
}
