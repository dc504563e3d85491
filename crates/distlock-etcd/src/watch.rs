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
/// start revision was compacted: the caller reads the state again).
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
            return Ok(false);
        }
        if answer
            .events()
            .iter()
            .any(|event| event.event_type() == EventType::Delete)
        {
            return Ok(true);
        }
    }
}
