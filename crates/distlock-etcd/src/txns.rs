//! The transactions a request makes: queue its key, list its lock's contenders (stamping
//! its key when it may be granted), delete its key.

use distlock_core::backend::HolderRecord;
use distlock_core::{LockKind, Result};

use crate::error::etcd_error;
use crate::grpc::ops::{self, created_at, get, put};
use crate::grpc::pb::{self, KeyValue};
use crate::request::Key;
use crate::session::Live;

/// A lock's contender keys as one revision of the store saw them.
#[derive(Debug)]
pub(crate) struct Listing {
    /// The revision of the store the listing was read at (after the transaction's own
    /// write, if it made one).
    pub(crate) revision: i64,
    pub(crate) kvs: Vec<KeyValue>,
}

/// What queueing a key found.
#[derive(Debug)]
pub(crate) struct Queued {
    /// Whether this transaction created the key (else it was there: an earlier create
    /// whose answer was lost).
    pub(crate) fresh: bool,
    /// The key's create revision.
    pub(crate) created: i64,
    /// The lease the key lives on.
    pub(crate) lease: i64,
    pub(crate) listing: Listing,
}

/// The range read of every key under `pfx`.
fn range(pfx: &str) -> pb::RequestOp {
    get(ops::range_prefix(pfx, 0))
}

/// The range read of the keys under `pfx` created no later than revision `created`: a
/// request's own key and those ahead of it, which alone decide its turn.
fn ahead(pfx: &str, created: i64) -> pb::RequestOp {
    get(pb::RangeRequest {
        max_create_revision: created,
        ..ops::range_prefix(pfx, 0)
    })
}

/// Whether a transaction's conditions held, its revision, and its reads in order.
fn answers(answer: pb::TxnResponse) -> (bool, i64, Vec<Vec<KeyValue>>) {
    let revision = ops::revision(answer.header.as_ref());
    (answer.succeeded, revision, ops::reads(answer))
}

/// What queueing a key did.
#[derive(Debug)]
pub(crate) enum Enqueued {
    /// The key is in the queue.
    Queued(Queued),
    /// Asked to queue only on a free lock, it found keys under the prefix and wrote
    /// nothing: their listing.
    Busy(Listing),
}

/// Creates `key` with `value` on the session's lease unless it exists (etcd's mutex: `If
/// CreateRevision(key) = 0 Then Put Else Get`), and lists the contenders under `pfx` in the
/// same transaction. With `only_if_free`, it creates the key only if no key exists under
/// `pfx` at all (a range compare: every key's create revision 0 holds of an empty range
/// alone), so a request that would not wait writes nothing on a busy lock.
pub(crate) async fn queue(
    live: &Live,
    key: &str,
    value: &[u8],
    pfx: &str,
    only_if_free: bool,
) -> Result<Enqueued> {
    let put = put(key, value, live.lease);
    let txn = match only_if_free {
        true => ops::txn(
            vec![ops::none_under(pfx)],
            vec![put, range(pfx)],
            vec![range(pfx)],
        ),
        false => ops::txn(
            vec![created_at(key, 0)],
            vec![put, range(pfx)],
            vec![get(ops::range_key(key)), range(pfx)],
        ),
    };
    let answer = live.client.txn(txn).await.map_err(etcd_error("enqueue"))?;
    let (fresh, revision, mut gets) = answers(answer);
    let kvs = gets.pop().unwrap_or_default();
    if only_if_free && !fresh {
        return Ok(Enqueued::Busy(Listing { revision, kvs }));
    }
    let (created, lease) = match fresh {
        true => (revision, live.lease),
        false => gets
            .pop()
            .and_then(|own| own.into_iter().next())
            .map_or((0, 0), |kv| (kv.create_revision, kv.lease)),
    };
    Ok(Enqueued::Queued(Queued {
        fresh,
        created,
        lease,
        listing: Listing { revision, kvs },
    }))
}

/// Lists the contenders under `pfx` up to `key` (those ahead of it and itself) if `key`
/// still exists as created at `created`; with
/// `stamp`, writes `key` again first (on the session's lease), so the listing's revision
/// is a new one, above every fencing token handed out before. `None` if the key is gone.
pub(crate) async fn list(
    live: &Live,
    key: &str,
    created: i64,
    pfx: &str,
    stamp: Option<&[u8]>,
) -> Result<Option<Listing>> {
    let mut then = Vec::with_capacity(2);
    if let Some(value) = stamp {
        then.push(put(key, value, live.lease));
    }
    then.push(ahead(pfx, created));
    // On the session's lease too: a stamp applied late never takes a key back from an
    // adopter.
    let txn = ops::txn(ops::held_by(key, created, live.lease), then, Vec::new());
    let answer = live.client.txn(txn).await.map_err(etcd_error("poll"))?;
    let (succeeded, revision, mut gets) = answers(answer);
    if !succeeded {
        return Ok(None);
    }
    Ok(Some(Listing {
        revision,
        kvs: gets.pop().unwrap_or_default(),
    }))
}

/// Deletes `key` if it is still this request's (see [`ops::still_of`]): true if it was
/// there.
pub(crate) async fn delete(live: &Live, key: &Key) -> Result<bool> {
    let when = ops::still_of(&key.name, key.created, key.granted, live.lease);
    let txn = ops::txn(when, vec![ops::delete(&key.name)], Vec::new());
    let answer = live.client.txn(txn).await.map_err(etcd_error("delete"))?;
    Ok(answer.succeeded && ops::deleted(&answer) > 0)
}

/// The contender key under `pfx` last written at revision `fencing_token` (the write that
/// granted it) if it holds request token `grant` for a lock of `kind`: its name and create
/// revision, those of the grant a hand-off offers.
pub(crate) async fn handed_key(
    live: &Live,
    pfx: &str,
    (grant, kind): (&str, LockKind),
    fencing_token: i64,
) -> Result<Option<(String, i64)>> {
    let listing = live
        .client
        .range(ops::range_prefix(pfx, 0))
        .await
        .map_err(etcd_error("adopt"))?;
    let handed = listing.kvs.into_iter().find(|kv| {
        kv.mod_revision == fencing_token
            && !kv.key[pfx.len().min(kv.key.len())..].contains(&b'/')
            && HolderRecord::token_in(&kv.value).as_deref() == Some(grant)
            && HolderRecord::decode(&kv.value).is_some_and(|record| record.kind == kind)
    });
    Ok(handed.map(|kv| {
        let key = String::from_utf8_lossy(&kv.key).into_owned();
        (key, kv.create_revision)
    }))
}

/// Writes `key` with `value` on the session's lease if it was last written at revision
/// `fencing_token`: the adoption of a handed-off grant, which keeps the key's create
/// revision, and with it its place ahead of every waiter. The adoption's revision (the
/// adopter's fencing token), if it was made.
pub(crate) async fn take_over(
    live: &Live,
    key: &str,
    fencing_token: i64,
    value: &[u8],
) -> Result<Option<i64>> {
    let txn = ops::txn(
        vec![ops::modified_at(key, fencing_token)],
        vec![put(key, value, live.lease)],
        Vec::new(),
    );
    let answer = live.client.txn(txn).await.map_err(etcd_error("adopt"))?;
    Ok(answer
        .succeeded
        .then(|| ops::revision(answer.header.as_ref())))
}
