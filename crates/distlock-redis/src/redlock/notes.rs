//! A RedLock lock's note (a job's run record): written on every master that still has
//! the grant, and kept when a majority did; read as the note of the highest fencing
//! token among a majority's answers, with the longest quiet window any of them has left
//! (so no master's clock ends a window early).

use std::time::Duration;

use distlock_core::backend::{Grant, Note, check_note};
use distlock_core::{Error, ErrorKind, Result};

use super::backend::RedlockBackend;

/// How long a master may take over a note.
const NOTE_WITHIN: Duration = Duration::from_secs(2);

impl RedlockBackend {
    /// Writes `grant.name`'s note on every master: a majority must still have the grant.
    /// The earliest master's time of the write.
    pub(super) async fn write_note_on_masters(
        &self,
        grant: &Grant,
        fencing_token: u64,
        value: &str,
        quiet_for: Option<Duration>,
    ) -> Result<Option<u64>> {
        check_note(value)?;
        let answers = self
            .on_all(NOTE_WITHIN, |master| async move {
                Ok(master
                    .write_note_of(grant, fencing_token, value, quiet_for)
                    .await)
            })
            .await;
        let written: Vec<Option<u64>> = answers
            .iter()
            .flatten()
            .filter_map(|a| a.as_ref().ok().copied())
            .collect();
        let refused = Self::refusals(&answers);
        if written.len() >= self.quorum {
            return Ok(written.into_iter().flatten().min());
        }
        if refused > self.masters() - self.quorum {
            return Err(Error::new(
                ErrorKind::NotHeld,
                format!(
                    "the grant of lock `{}` is gone from a majority of masters: the note is not kept",
                    grant.name
                ),
            ));
        }
        Err(Error::new(
            ErrorKind::QuorumNotReached,
            format!(
                "no majority of RedLock masters wrote the note of `{}`",
                grant.name
            ),
        )
        .with_backend("redlock")
        .with_operation("write_note")
        .temporary())
    }

    /// Lock `name`'s note as a majority of masters shows it.
    pub(super) async fn read_note_on_masters(&self, name: &str) -> Result<Option<Note>> {
        let answers = self
            .on_all(NOTE_WITHIN, |master| master.read_note_of(name))
            .await;
        self.quorum_of("read_note", &answers)?;
        let notes: Vec<Note> = answers.into_iter().flatten().flatten().collect();
        let Some(latest) = notes.iter().map(|note| note.fencing_token).max() else {
            return Ok(None);
        };
        let of_latest: Vec<&Note> = notes.iter().filter(|n| n.fencing_token == latest).collect();
        let mut note = of_latest[0].clone();
        note.written_unix_ms = of_latest.iter().filter_map(|n| n.written_unix_ms).min();
        note.quiet_for = of_latest.iter().filter_map(|n| n.quiet_for).max();
        Ok(Some(note))
    }
}
