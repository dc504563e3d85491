//! The dialect-independent half of the lease table: row shapes, the grant decision over
//! them, and the status view. Each dialect runs the SQL; this module decides.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use distlock_core::backend::{Claim, LockRequest, Queued, STARVATION, admit};
use distlock_core::{Error, HolderInfo, HolderMeta, LockKind, LockState, Result, WaiterInfo};

/// How long a waiter's row lives without being rewritten. A waiter rewrites it every third
/// of this while it waits, so a waiter whose process died leaves the queue within it.
pub const WAITER_LEASE: Duration = Duration::from_secs(3);

/// How soon a waiter that yielded a free lock to the waiters ahead of it looks again.
pub const YIELDED_RETRY: Duration = Duration::from_millis(100);

/// How often a starving waiter polls: others yield to it, so it must not sleep long.
pub const STARVING_POLL: Duration = Duration::from_millis(5);

/// One row of `distlock_lease`.
///
/// # Examples
///
/// ```
/// # use distlock_sql::lease_table::HolderRow;
/// let row = HolderRow { token: "t".into(), owner: "o:1".into(), kind: "mutex".into(), lim: 1,
///     permits: 1, fence: 4, expires_at_ms: 10_000, host: "h".into(), pid: 1, acquired_at_ms: 0 };
/// assert_eq!(row.claim().unwrap().permits, 1);
/// assert_eq!(row.info(4_000).unwrap().remaining_ms, Some(6_000));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HolderRow {
    /// The grant's request token.
    pub token: String,
    /// The owner token.
    pub owner: String,
    /// `mutex`, `read`, `write` or `semaphore`.
    pub kind: String,
    /// The semaphore's limit (1 for locks).
    pub lim: i64,
    /// Permits held.
    pub permits: i64,
    /// Fencing token of the grant.
    pub fence: i64,
    /// Expiry, in ms since the Unix epoch.
    pub expires_at_ms: i64,
    /// Holder's host.
    pub host: String,
    /// Holder's pid.
    pub pid: i64,
    /// Grant time, in ms since the Unix epoch.
    pub acquired_at_ms: i64,
}

/// One row of `distlock_waiter`.
///
/// # Examples
///
/// ```
/// # use distlock_sql::lease_table::WaiterRow;
/// let row = WaiterRow { seq: 1, token: "t".into(), owner: "o:1".into(), kind: "write".into(),
///     lim: 1, permits: 1, fair: true, host: "h".into(), pid: 1, since_ms: 0, expires_at_ms: 1 };
/// assert!(row.queued(0).unwrap().claim.kind.is_exclusive());
/// assert!(row.starving(1_000));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WaiterRow {
    /// Arrival order.
    pub seq: i64,
    /// The request token.
    pub token: String,
    /// The owner token.
    pub owner: String,
    /// `mutex`, `read`, `write` or `semaphore`.
    pub kind: String,
    /// The semaphore's limit (1 for locks).
    pub lim: i64,
    /// Permits asked for.
    pub permits: i64,
    /// Whether it waits in FIFO order.
    pub fair: bool,
    /// Waiter's host.
    pub host: String,
    /// Waiter's pid.
    pub pid: i64,
    /// When it started waiting, in ms since the Unix epoch.
    pub since_ms: i64,
    /// When the row lapses unless its waiter polls again, in ms since the Unix epoch.
    pub expires_at_ms: i64,
}

fn parse_kind(kind: &str, lim: i64) -> Result<LockKind> {
    let lim = u32::try_from(lim).map_err(|_| corrupt(format!("limit {lim}")))?;
    LockKind::parse(kind, lim).ok_or_else(|| corrupt(format!("kind `{kind}`")))
}

fn parse_permits(permits: i64) -> Result<u32> {
    u32::try_from(permits).map_err(|_| corrupt(format!("permits {permits}")))
}

fn corrupt(what: String) -> Error {
    Error::new(
        distlock_core::ErrorKind::Backend,
        format!("the lease table holds an unreadable {what}"),
    )
}

impl HolderRow {
    /// The grant as `status` shows it at the store's time `now_ms`.
    ///
    /// # Examples
    ///
    /// See [`HolderRow`].
    pub fn info(&self, now_ms: i64) -> Result<HolderInfo> {
        let kind = parse_kind(&self.kind, self.lim)?;
        let mut holder = HolderInfo::new(self.owner.clone(), kind, self.fence.max(0) as u64);
        holder.permits = parse_permits(self.permits)?;
        holder.remaining_ms = Some((self.expires_at_ms - now_ms).max(0) as u64);
        holder.meta = meta(&self.host, self.pid, self.acquired_at_ms);
        Ok(holder)
    }

    /// The row as the admission rules see it.
    ///
    /// # Examples
    ///
    /// See [`HolderRow`].
    pub fn claim(&self) -> Result<Claim> {
        Ok(Claim {
            kind: parse_kind(&self.kind, self.lim)?,
            permits: parse_permits(self.permits)?,
        })
    }
}

impl WaiterRow {
    /// The row as the admission rules see it at `now_ms`.
    ///
    /// # Examples
    ///
    /// See [`WaiterRow`].
    pub fn queued(&self, now_ms: i64) -> Result<Queued> {
        Ok(Queued {
            claim: Claim {
                kind: parse_kind(&self.kind, self.lim)?,
                permits: parse_permits(self.permits)?,
            },
            seq: self.seq as u64,
            starving: self.starving(now_ms),
        })
    }

    /// Whether it has waited longer than [`STARVATION`] at `now_ms`.
    ///
    /// # Examples
    ///
    /// See [`WaiterRow`].
    pub fn starving(&self, now_ms: i64) -> bool {
        now_ms - self.since_ms >= millis(STARVATION)
    }
}

/// Whether `request` may be granted at `now_ms` over the live `holders` and `waiters` of
/// its name.
///
/// # Examples
///
/// ```
/// # use distlock_core::{LockKind, Owner};
/// # use distlock_core::backend::LockRequest;
/// # use distlock_sql::lease_table::may_grant;
/// let request = LockRequest::new("n", LockKind::Mutex, Owner::random(), "t");
/// assert!(may_grant(&[], &[], &request, 0)?);
/// # Ok::<(), distlock_core::Error>(())
/// ```
pub fn may_grant(
    holders: &[HolderRow],
    waiters: &[WaiterRow],
    request: &LockRequest,
    now_ms: i64,
) -> Result<bool> {
    let held = holders
        .iter()
        .map(HolderRow::claim)
        .collect::<Result<Vec<_>>>()?;
    let queue = waiters
        .iter()
        .filter(|w| w.token != request.token)
        .map(|w| w.queued(now_ms))
        .collect::<Result<Vec<_>>>()?;
    let my_seq = waiters
        .iter()
        .find(|w| w.token == request.token)
        .map(|w| w.seq as u64);
    let me = Claim {
        kind: request.kind,
        permits: request.permits,
    };
    admit(&held, &queue, &me, my_seq, request.fair)
}

/// How long the waiter with request token `token` may sleep before polling again.
///
/// Never past the first live grant's expiry, nor past a third of [`WAITER_LEASE`] (its queue
/// row must be rewritten). With no live grant and a live waiter ahead of it, the lock is free
/// and the waiter yielded it to those ahead: it looks again within [`YIELDED_RETRY`], to
/// learn when the next holder's lease ends (one that ends unseen, its holder paused or
/// killed, wakes no one).
/// Where waiters are woken (`pushed`), that is all. Where they only
/// poll, a starving waiter (others yield to it) polls no less often than [`STARVING_POLL`]
/// times its place in the queue: the head often, those far behind it rarely.
///
/// # Examples
///
/// ```
/// # use distlock_sql::lease_table::{retry_within, WAITER_LEASE};
/// # use distlock_sql::lease_table::{WaiterRow, YIELDED_RETRY};
/// assert_eq!(retry_within(&[], &[], "t", 0, true), Some(WAITER_LEASE / 3));
/// let ahead = WaiterRow { seq: 1, token: "a".into(), owner: "o:1".into(), kind: "mutex".into(),
///     lim: 1, permits: 1, fair: false, host: "h".into(), pid: 1, since_ms: 0, expires_at_ms: 9 };
/// assert_eq!(retry_within(&[], &[ahead], "t", 0, true), Some(YIELDED_RETRY));
/// ```
pub fn retry_within(
    holders: &[HolderRow],
    waiters: &[WaiterRow],
    token: &str,
    now_ms: i64,
    pushed: bool,
) -> Option<Duration> {
    let expiry = holders
        .iter()
        .map(|h| Duration::from_millis((h.expires_at_ms - now_ms).max(0) as u64))
        .min();
    let yielded = waiters
        .iter()
        .take_while(|w| w.token != token)
        .any(|w| w.expires_at_ms > now_ms);
    let mut bound = match expiry {
        Some(expiry) => expiry.min(WAITER_LEASE / 3),
        None if yielded => YIELDED_RETRY,
        None => WAITER_LEASE / 3,
    };
    if !pushed {
        let starving_place = waiters
            .iter()
            .position(|w| w.token == token)
            .filter(|&at| waiters[at].starving(now_ms));
        if let Some(place) = starving_place {
            bound = bound.min(STARVING_POLL * (place as u32 + 1));
        }
    }
    Some(bound)
}

/// The status view of one name.
///
/// # Examples
///
/// ```
/// # use distlock_sql::lease_table::lock_state;
/// let state = lock_state("n".into(), 3, &[], &[], 0)?;
/// assert_eq!(state.last_fencing_token, 3);
/// # Ok::<(), distlock_core::Error>(())
/// ```
pub fn lock_state(
    name: String,
    last_fence: i64,
    holders: &[HolderRow],
    waiters: &[WaiterRow],
    now_ms: i64,
) -> Result<LockState> {
    let mut state = LockState::new(name);
    // A lock held longer than `fence_ttl` may have lost its counter (see `fences`).
    state.last_fencing_token = holders
        .iter()
        .map(|h| h.fence)
        .fold(last_fence, i64::max)
        .max(0) as u64;
    state.holders = holders
        .iter()
        .map(|h| h.info(now_ms))
        .collect::<Result<_>>()?;
    state.waiters = waiters
        .iter()
        .map(|w| {
            let mut waiter = WaiterInfo::new(w.owner.clone(), parse_kind(&w.kind, w.lim)?);
            waiter.permits = parse_permits(w.permits)?;
            waiter.fair = w.fair;
            waiter.meta = meta(&w.host, w.pid, w.since_ms);
            Ok(waiter)
        })
        .collect::<Result<_>>()?;
    Ok(state)
}

/// Who and where, as stored beside a row.
fn meta(host: &str, pid: i64, at_ms: i64) -> HolderMeta {
    HolderMeta {
        host: host.to_owned(),
        pid: pid as u32,
        acquired_at_unix_ms: at_ms.max(0) as u64,
    }
}

/// Milliseconds since the Unix epoch on this machine's clock.
///
/// # Examples
///
/// ```
/// assert!(distlock_sql::lease_table::now_ms() > 1_600_000_000_000);
/// ```
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// A duration in whole milliseconds, for expiry arithmetic.
///
/// # Examples
///
/// ```
/// assert_eq!(distlock_sql::lease_table::millis(std::time::Duration::from_secs(2)), 2000);
/// ```
pub fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// The live rows of the locks a status request covers, grouped by name, turned into
/// status views once their fencing counters are known. Every dialect's `inspect` fills one.
///
/// # Examples
///
/// ```
/// # use distlock_sql::lease_table::LiveRows;
/// let mut live = LiveRows::new(Some("quiet"));
/// assert_eq!(live.names(), ["quiet"]);
/// let states = live.into_states(&Default::default(), 0)?;
/// assert!(states[0].holders.is_empty());
/// # Ok::<(), distlock_core::Error>(())
/// ```
#[derive(Debug, Default)]
pub struct LiveRows {
    by_name: std::collections::BTreeMap<String, (Vec<HolderRow>, Vec<WaiterRow>)>,
}

impl LiveRows {
    /// Empty; a lock asked for by name is reported even if it has no rows.
    ///
    /// # Examples
    ///
    /// See [`LiveRows`].
    pub fn new(asked: Option<&str>) -> LiveRows {
        let mut live = LiveRows::default();
        if let Some(name) = asked {
            live.by_name.entry(name.to_owned()).or_default();
        }
        live
    }

    /// Adds a holder of `name` (rows come in fencing-token order).
    ///
    /// # Examples
    ///
    /// See [`LiveRows`].
    pub fn holder(&mut self, name: String, row: HolderRow) {
        self.by_name.entry(name).or_default().0.push(row);
    }

    /// Adds a waiter of `name` (rows come in arrival order).
    ///
    /// # Examples
    ///
    /// See [`LiveRows`].
    pub fn waiter(&mut self, name: String, row: WaiterRow) {
        self.by_name.entry(name).or_default().1.push(row);
    }

    /// The names covered, in order.
    ///
    /// # Examples
    ///
    /// See [`LiveRows`].
    pub fn names(&self) -> Vec<String> {
        self.by_name.keys().cloned().collect()
    }

    /// One status view per name, with its last fencing token from `fences` (0 if none).
    ///
    /// # Examples
    ///
    /// See [`LiveRows`].
    pub fn into_states(
        self,
        fences: &std::collections::BTreeMap<String, i64>,
        now_ms: i64,
    ) -> Result<Vec<LockState>> {
        self.by_name
            .into_iter()
            .map(|(name, (holders, waiters))| {
                let fence = fences.get(&name).copied().unwrap_or(0);
                lock_state(name, fence, &holders, &waiters, now_ms)
            })
            .collect()
    }
}
