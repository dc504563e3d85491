//! Key layout: the lock's key, and its companions under the same hash tag.
//!
//! Key names are written straight into the command that carries them ([`KeyName`] is a
//! Redis argument), so an operation builds no strings for them.

use std::io::Write;

use distlock_core::{Error, Result};
use redis::{RedisWrite, ToRedisArgs, ToSingleRedisArg};

/// One of a lock's keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Key {
    /// The exclusive holder: the key other Redis lock clients use too. It holds our holder
    /// record (request token first, for `distlock status` too), or a foreign client's token.
    Lock,
    /// The fencing counter.
    Fence,
    /// Queued request tokens by arrival number.
    Queue,
    /// Shared grants (readers, semaphore permits) by expiry on the server's clock.
    Leases,
    /// Queued requests' records.
    Waiters,
    /// Arrival numbers.
    Seq,
    /// Shared grants' records.
    LeaseInfo,
    /// RedLock waiters (status only): token -> expiry.
    RedlockWaiting,
    /// RedLock waiters (status only): token -> record.
    RedlockWaitingInfo,
    /// The lock's note (a job's run record): hash of value, fencing token, the server's
    /// time of the write and the end of its quiet window.
    Note,
}

impl Key {
    /// The keys every full lock script takes, in this order (see `scripts/keys.lua`).
    pub(crate) const ALL: [Key; 7] = [
        Key::Lock,
        Key::Fence,
        Key::Queue,
        Key::Leases,
        Key::Waiters,
        Key::Seq,
        Key::LeaseInfo,
    ];

    /// The keys the note's write takes: every lock script's, then the note's.
    pub(crate) const NOTE_WRITE: [Key; 8] = [
        Key::Lock,
        Key::Fence,
        Key::Queue,
        Key::Leases,
        Key::Waiters,
        Key::Seq,
        Key::LeaseInfo,
        Key::Note,
    ];

    /// The keys the acquire fast path and adopt take: the first four of
    /// [`ALL`](Self::ALL).
    pub(crate) const TRY: [Key; 4] = [Key::Lock, Key::Fence, Key::Queue, Key::Leases];

    /// The keys the release fast path takes.
    pub(crate) const RELEASE_FAST: [Key; 2] = [Key::Lock, Key::Queue];

    /// The suffix after the hash tag; `None` for the lock's own key, which has no tag.
    fn suffix(self) -> Option<&'static str> {
        Some(match self {
            Key::Lock => return None,
            Key::Fence => "fence",
            Key::Queue => "queue",
            Key::Leases => "leases",
            Key::Waiters => "waiters",
            Key::Seq => "seq",
            Key::LeaseInfo => "lease-info",
            Key::RedlockWaiting => "redlock-waiting",
            Key::RedlockWaitingInfo => "redlock-waiting-info",
            Key::Note => "note",
        })
    }
}

/// The keys of one lock: `prefix` + `name` for the lock itself, and
/// `{prefix + name}:suffix` for each companion, so all share one cluster slot.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LockKeys<'a> {
    prefix: &'a str,
    name: &'a str,
}

impl<'a> LockKeys<'a> {
    /// The keys of lock `name` under `prefix`; names with braces are refused (they would
    /// change the hash tag).
    pub(crate) fn new(prefix: &'a str, name: &'a str) -> Result<LockKeys<'a>> {
        if name.bytes().any(|b| b == b'{' || b == b'}') {
            return Err(Error::invalid(format!(
                "redis lock names may not contain `{{` or `}}` (they pick the cluster slot): `{name}`"
            )));
        }
        Ok(LockKeys { prefix, name })
    }

    /// Key `which`, as a command argument.
    pub(crate) fn named(self, which: Key) -> KeyName<'a> {
        KeyName { keys: self, which }
    }

    /// Keys `which`, in order, as command arguments.
    pub(crate) fn list(self, which: &'a [Key]) -> impl Iterator<Item = KeyName<'a>> + 'a {
        which.iter().map(move |&k| self.named(k))
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
    pub(crate) fn name_of_fence<'k>(prefix: &str, fence_key: &'k str) -> Option<&'k str> {
        fence_key
            .strip_prefix('{')?
            .strip_suffix("}:fence")?
            .strip_prefix(prefix)
    }
}

/// One key of one lock, written as a command argument without building a string first.
#[derive(Debug, Clone, Copy)]
pub(crate) struct KeyName<'a> {
    keys: LockKeys<'a>,
    which: Key,
}

impl KeyName<'_> {
    /// The key's parts, to be written one after the other.
    fn parts(&self) -> [&str; 5] {
        let LockKeys { prefix, name } = self.keys;
        match self.which.suffix() {
            None => [prefix, name, "", "", ""],
            Some(suffix) => ["{", prefix, name, "}:", suffix],
        }
    }
}

impl ToRedisArgs for KeyName<'_> {
    fn write_redis_args<W: ?Sized + RedisWrite>(&self, out: &mut W) {
        let mut arg = out.writer_for_next_arg();
        for part in self.parts() {
            // Writing into the command's own buffer cannot fail.
            let _ = arg.write_all(part.as_bytes());
        }
    }
}

impl ToSingleRedisArg for KeyName<'_> {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn companions_share_the_lock_key_as_hash_tag() {
        let keys = LockKeys::new("locks:", "orders/42").unwrap();
        let text = |which| String::from_utf8(keys.named(which).to_redis_args().remove(0)).unwrap();
        assert_eq!(text(Key::Lock), "locks:orders/42");
        let fence = text(Key::Fence);
        assert_eq!(fence, "{locks:orders/42}:fence");
        assert_eq!(LockKeys::name_of_fence("locks:", &fence), Some("orders/42"));
        assert!(LockKeys::new("", "a{b}").is_err());
        assert_eq!(LockKeys::fence_pattern("a*"), "{a\\**}:fence");
    }

    #[test]
    fn a_key_is_written_as_one_argument() {
        let keys = LockKeys::new("p:", "n");
        let args = keys.unwrap().named(Key::LeaseInfo).to_redis_args();
        assert_eq!(args, vec![b"{p:n}:lease-info".to_vec()]);
    }
}
