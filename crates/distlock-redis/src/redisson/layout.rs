//! Redisson's names: a lock's key is its name; the keys and channels beside it are named
//! after it so a cluster keeps them in its slot (`redisson_lock__channel:{name}`, or
//! `redisson_lock__channel:name` when the name carries a `{` of its own, as Java users
//! put hash tags in names); a holder is a hash field `<client uuid>:<thread id>`.
//! distlock's own records of holders and waiters (for `status`) are in the same slot, but
//! named so that `x` and `{x}`, which Redisson's rule names alike, keep their own.

use std::sync::LazyLock;

use distlock_core::random_id;

/// The channel a release of lock `name` is published on.
pub(crate) fn channel(name: &str) -> String {
    prefixed("redisson_lock__channel", name)
}

/// The channel fair-lock waiter `field` is told on that its turn came: the release
/// channel and the field.
pub(crate) fn waiter_channel(name: &str, field: &str) -> String {
    format!("{}:{field}", channel(name))
}

/// The fair lock's queue (a list of waiters' fields), the waiters' deadlines (a sorted
/// set, ms), and when distlock's waiters among them were last heard from (a sorted set,
/// ms; Java clients neither read nor write it).
pub(crate) fn queue_keys(name: &str) -> [String; 3] {
    [
        prefixed("redisson_lock_queue", name),
        prefixed("redisson_lock_timeout", name),
        own("distlock_fair_heard", name),
    ]
}

/// The channel a release of read-write lock `name` is published on (`0` by a reader's,
/// `1` by a writer's).
pub(crate) fn rw_channel(name: &str) -> String {
    prefixed("redisson_rwlock", name)
}

/// The field of a read-write lock's writer `field` (`<uuid>:<thread id>:write`).
pub(crate) fn writer_field(field: &str) -> String {
    format!("{field}{WRITER_SUFFIX}")
}

/// What ends a writer's field in a read-write lock's hash.
pub(crate) const WRITER_SUFFIX: &str = ":write";

/// The key of reader `field`'s first read hold of lock `name`, whose TTL is the hold's
/// lease (Redisson numbers a thread's nested read holds from 1; a distlock guard holds
/// once): `{name}:<field>:rwlock_timeout:1`.
pub(crate) fn read_hold_key(name: &str, field: &str) -> String {
    format!("{}:{field}:rwlock_timeout:1", hold_prefix(name))
}

/// What the keys of every reader's holds of lock `name` start with: `{name}`, or the name
/// itself when it holds a `{` (Redisson's suffix rule).
pub(crate) fn hold_prefix(name: &str) -> String {
    match name.contains('{') {
        true => name.to_owned(),
        false => format!("{{{name}}}"),
    }
}

/// distlock's records of the holders of a read-write lock or a semaphore (a hash of
/// field to record, for `status`): beside the lock, since Java's write unlock counts the
/// lock hash's fields, and a semaphore is a number. Java clients never read it.
pub(crate) fn holders_key(name: &str) -> String {
    own(HOLDERS, name)
}

const HOLDERS: &str = "distlock_holders";

/// The lock a key of [`holders_key`] records the holders of, if it is one.
pub(crate) fn name_of_holders_key(key: &str) -> Option<String> {
    let rest = key.strip_prefix(HOLDERS)?.strip_prefix(':')?;
    let bare = rest
        .strip_prefix('{')
        .and_then(|inner| inner.strip_suffix('}'))
        .filter(|inner| !inner.contains(['{', '}']));
    if let Some(name) = bare {
        return Some(name.to_owned());
    }
    // `{tag}:name`: the name follows one of the `}:`.
    rest.match_indices("}:")
        .map(|(at, _)| &rest[at + 2..])
        .find(|name| holders_key(name) == key)
        .map(str::to_owned)
}

/// The key `prefix` names of distlock's own for lock `name`, in the lock's slot:
/// `prefix:{name}`, or `prefix:{tag}:name` for a name that holds a brace (its hash tag,
/// or the whole name without one), so `x` and `{x}` have keys of their own.
fn own(prefix: &str, name: &str) -> String {
    match name.contains(['{', '}']) {
        false => format!("{prefix}:{{{name}}}"),
        true => format!("{prefix}:{{{}}}:{name}", hash_tag(name).unwrap_or(name)),
    }
}

/// The hash tag of a key, as Redis Cluster reads it: what is between its first `{` and
/// the first `}` after it, if that is not empty.
pub(crate) fn hash_tag(key: &str) -> Option<&str> {
    let open = key.find('{')?;
    let close = key[open + 1..].find('}')?;
    (close > 0).then(|| &key[open + 1..open + 1 + close])
}

/// Whether every key Redisson's rule derives from lock `name` shares the name's slot on a
/// cluster: a name without braces (wrapped in them), or one with a hash tag.
pub(crate) fn fits_one_slot(name: &str) -> bool {
    !name.contains(['{', '}']) || hash_tag(name).is_some()
}

/// distlock's waiting writers of a read-write lock (a sorted set of request tokens by the
/// end of their record's life), whom distlock's readers let go first.
pub(crate) fn writers_key(name: &str) -> String {
    own("distlock_writers", name)
}

/// When each of distlock's holders of a semaphore stops being renewed (a sorted set of
/// fields by server ms): Redisson's semaphore leases no permit, so this tells `status`
/// which holders stopped, whose permits are lost.
pub(crate) fn renewed_key(name: &str) -> String {
    own("distlock_renewed", name)
}

/// The channel a semaphore's releases publish the permits available on.
pub(crate) fn semaphore_channel(name: &str) -> String {
    prefixed("redisson_sc", name)
}

/// The fenced lock's counter of grants.
pub(crate) fn token_key(name: &str) -> String {
    prefixed("redisson_lock_token", name)
}

/// The field of the lock's hash that holds distlock's record of holder `field` (owner,
/// host, process, token), for `status`: the holder's field with a suffix no Java thread's
/// field has. Java clients read only their own fields.
pub(crate) fn record_field(field: &str) -> String {
    format!("{field}{RECORD_SUFFIX}")
}

/// What ends a field of distlock's records in a lock's hash.
pub(crate) const RECORD_SUFFIX: &str = ":distlock";

/// distlock's records of the lock's waiters, for `status`: a sorted set of request tokens
/// by the end of their record's life, and a hash of their records.
pub(crate) fn waiting_keys(name: &str) -> [String; 2] {
    [
        own("distlock_waiting", name),
        own("distlock_waiting_info", name),
    ]
}

/// The key an unlock keeps its answer under for a while, so that, asked again (its first
/// answer lost), it answers the same.
pub(crate) fn unlock_latch(name: &str, request: &str) -> String {
    format!("{}:{request}", prefixed("redisson_unlock_latch", name))
}

/// `prefix:{name}`, or `prefix:name` when the name holds a `{`: Redisson's rule.
fn prefixed(prefix: &str, name: &str) -> String {
    match name.contains('{') {
        true => format!("{prefix}:{name}"),
        false => format!("{prefix}:{{{name}}}"),
    }
}

/// The hash field of the holder that a grant's request token stands for, in client
/// `uuid`: Redisson's `<uuid>:<thread id>`, the "thread" being the grant (a number below
/// 2^60 taken from its token), so two guards of one client exclude each other as two Java
/// threads do.
pub(crate) fn field(uuid: &str, token: &str) -> String {
    format!("{uuid}:{}", thread_of(token))
}

/// The thread id a request token stands for in holders' fields: its first 15 hex digits,
/// or for a token that is not distlock's hex, a stable number of its bytes.
pub(crate) fn thread_of(token: &str) -> u64 {
    match token.get(..15).map(|hex| u64::from_str_radix(hex, 16)) {
        Some(Ok(thread)) => thread,
        _ => token.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |hash, byte| {
            (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3) >> 4
        }),
    }
}

/// A holder's field split into its client uuid and thread id, if it is one (a
/// read-write lock's writer's field ends in `:write`).
pub(crate) fn holder(field: &str) -> Option<(&str, u64)> {
    let field = field.strip_suffix(WRITER_SUFFIX).unwrap_or(field);
    let (uuid, thread) = field.rsplit_once(':')?;
    Some((uuid, thread.parse().ok()?))
}

/// This process's client uuid, in the form Java's `UUID.randomUUID()` prints (random,
/// version 4): one per process, as Redisson has one per client, so a client this process
/// opens again (to release what an ending program left) names the same holders.
pub(crate) fn process_uuid() -> String {
    static UUID: LazyLock<String> = LazyLock::new(new_uuid);
    UUID.clone()
}

/// A new client uuid, random, version 4.
fn new_uuid() -> String {
    let hex = format!("{}{}", random_id(), random_id());
    let variant = ["8", "9", "a", "b"][usize::from(hex.as_bytes()[16] % 4)];
    format!(
        "{}-{}-4{}-{variant}{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[13..16],
        &hex[17..20],
        &hex[20..32]
    )
}

/// Whether `uuid` may name a client in holders' fields: 1 to 64 letters, digits, `-`, `_`
/// or `.` (a `:` would split the field elsewhere).
pub(crate) fn valid_uuid(uuid: &str) -> bool {
    (1..=64).contains(&uuid.len())
        && uuid
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_redissons_rule() {
        assert_eq!(channel("x"), "redisson_lock__channel:{x}");
        assert_eq!(token_key("orders/42"), "redisson_lock_token:{orders/42}");
        assert_eq!(channel("a{b}"), "redisson_lock__channel:a{b}");
        assert_eq!(unlock_latch("x", "r1"), "redisson_unlock_latch:{x}:r1");
        assert_eq!(record_field("u:7"), "u:7:distlock");
        assert_eq!(holder(&record_field("u:7")), None, "a record is no holder");
        assert_eq!(waiting_keys("x")[1], "distlock_waiting_info:{x}");
        assert_eq!(
            queue_keys("x"),
            [
                "redisson_lock_queue:{x}",
                "redisson_lock_timeout:{x}",
                "distlock_fair_heard:{x}"
            ]
        );
        assert_eq!(waiter_channel("x", "u:7"), "redisson_lock__channel:{x}:u:7");
        assert_eq!(rw_channel("x"), "redisson_rwlock:{x}");
        assert_eq!(read_hold_key("x", "u:7"), "{x}:u:7:rwlock_timeout:1");
        assert_eq!(read_hold_key("a{b}", "u:7"), "a{b}:u:7:rwlock_timeout:1");
        assert_eq!(writer_field("u:7"), "u:7:write");
        assert_eq!(holder("u:7:write"), Some(("u", 7)));
        assert_eq!(writers_key("x"), "distlock_writers:{x}");
        assert_eq!(semaphore_channel("x"), "redisson_sc:{x}");
        for name in ["x", "a{b}", "{x}", "a}", "x}:y", "{}", "a{}b{c}"] {
            assert_eq!(
                name_of_holders_key(&holders_key(name)).as_deref(),
                Some(name)
            );
        }
        assert_eq!(
            name_of_holders_key("distlock_holders:{x}").as_deref(),
            Some("x")
        );
        assert_eq!(name_of_holders_key("distlock_holders:x"), None);
        assert_eq!(name_of_holders_key("distlock_holdersx:{x}"), None);
    }

    /// distlock's own keys of `x` and `{x}` differ, where Redisson's are the same; each is
    /// in its lock's slot.
    #[test]
    fn distlocks_own_keys_of_names_redisson_names_alike_differ() {
        assert_eq!(holders_key("x"), "distlock_holders:{x}");
        assert_eq!(holders_key("{x}"), "distlock_holders:{x}:{x}");
        assert_eq!(
            writers_key("orders{eu}"),
            "distlock_writers:{eu}:orders{eu}"
        );
        assert_eq!(waiting_keys("{x}")[0], "distlock_waiting:{x}:{x}");
        assert_eq!(channel("x"), channel("{x}"), "Redisson's rule");
        for (name, tag) in [("x", Some("x")), ("{x}", Some("x")), ("a{b}c", Some("b"))] {
            assert_eq!(hash_tag(&holders_key(name)), tag);
            assert!(fits_one_slot(name));
        }
        for name in ["{}", "a{}b", "{", "a}b", "a}b{c"] {
            assert!(!fits_one_slot(name), "{name}");
        }
    }

    #[test]
    fn a_field_names_its_client_and_a_thread_of_the_grant() {
        let token = "0123456789abcdef0123456789abcdef";
        let field = field("u-1", token);
        assert_eq!(field, format!("u-1:{}", 0x0123456789abcde_u64));
        assert_eq!(holder(&field), Some(("u-1", 0x0123456789abcde)));
        assert_ne!(
            super::field("u-1", "odd token"),
            super::field("u-1", "odd tokens")
        );
        assert_eq!(holder("no thread"), None);
    }

    #[test]
    fn a_new_uuid_looks_like_javas() {
        let uuid = new_uuid();
        assert_eq!(process_uuid(), process_uuid());
        assert_eq!(uuid.len(), 36);
        assert_eq!(uuid.as_bytes()[14], b'4');
        assert!(valid_uuid(&uuid));
        assert_ne!(uuid, new_uuid());
        assert!(!valid_uuid("a:b") && !valid_uuid("") && !valid_uuid(&"u".repeat(65)));
    }
}
