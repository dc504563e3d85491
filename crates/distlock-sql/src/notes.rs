//! Each lock's note (a job's run record) in the `distlock_note` table, as every dialect
//! reads it back: the row's columns made a [`Note`], and the refusal of a write whose
//! grant is not live.

use std::time::Duration;

use distlock_core::backend::Note;
use distlock_core::{Error, ErrorKind, Result};

/// A `distlock_note` row as every dialect reads it back: its value, fencing token, time
/// of the write and the quiet milliseconds left (0 or less: none), on the database's clock.
pub(crate) type NoteRow = (String, i64, i64, i64);

/// The note of lock `name` that `row` holds, if one does.
pub(crate) fn from_row(name: &str, row: Option<NoteRow>) -> Result<Option<Note>> {
    let Some((value, fence, written_ms, quiet_left_ms)) = row else {
        return Ok(None);
    };
    let fence = u64::try_from(fence).map_err(|_| {
        Error::new(
            ErrorKind::Backend,
            format!("the note of `{name}` has the fencing token {fence}"),
        )
    })?;
    let mut note = Note::new(value, fence);
    note.written_unix_ms = u64::try_from(written_ms).ok();
    note.quiet_for = u64::try_from(quiet_left_ms)
        .ok()
        .filter(|left| *left > 0)
        .map(Duration::from_millis);
    Ok(Some(note))
}

/// The quiet window in milliseconds, as a bound parameter (`NULL`: the note's window goes
/// on; at least 1).
pub(crate) fn quiet_ms(quiet_for: Option<Duration>) -> Option<i64> {
    quiet_for.map(|q| i64::try_from(q.as_millis()).unwrap_or(i64::MAX).max(1))
}
