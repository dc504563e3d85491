//! What a contender key claims. A distlock key's value is its request's
//! [`HolderRecord`]; the keys of etcd's own mutex (`etcdctl lock`, Go's
//! `concurrency.Mutex`) hold nothing and are exclusive contenders shown as foreign.

use distlock_core::backend::HolderRecord;
use distlock_core::{HolderMeta, LockKind};

/// What the value `value` of the contender key `key` (on lease `lease`) claims: our
/// record, or else an exclusive lock of a foreign client.
pub(crate) fn claim(key: &str, value: &[u8], lease: i64) -> HolderRecord {
    HolderRecord::decode(value).unwrap_or_else(|| HolderRecord {
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
        fencing_token: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn etcds_own_mutex_keys_are_foreign_exclusive_contenders() {
        let record = claim("locks/a/694d7a1b2c3d", b"", 0x694d7a1b2c3d);
        assert_eq!(record.kind, LockKind::Mutex);
        assert!(
            record.owner.starts_with("foreign client"),
            "{}",
            record.owner
        );
        assert!(record.owner.contains("694d7a1b2c3d"), "{}", record.owner);
    }
}
