//! Waiting on etcd: for the deletion of a key, or of any key under a prefix, after a
//! revision — etcd's `waitDeletes`, one watch per waiter (on the client's one watch
//! stream), no polling.
//!
//! A watch is set from the store's current revision, not from the listing's: etcd serves
//! a watch that starts in the past from a loop that runs every 100 ms, so under
//! contention (other writes between a waiter's listing and its watch) every wake-up would
//! wait for that loop. What went between the listing and the watch's creation is read
//! once the watch stands instead. (etcd 3.4 still serves a watch from that loop when a
//! write lands between its reading of the current revision and the watch's registration;
//! under heavy contention a few waits in a hundred take up to 100 ms longer.)

use distlock_core::{Error, ErrorKind, Result};

use crate::error::etcd_error;
use crate::grpc::pb::{self, event::EventType, watch_create_request::FilterType};
use crate::grpc::{Client, ops};
use crate::watches::Watches;

/// What a request waits for: a deletion, after the revision of the listing that made it
/// wait.
#[derive(Debug, Clone)]
pub(crate) struct Deletion {
    /// The key (or, for [`Stood::Ahead`], the prefix of the keys) whose deletion may let it
    /// go.
    pub(crate) key: String,
    /// Deletions at or before this revision were in the listing already.
    pub(crate) after: i64,
    /// What the listing showed there.
    pub(crate) stood: Stood,
}

/// What a waiter's listing showed of what it waits for.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Stood {
    /// The key, as created at this revision (a key deleted and made again under the same
    /// name, as etcd's mutex does for a session that locks twice, is another); for a held
    /// key, as written at revision `granted`: a later write (an adoption of a hand-off)
    /// ends the hold as a deletion does.
    Key { created: i64, granted: Option<i64> },
    /// `count` keys under the prefix created before revision `before`: those ahead of the
    /// waiter. None can be added, so fewer means one went.
    Ahead { before: i64, count: usize },
}

/// Waits until `what` is deleted (or, for a held key, written again): true then; false
/// when etcd ends the watch first (it fell so far behind that its next revision was
/// compacted: the caller reads the state again); an error when etcd ends it for another
/// reason.
pub(crate) async fn deleted(watches: &Watches, client: &Client, what: &Deletion) -> Result<bool> {
    let range_end = match what.stood {
        Stood::Ahead { .. } => ops::prefix_end(what.key.as_bytes()),
        Stood::Key { .. } => Vec::new(),
    };
    // Waiters hear of deletions alone; a holder of its key's writes too (they are rare: an
    // adoption).
    let filters = match what.stood {
        Stood::Key {
            granted: Some(_), ..
        } => Vec::new(),
        _ => vec![FilterType::Noput.into()],
    };
    let mut watch = watches.watch(pb::WatchCreateRequest {
        key: what.key.as_bytes().to_vec(),
        range_end,
        filters,
        ..Default::default()
    })?;
    loop {
        let answer = watch.message().await?;
        if answer.canceled {
            return match answer.compact_revision {
                // Its next revision was compacted away: the caller reads the state anew.
                compacted if compacted > 0 => Ok(false),
                _ => Err(canceled(&answer.cancel_reason)),
            };
        }
        // The watch sees deletions from its creation on; one between the listing and then
        // is read (no write since the listing, nothing to read).
        let since = answer.header.as_ref().map_or(i64::MAX, |h| h.revision);
        if answer.created && since > what.after && went_since_listing(client, what).await? {
            return Ok(true);
        }
        if answer.events.iter().any(|event| {
            event.kv.as_ref().is_some_and(|kv| {
                concerns(what, &kv.key)
                    && (event.r#type == i32::from(EventType::Delete) || taken_over(what, kv))
            })
        }) {
            return Ok(true);
        }
    }
}

/// Whether what `what`'s listing showed is gone now.
pub(crate) async fn went_since_listing(client: &Client, what: &Deletion) -> Result<bool> {
    let read = match what.stood {
        Stood::Key { .. } => ops::range_key(&what.key),
        Stood::Ahead { before, .. } => pb::RangeRequest {
            max_create_revision: before - 1,
            ..ops::range_prefix(&what.key, 0)
        },
    };
    let read = pb::RangeRequest {
        keys_only: true,
        ..read
    };
    let now = client.range(read).await.map_err(etcd_error("watch"))?;
    Ok(match what.stood {
        Stood::Key { created, .. } => now
            .kvs
            .first()
            .is_none_or(|kv| kv.create_revision != created || taken_over(what, kv)),
        Stood::Ahead { count, .. } => now.kvs.len() < count,
    })
}

/// Whether held key `what`, as `kv` shows it now, was written since its grant.
fn taken_over(what: &Deletion, kv: &pb::KeyValue) -> bool {
    matches!(what.stood, Stood::Key { granted: Some(granted), .. } if kv.mod_revision != granted)
}

/// Whether the deletion of `key` concerns `what`: the key itself, or, for a prefix, a
/// contender right under it (not a key of a deeper lock, `<prefix>x/…`).
fn concerns(what: &Deletion, key: &[u8]) -> bool {
    match what.stood {
        Stood::Ahead { .. } => key
            .strip_prefix(what.key.as_bytes())
            .is_some_and(|own| !own.contains(&b'/')),
        Stood::Key { .. } => key == what.key.as_bytes(),
    }
}

/// A watch etcd ended for another reason than compaction: refused permissions are the
/// caller's to fix; anything else (a member that lost its leader) passes.
fn canceled(reason: &str) -> Error {
    match reason.contains("permission denied") {
        true => Error::invalid(format!(
            "etcd refused the watch: {reason} (the URL's user may not read the lock's prefix)"
        ))
        .with_backend("etcd"),
        false => Error::new(
            ErrorKind::Unavailable,
            format!("etcd ended the watch: {reason}"),
        )
        .with_backend("etcd")
        .temporary(),
    }
}
