//! Each lock's note (a job's run record), in a hash beside the lock's keys, written only
//! under a live grant and stamped with the server's clock.

use std::time::Duration;

use distlock_core::backend::{Grant, Note, check_note, note_refused};
use distlock_core::{Error, ErrorKind, Result};

use super::RedisBackend;
use crate::keys::Key;
use crate::scripts::{Call, SCRIPTS};

/// A note as the read script answers it: value, fencing token, time of the write and quiet
/// milliseconds left, the numbers as text.
type Stored = Option<(String, String, String, String)>;

impl RedisBackend {
    /// Writes `grant.name`'s note if `grant` is live: the server's time of the write.
    pub(crate) async fn write_note_of(
        &self,
        grant: &Grant,
        fencing_token: u64,
        value: &str,
        quiet_for: Option<Duration>,
    ) -> Result<Option<u64>> {
        check_note(value)?;
        let mut write = Call::new(
            &SCRIPTS.note_write,
            self.keys(&grant.name)?,
            &Key::NOTE_WRITE,
        );
        let quiet = quiet_for.map_or(String::new(), |q| q.as_millis().max(1).to_string());
        write
            .arg(&grant.token)
            .arg(value)
            .arg(fencing_token)
            .arg(quiet);
        let written: i64 = self.invoke(&grant.name, "write_note", &write).await?;
        match u64::try_from(written) {
            Ok(at) => Ok(Some(at)),
            Err(_) => Err(note_refused(&grant.name)),
        }
    }

    /// Lock `name`'s note, with its quiet window measured by the server now.
    pub(crate) async fn read_note_of(&self, name: &str) -> Result<Option<Note>> {
        let read = Call::new(&SCRIPTS.note_read, self.keys(name)?, &[Key::Note]);
        let stored: Stored = self.invoke(name, "read_note", &read).await?;
        let Some((value, token, written, quiet_ms)) = stored else {
            return Ok(None);
        };
        let number = |text: &str| {
            text.parse::<u64>().map_err(|_| {
                Error::new(
                    ErrorKind::Backend,
                    format!("the note of `{name}` holds `{text}` where a number belongs"),
                )
            })
        };
        let mut note = Note::new(value, number(&token)?);
        note.written_unix_ms = Some(number(&written)?);
        note.quiet_for = Some(Duration::from_millis(number(&quiet_ms)?)).filter(|q| !q.is_zero());
        Ok(Some(note))
    }
}
