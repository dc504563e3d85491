//! Where a lock lives in ZooKeeper's tree, and which children of its node are contenders.
//!
//! A lock named `orders/42` is the node `<base>/orders/42`, so a Curator
//! `InterProcessMutex(client, "<base>/orders/42")` contends for the same lock. A name
//! ZooKeeper cannot store as a path (an empty or `.`/`..` segment, a leading, trailing or
//! doubled `/`, characters ZooKeeper refuses), that contains `%`, or one of whose segments
//! after the first would be read as part of the lock above it (`locks` or `leases`, a
//! semaphore's own nodes, or a contender's name such as `lock-0000000001`) is stored as
//! the single node `<base>/%<percent-encoded name>` instead: every byte but ASCII letters,
//! digits and `-._~` becomes `%XX`. Names used verbatim never contain `%`, and escaped ones
//! always start with it, so no two names share a node; and no lock's node lies among
//! another lock's contenders or inside a semaphore's queue or leases.
//!
//! The children of a lock's node are its contenders, ordered by the 10-digit sequence
//! number ZooKeeper appends; any other child is ignored. Recognised names:
//!
//! | writer (exclusive)                 | reader (shared)      | made by                      |
//! |------------------------------------|----------------------|------------------------------|
//! | `_c_<uuid>-lock-<seq>`, `lock-<seq>` |                    | Curator `InterProcessMutex`, distlock mutex |
//! | `_c_<uuid>-__WRIT__<seq>`          | `_c_<uuid>-__READ__<seq>` | Curator `InterProcessReadWriteLock`, distlock `RwLock` |
//! | `<uuid>__lock__<seq>`              | `<uuid>__rlock__<seq>` | kazoo `Lock`, `ReadLock`    |

use distlock_core::LockKind;
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};

/// Bytes kept as they are when a name is escaped.
const ESCAPED: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// Whether ZooKeeper stores `segment` as one node name: not empty, not `.` or `..`, and no
/// character its path validation refuses. It checks Java's UTF-16 code units, and refuses
/// surrogates, so every character beyond U+FFFF (an emoji) too.
pub(crate) fn storable_segment(segment: &str) -> bool {
    !segment.is_empty()
        && segment != "."
        && segment != ".."
        && !segment.chars().any(|c| {
            matches!(c, '\u{0}'..='\u{1f}' | '\u{7f}'..='\u{9f}' | '\u{e000}'..='\u{f8ff}' | '\u{fff0}'..)
        })
}

/// Whether a node named `segment` just below a lock's node would be read as part of that
/// lock: a semaphore's `locks` or `leases`, or a contender.
fn reserved_below_a_lock(segment: &str) -> bool {
    segment == "locks" || segment == "leases" || contender(segment).is_some()
}

/// The node of lock `name` under `base` (see the module docs).
///
/// # Examples
///
/// ```ignore
/// assert_eq!(lock_path("/b", "orders/42"), "/b/orders/42");
/// assert_eq!(lock_path("/b", "a//b"), "/b/%a%2F%2Fb");
/// ```
pub(crate) fn lock_path(base: &str, name: &str) -> String {
    let verbatim = !name.contains('%')
        && name.split('/').all(storable_segment)
        && !name.split('/').skip(1).any(reserved_below_a_lock);
    if verbatim {
        format!("{base}/{name}")
    } else {
        format!("{base}/%{}", utf8_percent_encode(name, ESCAPED))
    }
}

/// The lock name of the node at `path` under `base`, if it is one [`lock_path`] makes.
pub(crate) fn lock_name(base: &str, path: &str) -> Option<String> {
    let relative = path.strip_prefix(base)?.strip_prefix('/')?;
    match relative.strip_prefix('%') {
        Some(escaped) => percent_encoding::percent_decode_str(escaped)
            .decode_utf8()
            .ok()
            .map(|name| name.into_owned()),
        None => Some(relative.to_owned()),
    }
}

/// Checks what the module docs promise of a valid lock `name`: its node is a path of
/// segments ZooKeeper stores, and it reads back as `name`, so no two names share a node.
#[cfg(any(test, fuzzing))]
pub(crate) fn check_name(name: &str) {
    let path = lock_path("/base", name);
    let relative = path.strip_prefix("/base/").expect("under the base");
    assert!(
        relative.split('/').all(storable_segment),
        "{name:?} -> {path:?}"
    );
    assert!(
        !relative.split('/').skip(1).any(reserved_below_a_lock),
        "{name:?} -> {path:?} lies inside another lock's node"
    );
    assert_eq!(lock_name("/base", &path).as_deref(), Some(name), "{path:?}");
}

/// What a contender asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    /// A mutex or a writer: goes when it is first.
    Exclusive,
    /// A reader: goes when no writer is ahead of it.
    Shared,
}

/// The markers of contender names, and what each asks for.
const MARKERS: [(&str, Role); 5] = [
    ("__WRIT__", Role::Exclusive),
    ("__READ__", Role::Shared),
    ("__rlock__", Role::Shared),
    ("__lock__", Role::Exclusive),
    ("lock-", Role::Exclusive),
];

/// One child of a lock's node that contends for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Contender {
    /// Its node name.
    pub(crate) name: String,
    /// The sequence number ZooKeeper gave it: its place in the queue.
    pub(crate) seq: i64,
    /// What it asks for.
    pub(crate) role: Role,
}

/// The contender a child node named `name` is, if it is one.
pub(crate) fn contender(name: &str) -> Option<Contender> {
    MARKERS.iter().find_map(|(marker, role)| {
        let (_, digits) = name.rsplit_once(marker)?;
        let seq = (digits.len() >= 10 && digits.bytes().all(|b| b.is_ascii_digit()))
            .then(|| digits.parse().ok())??;
        Some(Contender {
            name: name.to_owned(),
            seq,
            role: *role,
        })
    })
}

/// The contenders among `children`, in queue order.
pub(crate) fn queue(children: &[String]) -> Vec<Contender> {
    let mut contenders: Vec<Contender> = children.iter().filter_map(|c| contender(c)).collect();
    contenders.sort_by_key(|c| c.seq);
    contenders
}

/// Where the contender at `index` of `queue` stands: `None` if it may go now, or the
/// contender it waits for — the one just ahead of a writer, the nearest writer ahead of a
/// reader — whose deletion is the only change that can let it go.
pub(crate) fn blocker(queue: &[Contender], index: usize) -> Option<&Contender> {
    let ahead = &queue[..index];
    match queue[index].role {
        Role::Exclusive => ahead.last(),
        Role::Shared => ahead.iter().rev().find(|c| c.role == Role::Exclusive),
    }
}

/// The node-name prefix of a distlock contender of `kind`, unique to one request by its
/// `uuid` (Curator's protected-create prefix), before the sequence number.
pub(crate) fn node_prefix(uuid: &str, kind: LockKind) -> String {
    let marker = match kind {
        LockKind::Read => "__READ__",
        LockKind::Write => "__WRIT__",
        _ => "lock-",
    };
    format!("_c_{uuid}-{marker}")
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        #[test]
        fn every_valid_name_has_a_node_of_its_own(name in any::<String>()) {
            if distlock_core::validate_name(&name).is_ok() {
                check_name(&name);
            }
        }

        #[test]
        fn path_like_names_have_a_node_of_their_own(name in "[a./%\u{e000}\u{9f}\u{1f512}]{1,8}") {
            check_name(&name);
        }

        #[test]
        fn no_name_lies_inside_another_locks_node(
            name in "(a|locks|leases|lock-0000000001)(/(a|locks|leases|x__rlock__0000000002)){0,3}"
        ) {
            check_name(&name);
        }
    }

    #[test]
    fn names_that_are_paths_are_used_verbatim_and_others_are_escaped() {
        assert_eq!(lock_path("/b", "orders/42"), "/b/orders/42");
        assert_eq!(lock_path("/b", "a b:c"), "/b/a b:c");
        // Only below a lock's node are these names part of it; the base is not a lock.
        assert_eq!(lock_path("/b", "locks/x"), "/b/locks/x");
        assert_eq!(lock_path("/b", "lock-0000000001"), "/b/lock-0000000001");
        assert_eq!(lock_path("/b", "x/locksmith"), "/b/x/locksmith");
        for (name, path) in [
            ("a//b", "/b/%a%2F%2Fb"),
            ("/lead", "/b/%%2Flead"),
            ("trail/", "/b/%trail%2F"),
            ("..", "/b/%.."),
            ("50%", "/b/%50%25"),
            ("x/./y", "/b/%x%2F.%2Fy"),
            ("\u{e000}", "/b/%%EE%80%80"),
            ("a\u{1f512}", "/b/%a%F0%9F%94%92"),
            ("jobs/locks", "/b/%jobs%2Flocks"),
            ("jobs/leases/x", "/b/%jobs%2Fleases%2Fx"),
            ("x/lock-0000000001", "/b/%x%2Flock-0000000001"),
            (
                "x/f2e1d3__rlock__0000000005/y",
                "/b/%x%2Ff2e1d3__rlock__0000000005%2Fy",
            ),
        ] {
            assert_eq!(lock_path("/b", name), path, "{name:?}");
            assert_eq!(lock_name("/b", path).as_deref(), Some(name));
        }
        assert_eq!(
            lock_name("/b", "/b/orders/42").as_deref(),
            Some("orders/42")
        );
        assert_eq!(lock_name("/b", "/other/x"), None);
    }

    #[test]
    fn contenders_of_curator_kazoo_and_distlock_are_recognised() {
        let children: Vec<String> = [
            "_c_1b4e28ba-2fa1-11d2-883f-0016d3cca427-lock-0000000003",
            "lock-0000000001",
            "_c_x-__READ__0000000004",
            "_c_y-__WRIT__0000000002",
            "f2e1d3__lock__0000000006",
            "f2e1d3__rlock__0000000005",
            "leases",
            "lock-",
            "lock-12",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let queue = queue(&children);
        let seqs: Vec<i64> = queue.iter().map(|c| c.seq).collect();
        assert_eq!(seqs, [1, 2, 3, 4, 5, 6]);
        let roles: Vec<Role> = queue.iter().map(|c| c.role).collect();
        use Role::*;
        assert_eq!(
            roles,
            [Exclusive, Exclusive, Exclusive, Shared, Shared, Exclusive]
        );
    }

    #[test]
    fn a_writer_waits_for_the_one_ahead_and_a_reader_for_the_nearest_writer() {
        let queue = queue(
            &[
                "r-__READ__0000000001",
                "w-__WRIT__0000000002",
                "r-__READ__0000000003",
                "r-__READ__0000000004",
                "w-__WRIT__0000000005",
            ]
            .map(String::from),
        );
        assert_eq!(blocker(&queue, 0), None);
        assert_eq!(blocker(&queue, 1).map(|c| c.seq), Some(1));
        assert_eq!(blocker(&queue, 3).map(|c| c.seq), Some(2));
        assert_eq!(blocker(&queue, 4).map(|c| c.seq), Some(4));
        let readers =
            self::queue(&["a__rlock__0000000001", "b__rlock__0000000002"].map(String::from));
        assert_eq!(blocker(&readers, 1), None, "readers share");
    }
}
