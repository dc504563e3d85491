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
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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
    /// How grants stay alive: a lease per grant, or the client's session.
    pub liveness: Liveness,
    /// How often a waiting ticket must be polled to keep its place in the queue (its entry
    /// expires otherwise, so a vanished waiter never blocks those behind it). `None`: the
    /// place is kept without polls, and a waiter of a push backend polls only when woken or
    /// when its last [`PollOutcome::Pending`](super::PollOutcome::Pending) asked.
    pub waiter_refresh: Option<Duration>,
}

impl Capabilities {
    /// Every primitive supported, grants breakable, grants by lease, waiter entries refreshed every
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
            liveness: Liveness::Lease,
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
/// # use distlock_core::{HolderInfo, HolderMeta, LockKind};
/// let holder = HolderInfo {
///     owner: "svc:1".into(),
///     kind: LockKind::Mutex,
///     permits: 1,
///     fencing_token: 3,
///     remaining_ms: Some(2500),
///     no_expiry: false,
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
    /// Milliseconds of lease left; `None` for a grant that lives as long as its holder's
    /// session (it has no lease of its own).
    pub remaining_ms: Option<u64>,
    /// A foreign holder that neither expires nor ends with a session: a Redis key without
    /// a TTL, a persistent ZooKeeper node, an etcd key on no lease. Only deleting it frees
    /// the lock.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub no_expiry: bool,
    /// Host, pid and acquisition time.
    pub meta: HolderMeta,
}

/// One queued request, as shown by `distlock status`. In JSON its `meta` says
/// `waiting_since_unix_ms`, not `acquired_at_unix_ms`: nothing was acquired yet.
///
/// # Examples
///
/// ```
/// # use distlock_core::{WaiterInfo, HolderMeta, LockKind};
/// let waiter = WaiterInfo { owner: "svc:2".into(), kind: LockKind::Write, permits: 1,
///     fair: true, meta: HolderMeta::this_process() };
/// assert!(waiter.fair);
/// let json = serde_json::to_value(&waiter).unwrap();
/// assert_eq!(json["meta"]["waiting_since_unix_ms"], waiter.meta.acquired_at_unix_ms);
/// assert!(json["meta"].get("acquired_at_unix_ms").is_none());
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
    /// Host, pid and the time it started waiting (in `acquired_at_unix_ms`).
    #[serde(with = "waiting_meta")]
    pub meta: HolderMeta,
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
