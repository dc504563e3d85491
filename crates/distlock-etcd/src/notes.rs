//! Each lock's note (a job's run record) beside the locks' prefix: `<prefix>%note/<name>`
//! holds the fencing token it was written under, a newline and the value, written in one transaction
//! on condition that the writer's contender key stands as its grant wrote it; `<prefix>%quiet/<name>`, on a lease
//! of its own, stands for the quiet window, which etcd counts down in whole seconds and
//! ends by deleting the key. etcd
//! has no clock of its own to stamp a note with: its times are `None`.

use std::time::Duration;

use distlock_core::backend::{Grant, Note, check_note, note_refused};
use distlock_core::{Error, ErrorKind, Result};

use crate::error::etcd_error;
use crate::grpc::ops;
use crate::request::Request;
use crate::session::Live;

/// Where lock `name`'s note and quiet window live under `prefix`.
pub(crate) fn keys(prefix: &str, name: &str) -> (String, String) {
    (
        format!("{prefix}%note/{name}"),
        format!("{prefix}%quiet/{name}"),
    )
}

/// Writes `grant.name`'s note if its contender key still stands.
pub(crate) async fn write(
    live: &Live,
    prefix: &str,
    grant: &Grant,
    fencing_token: u64,
    value: &str,
    quiet_for: Option<Duration>,
) -> Result<Option<u64>> {
    check_note(value)?;
    let key = grant
        .state::<Request>()
        .and_then(|request| request.key.as_ref())
        .filter(|key| key.granted > 0)
        .ok_or_else(|| note_refused(&grant.name))?;
    let (note_key, quiet_key) = keys(prefix, &grant.name);
    let stored = format!("{fencing_token}\n{value}");
    let window = match quiet_for {
        Some(quiet) => {
            let seconds = i64::try_from(quiet.as_millis().div_ceil(1000)).unwrap_or(i64::MAX);
            let granted = live.client.lease_grant(seconds.max(1)).await;
            Some(granted.map_err(etcd_error("write_note"))?.id)
        }
        None => None,
    };
    let mut then = vec![ops::put(&note_key, stored.as_bytes(), 0)];
    if let Some(lease) = window {
        then.push(ops::put(&quiet_key, b"", lease));
    }
    let txn = ops::txn(
        vec![ops::modified_at(&key.name, key.granted)],
        then,
        Vec::new(),
    );
    // A write whose answer was lost may have been made: its window's lease stays.
    let answer = live
        .client
        .txn(txn)
        .await
        .map_err(etcd_error("write_note"))?;
    if answer.succeeded {
        return Ok(None);
    }
    if let Some(lease) = window {
        let _ = live.client.lease_revoke(lease).await;
    }
    Err(note_refused(&grant.name))
}

/// Lock `name`'s note, with what etcd says is left of its quiet window's lease.
pub(crate) async fn read(live: &Live, prefix: &str, name: &str) -> Result<Option<Note>> {
    let (note_key, quiet_key) = keys(prefix, name);
    let reads = vec![
        ops::get(ops::range_key(&note_key)),
        ops::get(ops::range_key(&quiet_key)),
    ];
    let answer = live
        .client
        .txn(ops::txn(Vec::new(), reads, Vec::new()))
        .await
        .map_err(etcd_error("read_note"))?;
    let mut reads = ops::reads(answer).into_iter();
    let (note, quiet) = (
        reads.next().unwrap_or_default(),
        reads.next().unwrap_or_default(),
    );
    let Some(note) = note.into_iter().next() else {
        return Ok(None);
    };
    let stored = std::str::from_utf8(&note.value)
        .ok()
        .and_then(|text| text.split_once('\n'))
        .and_then(|(token, value)| Some((token.parse::<u64>().ok()?, value)));
    let Some((token, value)) = stored else {
        return Err(Error::new(
            ErrorKind::Backend,
            format!("the note of `{name}` at {note_key} is not distlock's"),
        ));
    };
    let mut read = Note::new(value, token);
    if let Some(window) = quiet.into_iter().next().filter(|kv| kv.lease != 0) {
        let left = live
            .client
            .lease_time_to_live(window.lease)
            .await
            .map_err(etcd_error("read_note"))?;
        // etcd says whole seconds, rounded: while the key stands (etcd deletes it once its
        // lease has run out), at least one.
        read.quiet_for = match left.ttl {
            -1 => None,
            seconds => Some(Duration::from_secs(
                u64::try_from(seconds).unwrap_or(0).max(1),
            )),
        };
    }
    Ok(Some(read))
}
