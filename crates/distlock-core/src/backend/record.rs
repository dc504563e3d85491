//! The holder record a queue-based backend stores with each request (a ZooKeeper node's
//! data, an etcd key's value): who asks, for what, from where, so `distlock status` can
//! show it. Written once per request, as compact JSON, and again with the grant's fencing
//! token where the store cannot tell it otherwise (see [`HolderRecord::encode_granted`]).

use serde::{Deserialize, Serialize};

use super::request::{LockKind, LockRequest};
use crate::owner::HolderMeta;

/// A request's record, as stored.
///
/// # Examples
///
/// ```
/// # use std::time::Duration;
/// # use distlock_core::{LockKind, Owner};
/// use distlock_core::backend::{HolderRecord, LockRequest};
/// # let mut request = LockRequest::new("n", LockKind::Semaphore { limit: 3 }, Owner::random(), "t");
/// # request.permits = 2;
/// let stored = HolderRecord::encode(&request);
/// let record = HolderRecord::decode(&stored).expect("our own record");
/// assert_eq!(record.kind, LockKind::Semaphore { limit: 3 });
/// assert_eq!(record.permits, 2);
/// assert!(HolderRecord::decode(b"").is_none());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HolderRecord {
    /// The owner.
    pub owner: String,
    /// What is asked for.
    pub kind: LockKind,
    /// How many permits (1 for locks).
    pub permits: u32,
    /// Host, process and when the request was made.
    pub meta: HolderMeta,
    /// The grant's fencing token, in a record written again once granted.
    pub fencing_token: Option<u64>,
}

/// The stored form: short field names, since it travels with every request.
#[derive(Serialize, Deserialize)]
struct Stored {
    o: String,
    k: String,
    #[serde(default)]
    l: u32,
    #[serde(default = "one")]
    n: u32,
    h: String,
    p: u32,
    a: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    t: Option<u64>,
    /// The request's token, in a record that proves a hand-off (see
    /// [`HolderRecord::encode_adoptable`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    g: Option<String>,
}

fn one() -> u32 {
    1
}

impl HolderRecord {
    /// The stored record of `request`.
    ///
    /// # Examples
    ///
    /// See [`HolderRecord`].
    pub fn encode(request: &LockRequest) -> Vec<u8> {
        Self::stored(request, None, None)
    }

    /// The stored record of `request` with its request token, for a store where the record
    /// is what an adoption ([`Backend::adopt`](super::Backend::adopt)) compares a hand-off's
    /// grant with; [`HolderRecord::token_in`] reads it back. Whoever reads the record can
    /// read the token.
    ///
    /// # Examples
    ///
    /// ```
    /// # use distlock_core::{LockKind, Owner};
    /// # use distlock_core::backend::{HolderRecord, LockRequest};
    /// let request = LockRequest::new("n", LockKind::Mutex, Owner::random(), "t-42");
    /// let stored = HolderRecord::encode_adoptable(&request);
    /// assert_eq!(HolderRecord::token_in(&stored).as_deref(), Some("t-42"));
    /// assert!(HolderRecord::decode(&stored).is_some());
    /// assert_eq!(HolderRecord::token_in(&HolderRecord::encode(&request)), None);
    /// ```
    pub fn encode_adoptable(request: &LockRequest) -> Vec<u8> {
        Self::stored(request, None, Some(&request.token))
    }

    /// The request token a record written by [`HolderRecord::encode_adoptable`] holds.
    ///
    /// # Examples
    ///
    /// See [`HolderRecord::encode_adoptable`].
    pub fn token_in(stored: &[u8]) -> Option<String> {
        serde_json::from_slice::<Stored>(stored).ok()?.g
    }

    /// The stored record of `request`, granted with `fencing_token`.
    ///
    /// # Examples
    ///
    /// ```
    /// # use distlock_core::{LockKind, Owner};
    /// # use distlock_core::backend::{HolderRecord, LockRequest};
    /// # let mut request = LockRequest::new("n", LockKind::Mutex, Owner::random(), "t");
    /// # request.fair = true;
    /// let stored = HolderRecord::encode_granted(&request, 42);
    /// assert_eq!(HolderRecord::decode(&stored).unwrap().fencing_token, Some(42));
    /// let queued = HolderRecord::encode(&request);
    /// assert_eq!(HolderRecord::decode(&queued).unwrap().fencing_token, None);
    /// ```
    pub fn encode_granted(request: &LockRequest, fencing_token: u64) -> Vec<u8> {
        Self::stored(request, Some(fencing_token), None)
    }

    fn stored(request: &LockRequest, fencing_token: Option<u64>, token: Option<&str>) -> Vec<u8> {
        serde_json::to_vec(&Stored {
            o: request.owner.as_str().to_owned(),
            k: request.kind.as_str().to_owned(),
            l: request.kind.limit(),
            n: request.permits,
            h: request.meta.host.clone(),
            p: request.meta.pid,
            a: request.meta.acquired_at_unix_ms,
            t: fencing_token,
            g: token.map(str::to_owned),
        })
        .unwrap_or_default()
    }

    /// The record in `stored`, if it is one of ours (another client's data is not).
    ///
    /// # Examples
    ///
    /// See [`HolderRecord`].
    pub fn decode(stored: &[u8]) -> Option<HolderRecord> {
        let stored: Stored = serde_json::from_slice(stored).ok()?;
        Some(HolderRecord {
            kind: LockKind::parse(&stored.k, stored.l)?,
            owner: stored.o,
            permits: stored.n.max(1),
            meta: HolderMeta {
                host: stored.h,
                pid: stored.p,
                acquired_at_unix_ms: stored.a,
            },
            fencing_token: stored.t,
        })
    }
}
