//! The backend trait: the narrow set of operations only a backend can do.
//!
//! Every backend speaks in *tickets*: [`Backend::enqueue`] registers a request and returns a
//! ticket, [`Backend::poll`] asks whether the ticket is granted, [`Backend::wait_for_change`]
//! sleeps until something that may grant it happened, and [`Backend::cancel`] withdraws it.
//! Queue-based stores (ZooKeeper's sequential nodes, etcd's revisions) create their queue
//! entry in `enqueue`; try-and-retry stores (Redis, SQL) may make `enqueue` cheap and do the
//! work in `poll`. The generic machinery — deadlines, backoff, watchdog, lease health,
//! reentrancy, metrics, tracing — lives in the core and is written once.

use std::fmt;
use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::error::Result;
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
/// use distlock_core::{HolderMeta, LockKind, LockRequest, Owner};
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

/// A request registered with a backend, waiting for its grant.
///
/// # Examples
///
/// ```
/// # use std::time::Duration;
/// # use distlock_core::{HolderMeta, LockKind, LockRequest, Owner, Ticket};
/// # let request = LockRequest { name: "n".into(), kind: LockKind::Mutex, permits: 1,
/// #   owner: Owner::random(), token: "t".into(), ttl: Duration::from_secs(1), fair: false,
/// #   wait: true, meta: HolderMeta::this_process() };
/// let ticket = Ticket::new(request, Some(7));
/// assert_eq!(ticket.seq, Some(7));
/// ```
#[derive(Debug, Clone)]
pub struct Ticket {
    /// The request this ticket stands for.
    pub request: LockRequest,
    /// The backend's queue position, where it has one.
    pub seq: Option<u64>,
}

impl Ticket {
    /// A ticket for `request` at queue position `seq`.
    ///
    /// # Examples
    ///
    /// See [`Ticket`].
    pub fn new(request: LockRequest, seq: Option<u64>) -> Self {
        Ticket { request, seq }
    }

    /// The key the grant will be stored under.
    ///
    /// # Examples
    ///
    /// See [`LeaseKey`].
    pub fn lease_key(&self) -> LeaseKey {
        LeaseKey {
            name: self.request.name.clone(),
            token: self.request.token.clone(),
        }
    }
}

/// What identifies one grant: the lock's name and the request's unique token.
///
/// # Examples
///
/// ```
/// let key = distlock_core::LeaseKey { name: "a".into(), token: "t".into() };
/// assert_eq!(key.name, "a");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct LeaseKey {
    /// The lock's name.
    pub name: String,
    /// The grant's unique token.
    pub token: String,
}

/// The answer to [`Backend::poll`].
///
/// # Examples
///
/// ```
/// let granted = distlock_core::PollOutcome::Granted { fencing_token: 9 };
/// assert!(matches!(granted, distlock_core::PollOutcome::Granted { .. }));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PollOutcome {
    /// The ticket holds the lock from now on, with this fencing token.
    Granted {
        /// Strictly greater than every token granted before for this name.
        fencing_token: u64,
    },
    /// Not yet. `retry_within` bounds how long the caller may wait before polling again
    /// (typically the current holders' remaining lease).
    Pending {
        /// Poll again no later than this.
        retry_within: Option<Duration>,
    },
}

/// The answer to [`Backend::renew`] and [`Backend::release`].
///
/// # Examples
///
/// ```
/// assert_ne!(distlock_core::LeaseOutcome::Done, distlock_core::LeaseOutcome::NotHeld);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeaseOutcome {
    /// Renewed, or released.
    Done,
    /// The grant was already gone (expired, released, or taken over).
    NotHeld,
}

/// What a backend can do; conformance tests are gated on these, never on backend names.
///
/// # Examples
///
/// ```
/// let caps = distlock_core::Capabilities::full(true);
/// assert!(caps.fencing && caps.push_wakeups);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capabilities {
    /// Shared read/write locks.
    pub rwlock: bool,
    /// Counting semaphores.
    pub semaphore: bool,
    /// FIFO grants with `fair`.
    pub fair: bool,
    /// Fencing tokens strictly increasing per name.
    pub fencing: bool,
    /// Fencing tokens survive a restart of every client process.
    pub durable_fencing: bool,
    /// Several OS processes can contend through it.
    pub cross_process: bool,
    /// The backend wakes waiters itself; otherwise the core polls with backoff.
    pub push_wakeups: bool,
}

impl Capabilities {
    /// Every primitive supported; `push_wakeups` as given.
    ///
    /// # Examples
    ///
    /// See [`Capabilities`].
    pub fn full(push_wakeups: bool) -> Self {
        Capabilities {
            rwlock: true,
            semaphore: true,
            fair: true,
            fencing: true,
            durable_fencing: true,
            cross_process: true,
            push_wakeups,
        }
    }
}

/// One grant, as shown by `distlock status`.
///
/// # Examples
///
/// ```
/// # use distlock_core::{HolderInfo, HolderMeta, LockKind};
/// let holder = HolderInfo {
///     owner: "svc:1".into(),
///     kind: LockKind::Mutex,
///     permits: 1,
///     fencing_token: 3,
///     remaining_ms: 2500,
///     meta: HolderMeta::this_process(),
/// };
/// assert_eq!(holder.fencing_token, 3);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HolderInfo {
    /// The owner token.
    pub owner: String,
    /// What is held.
    pub kind: LockKind,
    /// How many permits.
    pub permits: u32,
    /// The grant's fencing token.
    pub fencing_token: u64,
    /// Milliseconds of lease left.
    pub remaining_ms: u64,
    /// Host, pid and acquisition time.
    pub meta: HolderMeta,
}

/// One queued request, as shown by `distlock status`.
///
/// # Examples
///
/// ```
/// # use distlock_core::{WaiterInfo, HolderMeta, LockKind};
/// let waiter = WaiterInfo { owner: "svc:2".into(), kind: LockKind::Write, permits: 1,
///     fair: true, meta: HolderMeta::this_process() };
/// assert!(waiter.fair);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WaiterInfo {
    /// The owner token.
    pub owner: String,
    /// What is asked for.
    pub kind: LockKind,
    /// How many permits.
    pub permits: u32,
    /// Whether it waits in FIFO order.
    pub fair: bool,
    /// Host, pid and the time it started waiting.
    pub meta: HolderMeta,
}

/// The state of one lock name.
///
/// # Examples
///
/// ```
/// let state = distlock_core::LockState { name: "a".into(), last_fencing_token: 0,
///     holders: vec![], waiters: vec![] };
/// assert!(state.holders.is_empty());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LockState {
    /// The lock's name.
    pub name: String,
    /// The last fencing token minted for this name.
    pub last_fencing_token: u64,
    /// Current grants.
    pub holders: Vec<HolderInfo>,
    /// Queued requests, in queue order.
    pub waiters: Vec<WaiterInfo>,
}

/// A lock store. Implement this to add a backend; the core supplies everything else.
///
/// Implementations must make `poll` atomic (grant, fencing-token increment and dequeue in
/// one step), must make `renew`, `release` and `cancel` compare the request token so a stale
/// holder never touches a newer grant, and must make a `poll` of a ticket whose request does
/// not `wait` leave nothing behind when it answers `Pending`.
///
/// # Examples
///
/// ```
/// # async fn demo() -> distlock_core::Result<()> {
/// use std::sync::Arc;
/// use distlock_core::{Backend, Client, MemoryBackend};
///
/// let backend: Arc<dyn Backend> = Arc::new(MemoryBackend::new());
/// let client = Client::with_backend(backend);
/// let guard = client.mutex("a").lock().await?;
/// # Ok(()) }
/// ```
#[async_trait]
pub trait Backend: Send + Sync + fmt::Debug + 'static {
    /// The URL scheme, used in errors, logs and metrics.
    fn scheme(&self) -> &'static str;

    /// What this backend supports.
    fn capabilities(&self) -> Capabilities;

    /// Registers a request and returns its ticket.
    async fn enqueue(&self, request: LockRequest) -> Result<Ticket>;

    /// Asks whether the ticket is granted, granting it if it now may be. A waiting ticket
    /// keeps its place in the queue by being polled.
    async fn poll(&self, ticket: &Ticket) -> Result<PollOutcome>;

    /// Waits until something happened that may let the ticket through, or `backstop` passed.
    async fn wait_for_change(&self, ticket: &Ticket, backstop: Duration) -> Result<()>;

    /// Withdraws a ticket: removes its queue entry and any grant made under its token.
    async fn cancel(&self, ticket: &Ticket) -> Result<()>;

    /// Extends a grant to `ttl` from now, if it is still ours.
    async fn renew(&self, lease: &LeaseKey, ttl: Duration) -> Result<LeaseOutcome>;

    /// Extends many grants to `ttl` from now, answering for each in order. The watchdogs of
    /// one client renew through this, up to [`BATCH`](crate::BATCH) leases a call; backends
    /// that can should do it in one round trip. The default renews them one by one.
    async fn renew_many(&self, leases: &[LeaseKey], ttl: Duration) -> Result<Vec<LeaseOutcome>> {
        let mut outcomes = Vec::with_capacity(leases.len());
        for lease in leases {
            outcomes.push(self.renew(lease, ttl).await?);
        }
        Ok(outcomes)
    }

    /// Deletes a grant, if it is still ours.
    async fn release(&self, lease: &LeaseKey) -> Result<LeaseOutcome>;

    /// The state of one lock, or of every lock with holders or waiters.
    async fn inspect(&self, name: Option<&str>) -> Result<Vec<LockState>>;

    /// What [`Backend::floor_round`] does, for benchmark reports.
    fn floor_op(&self) -> &'static str;

    /// One round of the backend's cheapest comparable operation, the floor every lock
    /// operation is measured against.
    async fn floor_round(&self) -> Result<()>;
}
