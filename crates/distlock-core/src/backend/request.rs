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
/// let request = LockRequest {
///     name: "jobs/nightly".into(),
///     kind: LockKind::Mutex,
///     permits: 1,
///     owner: Owner::random(),
///     token: "t-1".into(),
///     ttl: Duration::from_secs(30),
///     fair: false,
///     wait: true,
///     meta: HolderMeta::this_process(),
/// };
/// assert!(request.kind.is_exclusive());
/// ```
#[derive(Debug, Clone)]
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
