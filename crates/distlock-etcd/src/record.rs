//! What a distlock contender key holds: who asks, for what, from where. The keys of etcd's
//! own mutex (`etcdctl lock`, Go's `concurrency.Mutex`) hold nothing; they are exclusive
//! contenders and show as foreign.

use distlock_core::backend::LockRequest;
use distlock_core::{HolderMeta, LockKind};
use serde::{Deserialize, Serialize};

/// A contender key's value, as JSON.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Record {
    /// The owner.
    o: String,
    /// The kind of request; for a semaphore, its number of permits and how many are asked.
    k: String,
    #[serde(default)]
    l: u32,
    #[serde(default = "one")]
    n: u32,
    /// Host and process of the holder.
    h: String,
    p: u32,
    /// When the request was made (holder's clock, ms since the Unix epoch).
    a: u64,
}

fn one() -> u32 {
    1
}

/// What a contender key says of its request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Claim {
    pub(crate) owner: String,
    pub(crate) kind: LockKind,
    pub(crate) permits: u32,
    pub(crate) meta: HolderMeta,
    /// Whether it is a distlock request's (else a key of etcd's own mutex, or unknown).
    pub(crate) ours: bool,
}

impl Record {
    /// The record of `request`, as a key's value.
    pub(crate) fn of(request: &LockRequest) -> Vec<u8> {
        serde_json::to_vec(&Record {
            o: request.owner.as_str().to_owned(),
            k: request.kind.as_str().to_owned(),
            l: request.kind.limit(),
            n: request.permits,
            h: request.meta.host.clone(),
            p: request.meta.pid,
            a: request.meta.acquired_at_unix_ms,
        })
        .unwrap_or_default()
    }

    /// What the value `value` of the contender key `key` (on lease `lease`) claims: our
    /// record, or else an exclusive lock of a foreign client (etcd's mutex writes no value).
    pub(crate) fn read(key: &str, value: &[u8], lease: i64) -> Claim {
        let ours = serde_json::from_slice::<Record>(value)
            .ok()
            .and_then(|r| Some((LockKind::parse(&r.k, r.l)?, r)));
        match ours {
            Some((kind, record)) => Claim {
                owner: record.o,
                kind,
                permits: record.n.max(1),
                meta: HolderMeta {
                    host: record.h,
                    pid: record.p,
                    acquired_at_unix_ms: record.a,
                },
                ours: true,
            },
            None => Claim {
                owner: format!(
                    "foreign client (key {}, lease {lease:x})",
                    key.rsplit('/').next().unwrap_or(key)
                ),
                kind: LockKind::Mutex,
                permits: 1,
                meta: HolderMeta {
                    host: String::from_utf8_lossy(value).chars().take(64).collect(),
                    pid: 0,
                    acquired_at_unix_ms: 0,
                },
                ours: false,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn etcds_own_mutex_keys_are_foreign_exclusive_contenders() {
        let claim = Record::read("locks/a/694d7a1b2c3d", b"", 0x694d7a1b2c3d);
        assert_eq!(claim.kind, LockKind::Mutex);
        assert!(!claim.ours);
        assert!(claim.owner.contains("694d7a1b2c3d"), "{}", claim.owner);
    }
}
