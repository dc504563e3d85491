//! A lock's queue: its contender keys in the order of their create revisions, and who of
//! them may hold it.

use distlock_core::backend::HolderRecord;
use distlock_core::{Error, LockKind, Result};

use crate::grpc::pb::KeyValue;
use crate::record::claim;

/// One contender key of a lock.
#[derive(Debug, Clone)]
pub(crate) struct Contender {
    pub(crate) key: String,
    pub(crate) created: i64,
    pub(crate) modified: i64,
    /// The lease the key lives on; 0 for a key on none (another program's).
    pub(crate) lease: i64,
    pub(crate) record: HolderRecord,
}

/// The contenders of the lock whose keys start with `pfx`, from a range read of `pfx`, in
/// queue order. Keys deeper under `pfx` are another lock's (`a/b`'s under `a`'s prefix) and
/// are left out.
pub(crate) fn contenders(pfx: &str, kvs: &[KeyValue]) -> Vec<Contender> {
    let mut queue: Vec<Contender> = kvs
        .iter()
        .filter_map(|kv| {
            let key = std::str::from_utf8(&kv.key).ok()?;
            let own = key.strip_prefix(pfx)?;
            if own.is_empty() || own.contains('/') {
                return None;
            }
            Some(Contender {
                key: key.to_owned(),
                created: kv.create_revision,
                modified: kv.mod_revision,
                lease: kv.lease,
                record: claim(key, &kv.value, kv.lease),
            })
        })
        .collect();
    queue.sort_by_key(|c| c.created);
    queue
}

/// What a request's place in its queue lets it do.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Turn {
    /// It holds the lock.
    Go,
    /// It waits for the deletion of this contender key, created at `created`.
    WaitFor { key: String, created: i64 },
    /// It waits for any contender ahead of it to go (a semaphore's permits).
    WaitForAny,
}

/// The turn of the contender at `index` of `queue`, asking for `kind` with `permits`.
pub(crate) fn turn(queue: &[Contender], index: usize, kind: LockKind, permits: u32) -> Turn {
    let ahead = &queue[..index];
    match kind {
        LockKind::Semaphore { limit } => {
            let taken: u64 = ahead.iter().map(|c| u64::from(c.record.permits)).sum();
            match taken + u64::from(permits) <= u64::from(limit) {
                true => Turn::Go,
                false => Turn::WaitForAny,
            }
        }
        LockKind::Read => match ahead.iter().rev().find(|c| c.record.kind.is_exclusive()) {
            None => Turn::Go,
            Some(writer) => Turn::WaitFor {
                key: writer.key.clone(),
                created: writer.created,
            },
        },
        // Mutex, Write, and any kind a later core adds: exclusive, the safe reading.
        _ => match ahead.last() {
            None => Turn::Go,
            Some(before) => Turn::WaitFor {
                key: before.key.clone(),
                created: before.created,
            },
        },
    }
}

/// Which contenders of `queue` hold the lock now (each one's turn is to go).
pub(crate) fn holders(queue: &[Contender]) -> Vec<bool> {
    (0..queue.len())
        .map(|i| {
            let record = &queue[i].record;
            turn(queue, i, record.kind, record.permits) == Turn::Go
        })
        .collect()
}

/// Refuses a request of `kind` on lock `name` whose queue holds contenders of another use:
/// a semaphore beside locks, or a semaphore of another size.
pub(crate) fn same_use(queue: &[Contender], name: &str, kind: LockKind) -> Result<()> {
    let other = queue.iter().find(|c| match (kind, c.record.kind) {
        (LockKind::Semaphore { limit }, LockKind::Semaphore { limit: theirs }) => limit != theirs,
        (LockKind::Semaphore { .. }, _) | (_, LockKind::Semaphore { .. }) => true,
        _ => false,
    });
    match other {
        None => Ok(()),
        Some(other) => {
            let theirs = match other.record.kind {
                LockKind::Semaphore { limit } => format!("a semaphore of {limit} permits"),
                _ => "a lock".to_owned(),
            };
            let ours = match kind {
                LockKind::Semaphore { limit } => format!("a semaphore of {limit} permits"),
                other => format!("a {}", other.as_str()),
            };
            Err(
                Error::invalid(format!("`{name}` is in use as {theirs}, not as {ours}"))
                    .with_backend("etcd"),
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use distlock_core::HolderMeta;

    fn contender(n: i64, kind: LockKind, permits: u32) -> Contender {
        Contender {
            key: format!("p/{n}"),
            created: n,
            modified: n,
            lease: 1,
            record: HolderRecord {
                owner: n.to_string(),
                kind,
                permits,
                meta: HolderMeta::this_process(),
                fencing_token: None,
            },
        }
    }

    #[test]
    fn readers_go_together_until_a_writer_and_wait_for_the_nearest_writer() {
        let queue = [
            contender(1, LockKind::Read, 1),
            contender(2, LockKind::Read, 1),
            contender(3, LockKind::Write, 1),
            contender(4, LockKind::Read, 1),
            contender(5, LockKind::Mutex, 1),
            contender(6, LockKind::Read, 1),
        ];
        assert_eq!(holders(&queue), [true, true, false, false, false, false]);
        assert_eq!(
            turn(&queue, 3, LockKind::Read, 1),
            Turn::WaitFor {
                key: "p/3".into(),
                created: 3
            }
        );
        assert_eq!(
            turn(&queue, 5, LockKind::Read, 1),
            Turn::WaitFor {
                key: "p/5".into(),
                created: 5
            }
        );
        assert_eq!(
            turn(&queue, 2, LockKind::Write, 1),
            Turn::WaitFor {
                key: "p/2".into(),
                created: 2
            }
        );
    }

    #[test]
    fn permits_go_while_they_fit() {
        let sem = LockKind::Semaphore { limit: 3 };
        let queue = [
            contender(1, sem, 2),
            contender(2, sem, 1),
            contender(3, sem, 1),
            contender(4, sem, 2),
        ];
        assert_eq!(holders(&queue), [true, true, false, false]);
        assert_eq!(turn(&queue, 3, sem, 2), Turn::WaitForAny);
    }

    #[test]
    fn a_semaphore_and_a_lock_never_share_a_name() {
        let queue = [contender(1, LockKind::Semaphore { limit: 2 }, 1)];
        assert!(same_use(&queue, "n", LockKind::Mutex).is_err());
        assert!(same_use(&queue, "n", LockKind::Semaphore { limit: 3 }).is_err());
        assert!(same_use(&queue, "n", LockKind::Semaphore { limit: 2 }).is_ok());
        let queue = [contender(1, LockKind::Write, 1)];
        assert!(same_use(&queue, "n", LockKind::Read).is_ok());
    }
}
