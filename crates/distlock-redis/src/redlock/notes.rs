//! A RedLock lock's note (a job's run record): written on every master that still has
//! the grant, and kept when a majority did; read as the note a majority holds alike (see
//! [`kept_note`]).

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
        Ok(kept_note(&notes, self.quorum))
    }
}

/// The note a write kept, of the `notes` the masters answered with: the one of the highest
/// fencing token that `quorum` masters hold alike. A write is kept only where a majority
/// took it, so a note on fewer is one that was refused: a late write under a released
/// grant that reached a master before its release did, or one whose majority failed. Where
/// no note has a quorum (some masters did not answer), the highest token's latest write.
/// Its write time is the earliest among the masters holding it, and its quiet window the
/// longest any of them has left (so no master's clock ends a window early).
fn kept_note(notes: &[Note], quorum: usize) -> Option<Note> {
    let alike = |note: &Note| {
        notes
            .iter()
            .filter(|n| n.fencing_token == note.fencing_token && n.value == note.value)
            .collect::<Vec<_>>()
    };
    let kept = notes
        .iter()
        .filter(|note| alike(note).len() >= quorum)
        .max_by_key(|note| note.fencing_token)
        .or_else(|| {
            notes
                .iter()
                .max_by_key(|note| (note.fencing_token, note.written_unix_ms))
        })?;
    let mut note = kept.clone();
    let holders = alike(kept);
    note.written_unix_ms = holders.iter().filter_map(|n| n.written_unix_ms).min();
    note.quiet_for = holders.iter().filter_map(|n| n.quiet_for).max();
    Some(note)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn note(value: &str, token: u64, written: u64) -> Note {
        let mut note = Note::new(value, token);
        note.written_unix_ms = Some(written);
        note
    }

    #[test]
    fn a_note_on_a_minority_of_masters_was_not_kept() {
        let late = note("late", 7, 30);
        let kept = note("kept", 7, 10);
        let notes = [late.clone(), kept.clone(), note("kept", 7, 12)];
        assert_eq!(kept_note(&notes, 2).unwrap().value, "kept");
        assert_eq!(kept_note(&notes, 2).unwrap().written_unix_ms, Some(10));
        // A higher token's write that reached one master only failed its quorum.
        let notes = [note("failed", 9, 40), kept.clone(), note("kept", 7, 12)];
        assert_eq!(kept_note(&notes, 2).unwrap().value, "kept");
        // With no quorum among the answers, the highest token's latest write.
        assert_eq!(kept_note(&[late, kept], 2).unwrap().value, "late");
        assert_eq!(kept_note(&[], 2), None);
    }
}
