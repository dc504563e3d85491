//! What a backend declares about itself, and what it reports of one lock's state.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::request::LockKind;
use super::session::Liveness;
use crate::owner::HolderMeta;

/// What a backend can do and how it works; conformance suites are chosen by these, never by
/// backend names.
///
/// # Examples
///
/// ```
/// use distlock_core::backend::{Capabilities, Liveness};
/// let caps = Capabilities::full(true);
/// assert!(caps.fencing && caps.push_wakeups);
/// assert_eq!(caps.liveness, Liveness::Lease);
///
/// // A backend declares what it has on top of the least a backend of its liveness does.
/// let mut caps = Capabilities::session();
/// caps.fencing = true;
/// assert!(!caps.rwlock && caps.waiter_refresh.is_none());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Capabilities {
    /// Shared read/write locks.
    pub rwlock: bool,
    /// Counting semaphores.
    pub semaphore: bool,
    /// FIFO grants with `fair`.
    pub fair: bool,
    /// Fencing tokens strictly increasing per name, in grant order, for every kind.
    pub fencing: bool,
    /// Fencing tokens survive a restart of every client process.
    pub durable_fencing: bool,
    /// Several OS processes can contend through it.
    pub cross_process: bool,
    /// The backend wakes waiters itself; otherwise the core polls with backoff.
    pub push_wakeups: bool,
    /// Another holder's grant of every kind can be broken
    /// ([`Backend::force_release`](super::Backend::force_release)); where not, breaking
    /// the grants it cannot is refused with `Unsupported`.
    pub force_release: bool,
    /// Each lock's note, written under a live grant with the store's clock
    /// ([`Backend::write_note`](super::Backend::write_note)): a job's run record, for
    /// `once_per` and `job_status`. Where not, writing and reading notes are refused with
    /// `Unsupported`.
    pub notes: bool,
    /// A holder can hand its exclusive grant to another process, which adopts it with a
    /// new fencing token ([`Backend::adopt`](super::Backend::adopt),
    /// [`Guard::hand_off`](crate::Guard::hand_off)). Where not, both are refused with
    /// `Unsupported`.
    pub adopt: bool,
    /// How grants stay alive: a lease per grant, or the client's session.
    pub liveness: Liveness,
    /// A grant can stay in the store after its client lets go of it, until its lease
    /// ends: kept there for a job's `at_least` while the process exits
    /// ([`Guard::release_at`](crate::Guard::release_at)). False where a grant lives by a
    /// session or by a connection of its own (SQL session mode), which ends with its
    /// client.
    pub detachable: bool,
    /// How often a waiting ticket must be polled to keep its place in the queue (its entry
    /// expires otherwise, so a vanished waiter never blocks those behind it). `None`: the
    /// place is kept without polls, and a waiter of a push backend polls only when woken or
    /// when its last [`PollOutcome::Pending`](super::PollOutcome::Pending) asked.
    pub waiter_refresh: Option<Duration>,
}

impl Capabilities {
    /// A backend whose grants live by a lease each ([`Liveness::Lease`]), with nothing but
    /// mutexes across processes, waiters polled: no read/write locks, semaphores, fair
    /// queue, fencing, push wake-ups, breaking or notes, waiter entries refreshed every
    /// [`WAITER_REFRESH`]. The backend sets the fields of what it has.
    ///
    /// # Examples
    ///
    /// See [`Capabilities`].
    pub fn lease() -> Self {
        Capabilities {
            rwlock: false,
            semaphore: false,
            fair: false,
            fencing: false,
            durable_fencing: false,
            cross_process: true,
            push_wakeups: false,
            force_release: false,
            notes: false,
            adopt: false,
            liveness: Liveness::Lease,
            detachable: true,
            waiter_refresh: Some(WAITER_REFRESH),
        }
    }

    /// A backend whose grants live by the client's session ([`Liveness::Session`]), with
    /// nothing but mutexes across processes, whose waiters keep their place without polls
    /// (`waiter_refresh: None`). The backend sets the fields of what it has.
    ///
    /// # Examples
    ///
    /// See [`Capabilities`].
    pub fn session() -> Self {
        Capabilities {
            liveness: Liveness::Session,
            detachable: false,
            waiter_refresh: None,
            ..Capabilities::lease()
        }
    }

    /// Every primitive supported, grants breakable, notes kept, grants by lease, waiter entries refreshed every
    /// [`WAITER_REFRESH`]; `push_wakeups` as given.
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
            force_release: true,
            notes: true,
            adopt: false,
            liveness: Liveness::Lease,
            detachable: true,
            waiter_refresh: Some(WAITER_REFRESH),
        }
    }
}

/// The usual refresh period of waiters' queue entries: backends whose entries expire keep
/// them at least twice as long.
pub const WAITER_REFRESH: Duration = Duration::from_secs(2);

/// One grant, as shown by `distlock status`.
///
/// # Examples
///
/// ```
/// # use distlock_core::{HolderInfo, LockKind};
/// let mut holder = HolderInfo::new("svc:1", LockKind::Mutex, 3);
/// holder.remaining_ms = Some(2500);
/// assert_eq!(holder.fencing_token, 3);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct HolderInfo {
    /// The owner token.
    pub owner: String,
    /// What is held.
    pub kind: LockKind,
    /// How many permits.
    pub permits: u32,
    /// The grant's fencing token.
    pub fencing_token: u64,
    /// Milliseconds of lease left; `None` for a grant that lives as long as its holder's
    /// session (it has no lease of its own).
    pub remaining_ms: Option<u64>,
    /// A foreign holder that neither expires nor ends with a session: a Redis key without
    /// a TTL, a persistent ZooKeeper node, an etcd key on no lease. Only deleting it frees
    /// the lock.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub no_expiry: bool,
    /// What the store names this grant where that is not its owner, so an operator finds
    /// it there: a holder's field `<uuid>:<thread id>` in a lock hash of Redisson's layout.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stored_as: Option<String>,
    /// Host, pid and acquisition time.
    pub meta: HolderMeta,
}

impl HolderInfo {
    /// A holder of `kind` whose grant has `fencing_token`, for one permit, without a known
    /// remaining lease, stamped with this process's metadata until the backend sets the
    /// holder's own.
    ///
    /// # Examples
    ///
    /// ```
    /// use distlock_core::{HolderInfo, LockKind};
    /// let mut holder = HolderInfo::new("worker-1", LockKind::Mutex, 7);
    /// holder.remaining_ms = Some(2_000);
    /// assert_eq!((holder.permits, holder.fencing_token), (1, 7));
    /// ```
    pub fn new(owner: impl Into<String>, kind: LockKind, fencing_token: u64) -> Self {
        HolderInfo {
            owner: owner.into(),
            kind,
            permits: 1,
            fencing_token,
            remaining_ms: None,
            no_expiry: false,
            stored_as: None,
            meta: HolderMeta::this_process(),
        }
    }
}

/// One queued request, as shown by `distlock status`. In JSON its `meta` says
/// `waiting_since_unix_ms`, not `acquired_at_unix_ms`: nothing was acquired yet.
///
/// # Examples
///
/// ```
/// # use distlock_core::{WaiterInfo, LockKind};
/// let mut waiter = WaiterInfo::new("svc:2", LockKind::Write);
/// waiter.fair = true;
/// assert!(waiter.fair);
/// let json = serde_json::to_value(&waiter).unwrap();
/// assert_eq!(json["meta"]["waiting_since_unix_ms"], waiter.meta.acquired_at_unix_ms);
/// assert!(json["meta"].get("acquired_at_unix_ms").is_none());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct WaiterInfo {
    /// The owner token.
    pub owner: String,
    /// What is asked for.
    pub kind: LockKind,
    /// How many permits.
    pub permits: u32,
    /// Whether it waits in FIFO order.
    pub fair: bool,
    /// Host, pid and the time it started waiting (in `acquired_at_unix_ms`).
    #[serde(with = "waiting_meta")]
    pub meta: HolderMeta,
}

impl WaiterInfo {
    /// A waiter of `kind` for one permit, not fair, stamped with this process's metadata
    /// until the backend sets the waiter's own.
    ///
    /// # Examples
    ///
    /// ```
    /// use distlock_core::{LockKind, WaiterInfo};
    /// let mut waiter = WaiterInfo::new("worker-2", LockKind::Write);
    /// waiter.fair = true;
    /// assert_eq!(waiter.permits, 1);
    /// ```
    pub fn new(owner: impl Into<String>, kind: LockKind) -> Self {
        WaiterInfo {
            owner: owner.into(),
            kind,
            permits: 1,
            fair: false,
            meta: HolderMeta::this_process(),
        }
    }
}

/// A waiter's [`HolderMeta`] in JSON, whose time is when it started waiting.
mod waiting_meta {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    use crate::owner::HolderMeta;

    #[derive(Serialize, Deserialize)]
    struct WaitingMeta {
        host: String,
        pid: u32,
        waiting_since_unix_ms: u64,
    }

    pub(super) fn serialize<S: Serializer>(meta: &HolderMeta, out: S) -> Result<S::Ok, S::Error> {
        WaitingMeta {
            host: meta.host.clone(),
            pid: meta.pid,
            waiting_since_unix_ms: meta.acquired_at_unix_ms,
        }
        .serialize(out)
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(input: D) -> Result<HolderMeta, D::Error> {
        let meta = WaitingMeta::deserialize(input)?;
        Ok(HolderMeta {
            host: meta.host,
            pid: meta.pid,
            acquired_at_unix_ms: meta.waiting_since_unix_ms,
        })
    }
}

/// The state of one lock name.
///
/// # Examples
///
/// ```
/// let state = distlock_core::LockState::new("a");
/// assert!(state.holders.is_empty());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct LockState {
    /// The lock's name.
    pub name: String,
    /// The last fencing token minted for this name; on a store whose names share a
    /// counter (Redis: a cluster slot's), that counter's, which is at least this name's
    /// last.
    pub last_fencing_token: u64,
    /// Current grants.
    pub holders: Vec<HolderInfo>,
    /// Queued requests, in queue order.
    pub waiters: Vec<WaiterInfo>,
}

impl LockState {
    /// Lock `name` with no holder, no waiter, and no token granted yet.
    ///
    /// # Examples
    ///
    /// ```
    /// use distlock_core::{HolderInfo, LockKind, LockState};
    /// let mut state = LockState::new("orders/42");
    /// state.holders.push(HolderInfo::new("worker-1", LockKind::Mutex, 3));
    /// state.last_fencing_token = 3;
    /// assert!(state.waiters.is_empty());
    /// ```
    pub fn new(name: impl Into<String>) -> Self {
        LockState {
            name: name.into(),
            last_fencing_token: 0,
            holders: Vec::new(),
            waiters: Vec::new(),
        }
    }
}
