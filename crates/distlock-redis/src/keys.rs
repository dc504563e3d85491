//! Key layout: the lock's key, its companions under the same hash tag, and the fencing
//! counter it shares with the names of its cluster slot (see [`crate::slots`]).
//!
//! Key names are written straight into the command that carries them ([`KeyName`] is a
//! Redis argument), so an operation builds no strings for them.

use std::io::Write;

use distlock_core::{Error, Result};
use redis::{RedisWrite, ToRedisArgs, ToSingleRedisArg};

use crate::slots::{SlotTags, slot_of};

/// One of a lock's keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Key {
    /// The exclusive holder: the key other Redis lock clients use too. It holds our holder
    /// record (request token first, for `distlock status` too), or a foreign client's token.
    Lock,
    /// The fencing counter, shared by the names of the lock's cluster slot.
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
    pub(crate) const RELEASE_FAST: [Key; 1] = [Key::Lock];

    /// The suffix after the hash tag; `None` for the lock's own key, which has no tag.
    fn suffix(self) -> Option<&'static str> {
        Some(match self {
            Key::Lock => return None,
            Key::Fence => "slot-fence",
            Key::Queue => "queue",
            Key::Leases => "leases",
            Key::Waiters => "waiters",
            Key::Seq => "seq",
            Key::LeaseInfo => "lease-info",
            Key::Note => "note",
        })
    }
}

/// The keys of one lock: `prefix` + `name` for the lock itself, `{prefix + name}:suffix`
/// for each companion, and `{prefix + tag}:slot-fence` for the fencing counter, where
/// `tag` puts it in the lock's slot: all in one cluster slot (a proxy that shards one
/// server's keys, or a cluster, sees every script touch one slot).
#[derive(Debug, Clone, Copy)]
pub(crate) struct LockKeys<'a> {
    prefix: &'a str,
    name: &'a str,
    /// The tag of the fencing counter of the name's slot.
    fence_tag: &'a str,
}

impl<'a> LockKeys<'a> {
    /// The keys of lock `name` under `prefix`, whose counters' tags are `tags`; names with
    /// braces are refused (they would change the hash tag).
    pub(crate) fn new(prefix: &'a str, name: &'a str, tags: &'a SlotTags) -> Result<LockKeys<'a>> {
        check_name(name)?;
        let fence_tag = tags.tag(slot_of(&[prefix.as_bytes(), name.as_bytes()]));
        Ok(LockKeys {
            prefix,
            name,
            fence_tag,
        })
    }

    /// Key `which`, as a command argument.
    pub(crate) fn named(self, which: Key) -> KeyName<'a> {
        KeyName { keys: self, which }
    }

    /// Key `which`, as text.
    pub(crate) fn text(self, which: Key) -> String {
        self.named(which).parts().concat()
    }

    /// Keys `which`, in order, as command arguments.
    pub(crate) fn list(self, which: &'a [Key]) -> impl Iterator<Item = KeyName<'a>> + 'a {
        which.iter().map(move |&k| self.named(k))
    }

    /// The glob matching every lock's key under `prefix` (and any other key that starts
    /// with it).
    pub(crate) fn lock_pattern(prefix: &str) -> String {
        format!("{}*", glob_escaped(prefix))
    }

    /// The glob matching companion `which` of every lock under `prefix`.
    pub(crate) fn companion_pattern(prefix: &str, which: Key) -> String {
        let suffix = which.suffix().unwrap_or_default();
        format!("{{{}*}}:{suffix}", glob_escaped(prefix))
    }

    /// The lock name inside companion key `key`, if it is `which` of one of ours.
    pub(crate) fn name_of_companion<'k>(prefix: &str, which: Key, key: &'k str) -> Option<&'k str> {
        let name = key
            .strip_prefix('{')?
            .strip_suffix(which.suffix()?)?
            .strip_suffix("}:")?
            .strip_prefix(prefix)?;
        could_be_a_name(name).then_some(name)
    }

    /// The lock name of lock key `key`, if it could be one under `prefix`.
    pub(crate) fn name_of_lock<'k>(prefix: &str, key: &'k str) -> Option<&'k str> {
        let name = key.strip_prefix(prefix)?;
        could_be_a_name(name).then_some(name)
    }
}

/// Whether `name` could be a lock's: not empty, no braces.
fn could_be_a_name(name: &str) -> bool {
    !name.is_empty() && !has_braces(name)
}

/// Whether `name` has braces, which would change the hash tag.
fn has_braces(name: &str) -> bool {
    name.bytes().any(|b| b == b'{' || b == b'}')
}

/// A hash of lock name `name`, the same in every process, to spread names over this
/// client's connections and stripes (not over the server's slots: see [`slot_of`]).
pub(crate) fn name_hash(name: &str) -> u64 {
    use std::hash::BuildHasher;
    foldhash::fast::FixedState::default().hash_one(name)
}

/// Refuses names with braces, which would change the hash tag.
pub(crate) fn check_name(name: &str) -> Result<()> {
    if has_braces(name) {
        return Err(Error::invalid(format!(
            "redis lock names may not contain `{{` or `}}` (they pick the cluster slot): `{name}`"
        )));
    }
    Ok(())
}

/// `text` with the characters a `SCAN MATCH` glob gives a meaning escaped.
fn glob_escaped(text: &str) -> String {
    text.chars()
        .flat_map(|c| match c {
            '*' | '?' | '[' | ']' | '\\' => vec!['\\', c],
            c => vec![c],
        })
        .collect()
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
        let LockKeys {
            prefix,
            name,
            fence_tag,
        } = self.keys;
        match self.which.suffix() {
            None => [prefix, name, "", "", ""],
            Some(suffix) if self.which == Key::Fence => ["{", prefix, fence_tag, "}:", suffix],
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
        let tags = SlotTags::for_prefix("locks:");
        let keys = LockKeys::new("locks:", "orders/42", &tags).unwrap();
        let text = |which| String::from_utf8(keys.named(which).to_redis_args().remove(0)).unwrap();
        assert_eq!(text(Key::Lock), "locks:orders/42");
        let queue = text(Key::Queue);
        assert_eq!(queue, "{locks:orders/42}:queue");
        assert_eq!(
            LockKeys::name_of_companion("locks:", Key::Queue, &queue),
            Some("orders/42")
        );
        assert_eq!(
            LockKeys::name_of_companion("locks:", Key::Leases, &queue),
            None
        );
        assert_eq!(
            LockKeys::name_of_lock("locks:", "locks:orders/42"),
            Some("orders/42")
        );
        assert_eq!(
            LockKeys::name_of_lock("locks:", "{locks:orders/42}:queue"),
            None
        );
        assert!(LockKeys::new("", "a{b}", &tags).is_err());
        assert_eq!(
            LockKeys::companion_pattern("a*", Key::Queue),
            "{a\\**}:queue"
        );
        assert_eq!(LockKeys::lock_pattern("a*"), "a\\**");
    }

    #[test]
    fn the_fencing_counter_is_in_the_lock_s_slot() {
        let tags = SlotTags::for_prefix("locks:");
        let keys = LockKeys::new("locks:", "orders/42", &tags).unwrap();
        let fence = String::from_utf8(keys.named(Key::Fence).to_redis_args().remove(0)).unwrap();
        let tag = fence
            .strip_prefix("{locks:")
            .and_then(|rest| rest.strip_suffix("}:slot-fence"))
            .unwrap();
        assert_eq!(
            slot_of(&[b"locks:", tag.as_bytes()]),
            slot_of(&[b"locks:orders/42"])
        );
        // Names of one slot share it.
        let other = LockKeys::new("locks:", "orders/43", &tags).unwrap();
        let same_slot = slot_of(&[b"locks:orders/43"]) == slot_of(&[b"locks:orders/42"]);
        let other_fence = other.named(Key::Fence).to_redis_args().remove(0);
        assert_eq!(other_fence == fence.as_bytes(), same_slot);
    }

    #[test]
    fn a_key_is_written_as_one_argument() {
        let tags = SlotTags::for_prefix("p:");
        let keys = LockKeys::new("p:", "n", &tags);
        let args = keys.unwrap().named(Key::LeaseInfo).to_redis_args();
        assert_eq!(args, vec![b"{p:n}:lease-info".to_vec()]);
    }
}
