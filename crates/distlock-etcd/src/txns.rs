//! The transactions a request makes: queue its key, list its lock's contenders (stamping
//! its key when it may be granted), delete its key.

use distlock_core::Result;
use distlock_core::backend::HolderRecord;

use crate::error::etcd_error;
use crate::grpc::ops::{self, created_at, get, put};
use crate::grpc::pb::{self, KeyValue};
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
    let txn = ops::txn(vec![created_at(key, created)], then, Vec::new());
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

/// Deletes `key` if it is still the one created at `created` on the session's lease (any,
/// with `created` 0: a key whose create was not answered, never granted): true if it was
/// there.
pub(crate) async fn delete(live: &Live, key: &str, created: i64) -> Result<bool> {
    let when = match created {
        0 => Vec::new(),
        created => ops::held_by(key, created, live.lease),
    };
    let txn = ops::txn(when, vec![ops::delete(key)], Vec::new());
    let answer = live.client.txn(txn).await.map_err(etcd_error("delete"))?;
    Ok(answer.succeeded && ops::deleted(&answer) > 0)
}

/// The contender key under `pfx` last written at revision `fencing_token` (the write that
/// granted it) if it holds request token `grant`, and the transaction that moves it to the
/// session's lease with `value` if it still is: the adoption of a handed-off grant. Its
/// create revision is kept, and with it the key's place ahead of every waiter.
pub(crate) async fn adopt(
    live: &Live,
    pfx: &str,
    grant: &str,
    fencing_token: i64,
    value: &[u8],
) -> Result<Option<Adopted>> {
    let listing = live
        .client
        .range(ops::range_prefix(pfx, 0))
        .await
        .map_err(etcd_error("adopt"))?;
    let handed = listing.kvs.into_iter().find(|kv| {
        kv.mod_revision == fencing_token
            && !kv.key[pfx.len().min(kv.key.len())..].contains(&b'/')
            && HolderRecord::token_in(&kv.value).as_deref() == Some(grant)
    });
    let Some(handed) = handed else {
        return Ok(None);
    };
    let key = String::from_utf8_lossy(&handed.key).into_owned();
    let txn = ops::txn(
        vec![ops::modified_at(&key, fencing_token)],
        vec![put(&key, value, live.lease)],
        Vec::new(),
    );
    let answer = live.client.txn(txn).await.map_err(etcd_error("adopt"))?;
    Ok(answer.succeeded.then(|| Adopted {
        key,
        created: handed.create_revision,
        revision: ops::revision(answer.header.as_ref()),
    }))
}

/// A grant adopted: its key, as created, and the revision of the adoption's write (the
/// adopter's fencing token).
#[derive(Debug)]
pub(crate) struct Adopted {
    pub(crate) key: String,
    pub(crate) created: i64,
    pub(crate) revision: i64,
}
