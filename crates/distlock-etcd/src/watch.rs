//! Waiting on etcd: for the deletion of a key, or of any key under a prefix, after a
//! revision — etcd's `waitDeletes`, one watch per waiter, no polling.

use distlock_core::{Error, ErrorKind, Result};
use etcd_client::{Client, EventType, WatchFilterType, WatchOptions};

use crate::error::etcd_error;

/// What a request waits for: a deletion, after the revision of the listing that made it
/// wait.
#[derive(Debug, Clone)]
pub(crate) struct Deletion {
    /// The key (or, with `prefix`, the prefix of the keys) whose deletion may let it go.
    pub(crate) key: String,
    pub(crate) prefix: bool,
    /// Deletions at or before this revision were in the listing already.
    pub(crate) after: i64,
}

/// Waits until `what` is deleted: true then; false when etcd ends the watch first (its
/// start revision was compacted: the caller reads the state again); an error when etcd ends
/// it for another reason.
pub(crate) async fn deleted(client: &Client, what: &Deletion) -> Result<bool> {
    let mut options = WatchOptions::new()
        .with_start_revision(what.after + 1)
        .with_filters([WatchFilterType::NoPut]);
    if what.prefix {
        options = options.with_prefix();
    }
    let mut stream = client
        .watch_client()
        .watch(what.key.as_str(), Some(options))
        .await
        .map_err(etcd_error("watch"))?;
    loop {
        let Some(answer) = stream.message().await.map_err(etcd_error("watch"))? else {
            return Err(
                Error::new(ErrorKind::Unavailable, "the etcd watch stream ended")
                    .with_backend("etcd")
                    .temporary(),
            );
        };
        if answer.canceled() {
            return match answer.compact_revision() {
                // Its start revision was compacted away: the caller reads the state anew.
                compacted if compacted > 0 => Ok(false),
                _ => Err(canceled(answer.cancel_reason())),
            };
        }
        if answer.events().iter().any(|event| {
            event.event_type() == EventType::Delete
                && event.kv().is_some_and(|kv| concerns(what, kv.key()))
        }) {
            return Ok(true);
        }
    }
}

/// Whether the deletion of `key` concerns `what`: the key itself, or, for a prefix, a
/// contender right under it (not a key of a deeper lock, `<prefix>x/…`).
fn concerns(what: &Deletion, key: &[u8]) -> bool {
    match what.prefix {
        true => key
            .strip_prefix(what.key.as_bytes())
            .is_some_and(|own| !own.contains(&b'/')),
        false => key == what.key.as_bytes(),
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
