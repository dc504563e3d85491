//! `distlock status` on etcd: holders and waiters read from the contender keys, those of
//! etcd's own mutex (`etcdctl lock`) too.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::error::etcd_error;
use crate::grpc::pb::KeyValue;
use crate::grpc::{Client, ops};
use crate::queue;
use distlock_core::backend::{HolderInfo, LockState, WaiterInfo};
use distlock_core::{Error, ErrorKind, Result};

/// The most keys one `status` reads.
const MAX_KEYS: i64 = 100_000;

/// How long a `status` waits for etcd's answer: a member that hangs would otherwise hold it
/// until the connection's keep-alive gives up, 15 s later.
const READ_BOUND: Duration = Duration::from_secs(5);

/// The state of lock `name`, or of every lock under `prefix` with contenders.
pub(crate) async fn locks(
    client: &Client,
    prefix: &str,
    name: Option<&str>,
) -> Result<Vec<LockState>> {
    let root = format!("{prefix}/");
    let range = match name {
        Some(name) => format!("{root}{name}/"),
        None => root.clone(),
    };
    let kvs = read(client, &range, "inspect").await?;
    if let Some(name) = name {
        return Ok(vec![state(name, &range, &kvs).0]);
    }
    let mut by_lock: BTreeMap<String, Vec<KeyValue>> = BTreeMap::new();
    for kv in kvs {
        let lock = std::str::from_utf8(&kv.key)
            .ok()
            .and_then(|key| key.strip_prefix(&root))
            .and_then(|rest| rest.rsplit_once('/'))
            .map(|(lock, _)| lock.to_owned());
        if let Some(lock) = lock {
            by_lock.entry(lock).or_default().push(kv);
        }
    }
    Ok(by_lock
        .iter()
        .map(|(lock, kvs)| state(lock, &format!("{root}{lock}/"), kvs).0)
        .filter(|state| !state.holders.is_empty() || !state.waiters.is_empty())
        .collect())
}

/// The error of an `operation` etcd did not answer within [`READ_BOUND`].
fn unanswered(operation: &'static str) -> Error {
    Error::new(
        ErrorKind::Unavailable,
        format!("etcd did not answer within {READ_BOUND:?}"),
    )
    .with_backend("etcd")
    .with_operation(operation)
    .temporary()
}

/// The keys under `range`, within [`READ_BOUND`], for `operation`.
async fn read(client: &Client, range: &str, operation: &'static str) -> Result<Vec<KeyValue>> {
    let read = client.range(ops::range_prefix(range, MAX_KEYS));
    let answer = tokio::time::timeout(READ_BOUND, read)
        .await
        .map_err(|_| unanswered(operation))?
        .map_err(etcd_error(operation))?;
    if answer.more {
        // A part of a queue could show a waiter as a holder: say so instead.
        return Err(distlock_core::Error::invalid(format!(
            "more than {MAX_KEYS} keys under {range}: ask for the status of one lock"
        ))
        .with_backend("etcd"));
    }
    Ok(answer.kvs)
}

/// Breaks lock `name`'s holder with `fencing_token` (every holder: `None`): each key
/// deleted only if it is still the write that made the token, so a key stamped again
/// meanwhile (a later grant) is left alone. etcd's revision moves on with each deletion,
/// so every later grant's token is above the broken one's: there is no counter to bump.
pub(crate) async fn force_release(
    client: &Client,
    prefix: &str,
    name: &str,
    fencing_token: Option<u64>,
) -> Result<Vec<HolderInfo>> {
    let pfx = format!("{prefix}/{name}/");
    let (state, keys) = state(name, &pfx, &read(client, &pfx, "force_release").await?);
    let mut broken = Vec::new();
    for (holder, (key, modified)) in state.holders.into_iter().zip(keys) {
        if fencing_token.is_some_and(|token| token != holder.fencing_token) {
            continue;
        }
        let when = vec![ops::modified_at(&key, modified)];
        let delete = ops::txn(when, vec![ops::delete(&key)], Vec::new());
        let answer = tokio::time::timeout(READ_BOUND, client.txn(delete))
            .await
            .map_err(|_| unanswered("force_release"))?
            .map_err(etcd_error("force_release"))?;
        if answer.succeeded {
            broken.push(holder);
        }
    }
    Ok(broken)
}

/// The state of lock `name`, whose contender keys start with `pfx`, from its keys `kvs`.
/// A holder's fencing token is its key's last write: its create, or the stamp made when it
/// was granted after waiting. A contender whose turn came but which has not polled since
/// shows as a holder with its key's earlier write. Beside it, each holder's key and the
/// revision of its last write.
fn state(name: &str, pfx: &str, kvs: &[KeyValue]) -> (LockState, Vec<(String, i64)>) {
    let queue = queue::contenders(pfx, kvs);
    let holding = queue::holders(&queue);
    let mut state = LockState::new(name);
    let mut keys = Vec::new();
    for (contender, holds) in queue.into_iter().zip(holding) {
        let claim = contender.record;
        match holds {
            true => {
                let token = contender.modified.max(0) as u64;
                state.last_fencing_token = state.last_fencing_token.max(token);
                let mut holder = HolderInfo::new(claim.owner, claim.kind, token);
                holder.permits = claim.permits;
                // A key on no lease (another program's): no session's end removes it.
                holder.no_expiry = contender.lease == 0;
                holder.meta = claim.meta;
                state.holders.push(holder);
                keys.push((contender.key, contender.modified));
            }
            false => {
                let mut waiter = WaiterInfo::new(claim.owner, claim.kind);
                waiter.permits = claim.permits;
                waiter.fair = true;
                waiter.meta = claim.meta;
                state.waiters.push(waiter);
            }
        }
    }
    (state, keys)
}
