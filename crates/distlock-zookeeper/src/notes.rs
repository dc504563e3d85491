//! Each lock's note (a job's run record), beside the base rather than under it (so no
//! client reads it as a lock): `<base>%note/<percent-encoded name>`. A note is written in
//! one multi-op on condition that the writer's contender node still exists, and stamped
//! with the node's `mtime`, the leader's clock. Its data is the fencing token, the quiet
//! window (`q<ms>` from that write, `u<ms>` until a time on the server's clock, or
//! nothing) and the value, one per line. The server's clock now, to measure a window by,
//! is the `mtime` of a write to `<base>%note` itself.

use std::time::Duration;

use distlock_core::backend::{Grant, Note, check_note, note_refused};
use distlock_core::{Error, ErrorKind, Result};
use percent_encoding::{NON_ALPHANUMERIC, utf8_percent_encode};
use zookeeper_client as zk;

use crate::error::zk_error;
use crate::nodes::Live;
use crate::request::Request;

/// The node holding the notes of the locks under `base`.
fn notes_dir(base: &str) -> String {
    format!("{base}%note")
}

/// Lock `name`'s note node.
pub(crate) fn note_path(base: &str, name: &str) -> String {
    format!(
        "{}/{}",
        notes_dir(base),
        utf8_percent_encode(name, NON_ALPHANUMERIC)
    )
}

/// A note's data as stored.
struct Stored<'a> {
    fence: u64,
    window: Window,
    value: &'a str,
}

/// A note's quiet window as stored.
#[derive(Debug, Clone, Copy)]
enum Window {
    None,
    /// Milliseconds from the write that stored it.
    From(i64),
    /// Until this time on the server's clock (ms since the Unix epoch).
    Until(i64),
}

impl Stored<'_> {
    fn encode(&self) -> Vec<u8> {
        let window = match self.window {
            Window::None => String::new(),
            Window::From(ms) => format!("q{ms}"),
            Window::Until(ms) => format!("u{ms}"),
        };
        format!("{}\n{window}\n{}", self.fence, self.value).into_bytes()
    }

    fn decode(data: &[u8]) -> Option<Stored<'_>> {
        let text = std::str::from_utf8(data).ok()?;
        let mut lines = text.splitn(3, '\n');
        let fence = lines.next()?.parse().ok()?;
        let window = match lines.next()? {
            "" => Window::None,
            w => match w.split_at(1) {
                ("q", ms) => Window::From(ms.parse().ok()?),
                ("u", ms) => Window::Until(ms.parse().ok()?),
                _ => return None,
            },
        };
        Some(Stored {
            fence,
            window,
            value: lines.next()?,
        })
    }

    /// Until when, on the server's clock, the window of a note written at `mtime` runs.
    fn until(&self, mtime: i64) -> Option<i64> {
        match self.window {
            Window::None => None,
            Window::From(ms) => Some(mtime.saturating_add(ms)),
            Window::Until(at) => Some(at),
        }
    }
}

/// Writes `grant.name`'s note if its contender node still exists: the server's time of
/// the write.
pub(crate) async fn write(
    live: &Live,
    base: &str,
    grant: &Grant,
    fencing_token: u64,
    value: &str,
    quiet_for: Option<Duration>,
) -> Result<Option<u64>> {
    check_note(value)?;
    let request = grant.state::<Request>();
    let contender = request
        .and_then(|r| r.node.as_ref().or(r.leases.first()))
        .map(|node| node.path.clone())
        .ok_or_else(|| note_refused(&grant.name))?;
    let path = note_path(base, &grant.name);
    let err = zk_error("write_note");
    let before = match live.client.get_data(&path).await {
        Ok((data, stat)) => Some((data, stat.mtime)),
        Err(zk::Error::NoNode) => None,
        Err(e) => return Err(err(e)),
    };
    let window = match quiet_for {
        Some(quiet) => Window::From(i64::try_from(quiet.as_millis()).unwrap_or(i64::MAX)),
        None => before
            .as_ref()
            .and_then(|(data, mtime)| Stored::decode(data)?.until(*mtime))
            .map_or(Window::None, Window::Until),
    };
    let data = Stored {
        fence: fencing_token,
        window,
        value,
    }
    .encode();
    let mut tries = 0;
    loop {
        tries += 1;
        let mut multi = live.client.new_multi_writer();
        multi.add_check_version(&contender, -1).map_err(&err)?;
        if before.is_none() {
            let options = zk::CreateMode::Persistent.with_acls(live.acls);
            multi.add_create(&path, &[], &options).map_err(&err)?;
        }
        multi.add_set_data(&path, &data, None).map_err(&err)?;
        match multi.commit().await {
            Ok(results) => {
                let mtime = results.into_iter().find_map(|result| match result {
                    zk::MultiWriteResult::SetData { stat } => Some(stat.mtime),
                    _ => None,
                });
                return Ok(mtime.and_then(|ms| u64::try_from(ms).ok()));
            }
            Err(zk::MultiWriteError::OperationFailed { index: 0, .. }) => {
                return Err(note_refused(&grant.name));
            }
            Err(zk::MultiWriteError::OperationFailed {
                index: 1,
                source: zk::Error::NoNode,
            }) if before.is_none() && tries == 1 => {
                let options = zk::CreateMode::Persistent.with_acls(live.acls);
                match live.client.create(&notes_dir(base), &[], &options).await {
                    Ok(_) | Err(zk::Error::NodeExists) => {}
                    Err(e) => return Err(err(e)),
                }
            }
            Err(failed) => return Err(err(zk::Error::from(failed))),
        }
    }
}

/// Lock `name`'s note, its quiet window measured on the server's clock now.
pub(crate) async fn read(live: &Live, base: &str, name: &str) -> Result<Option<Note>> {
    let err = zk_error("read_note");
    let path = note_path(base, name);
    let (data, stat) = match live.client.get_data(&path).await {
        Ok(found) => found,
        Err(zk::Error::NoNode) => return Ok(None),
        Err(e) => return Err(err(e)),
    };
    let stored = Stored::decode(&data).ok_or_else(|| {
        Error::new(
            ErrorKind::Backend,
            format!("the node {path} does not hold a distlock note"),
        )
    })?;
    let mut note = Note::new(stored.value, stored.fence);
    note.written_unix_ms = u64::try_from(stat.mtime).ok();
    if let Some(until) = stored.until(stat.mtime) {
        // The server's clock now: the time of a write of ours.
        let now = live
            .client
            .set_data(&notes_dir(base), &[], None)
            .await
            .map_err(&err)?
            .mtime;
        note.quiet_for = u64::try_from(until.saturating_sub(now))
            .ok()
            .filter(|left| *left > 0)
            .map(Duration::from_millis);
    }
    Ok(Some(note))
}
