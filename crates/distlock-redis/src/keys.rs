//! Key layout: the lock's key, and its companions under the same hash tag.

use distlock_core::{Error, Result};

/// The keys of one lock.
#[derive(Debug, Clone)]
pub(crate) struct LockKeys {
    pub(crate) lock: String,
    pub(crate) fence: String,
    pub(crate) queue: String,
    pub(crate) waiters: String,
    pub(crate) holder: String,
    pub(crate) seq: String,
    pub(crate) leases: String,
    pub(crate) lease_info: String,
    /// RedLock waiters (status only): token -> expiry, and token -> record.
    pub(crate) redlock_waiting: String,
    pub(crate) redlock_waiting_info: String,
}

impl LockKeys {
    /// The keys of lock `name` under `prefix`; names with braces are refused (they would
    /// change the hash tag).
    pub(crate) fn new(prefix: &str, name: &str) -> Result<LockKeys> {
        if name.contains(['{', '}']) {
            return Err(Error::invalid(format!(
                "redis lock names may not contain `{{` or `}}` (they pick the cluster slot): `{name}`"
            )));
        }
        let lock = format!("{prefix}{name}");
        let tagged = |suffix: &str| format!("{{{lock}}}:{suffix}");
        Ok(LockKeys {
            fence: tagged("fence"),
            queue: tagged("queue"),
            waiters: tagged("waiters"),
            holder: tagged("holder"),
            seq: tagged("seq"),
            leases: tagged("leases"),
            lease_info: tagged("lease-info"),
            redlock_waiting: tagged("redlock-waiting"),
            redlock_waiting_info: tagged("redlock-waiting-info"),
            lock,
        })
    }

    /// All keys, in the order every script takes them (see `scripts/keys.lua`).
    pub(crate) fn all(&self) -> [&str; 8] {
        [
            &self.lock,
            &self.fence,
            &self.queue,
            &self.leases,
            &self.holder,
            &self.waiters,
            &self.seq,
            &self.lease_info,
        ]
    }

    /// The keys the fast-path scripts take: the first five of [`all`](Self::all).
    pub(crate) fn fast(&self) -> [&str; 5] {
        [
            &self.lock,
            &self.fence,
            &self.queue,
            &self.leases,
            &self.holder,
        ]
    }

    /// The glob matching every lock's fencing counter under `prefix`.
    pub(crate) fn fence_pattern(prefix: &str) -> String {
        let escaped: String = prefix
            .chars()
            .flat_map(|c| match c {
                '*' | '?' | '[' | ']' | '\\' => vec!['\\', c],
                c => vec![c],
            })
            .collect();
        format!("{{{escaped}*}}:fence")
    }

    /// The lock name inside a fencing counter's key, if it is one of ours.
    pub(crate) fn name_of_fence<'a>(prefix: &str, fence_key: &'a str) -> Option<&'a str> {
        fence_key
            .strip_prefix('{')?
            .strip_suffix("}:fence")?
            .strip_prefix(prefix)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn companions_share_the_lock_key_as_hash_tag() {
        let keys = LockKeys::new("locks:", "orders/42").unwrap();
        assert_eq!(keys.lock, "locks:orders/42");
        assert_eq!(keys.fence, "{locks:orders/42}:fence");
        assert_eq!(
            LockKeys::name_of_fence("locks:", &keys.fence),
            Some("orders/42")
        );
        assert!(LockKeys::new("", "a{b}").is_err());
        assert_eq!(LockKeys::fence_pattern("a*"), "{a\\**}:fence");
    }
}
