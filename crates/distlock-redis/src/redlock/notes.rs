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

    /// Lock `name`'s note as a majority of masters shows it (see [`kept_note`]); a
    /// temporary `QuorumNotReached` while the masters that did not answer could decide it.
    pub(super) async fn read_note_on_masters(&self, name: &str) -> Result<Option<Note>> {
        let answers = self
            .on_all(NOTE_WITHIN, |master| master.read_note_of(name))
            .await;
        self.quorum_of("read_note", &answers)?;
        let silent = answers.iter().filter(|a| a.is_none()).count();
        let answered: Vec<Option<Note>> = answers.into_iter().flatten().collect();
        match kept_note(&answered, silent, self.quorum) {
            Kept::Note(note) => Ok(note),
            Kept::Undecided => Err(Error::new(
                ErrorKind::QuorumNotReached,
                format!(
                    "the RedLock masters that answered disagree on the note of `{name}`, and those that did not could decide it"
                ),
            )
            .with_backend("redlock")
            .with_operation("read_note")
            .temporary()),
        }
    }
}

/// What the masters' answers tell of a lock's note.
#[derive(Debug, PartialEq)]
enum Kept {
    /// The note (or that there is none).
    Note(Option<Note>),
    /// No answer has a majority yet, and the masters that did not answer could give one.
    Undecided,
}

/// The note a write kept, of each answering master's note (`None`: it has none), with
/// `silent` masters not answering: the one a `quorum` of masters hold alike, with the same
/// fencing token and value (at most one can). A write is kept only where a majority took it,
/// so a note on fewer is one that was refused: a late write under a released grant that
/// reached a master before its release did, or a write whose majority failed.
///
/// Where no answer has a quorum, the masters that did not answer may hold the rest of one:
/// undecided. Where they cannot (all answered, but a master lost its copy in a restart, or
/// writes split), the answer most masters hold, then the highest token, then the latest
/// write. A note's write time is the earliest among the masters holding it, and its quiet
/// window the longest any of them has left (so no master's clock ends a window early).
fn kept_note(answers: &[Option<Note>], silent: usize, quorum: usize) -> Kept {
    let same = |a: &Option<Note>, b: &Option<Note>| match (a, b) {
        (Some(a), Some(b)) => a.fencing_token == b.fencing_token && a.value == b.value,
        (a, b) => a.is_none() && b.is_none(),
    };
    let holders = |answer: &Option<Note>| answers.iter().filter(|a| same(a, answer)).count();
    let best = answers.iter().max_by_key(|answer| {
        let note = answer.as_ref();
        (
            holders(answer),
            note.map(|n| n.fencing_token),
            note.and_then(|n| n.written_unix_ms),
        )
    });
    let Some(best) = best else {
        return Kept::Note(None);
    };
    let most = holders(best);
    if most < quorum && most + silent >= quorum {
        return Kept::Undecided;
    }
    Kept::Note(best.as_ref().map(|kept| {
        let alike = answers
            .iter()
            .flatten()
            .filter(|n| n.fencing_token == kept.fencing_token && n.value == kept.value);
        let mut note = kept.clone();
        note.written_unix_ms = alike.clone().filter_map(|n| n.written_unix_ms).min();
        note.quiet_for = alike.filter_map(|n| n.quiet_for).max();
        note
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn note(value: &str, token: u64, written: u64) -> Option<Note> {
        let mut note = Note::new(value, token);
        note.written_unix_ms = Some(written);
        Some(note)
    }

    fn value(kept: Kept) -> Option<String> {
        match kept {
            Kept::Note(note) => note.map(|n| n.value),
            Kept::Undecided => Some("undecided".into()),
        }
    }

    #[test]
    fn a_note_on_a_minority_of_masters_was_not_kept() {
        let (late, kept) = (note("late", 7, 30), note("kept", 7, 10));
        let notes = [late.clone(), kept.clone(), note("kept", 7, 12)];
        assert_eq!(value(kept_note(&notes, 0, 2)).as_deref(), Some("kept"));
        let Kept::Note(Some(first)) = kept_note(&notes, 0, 2) else {
            panic!("a note")
        };
        assert_eq!(first.written_unix_ms, Some(10), "the earliest write");
        // A higher token's write that reached one master only failed its quorum.
        let notes = [note("failed", 9, 40), kept.clone(), note("kept", 7, 12)];
        assert_eq!(value(kept_note(&notes, 0, 2)).as_deref(), Some("kept"));
        // A write that reached one master of a name that had no note: none was kept.
        assert_eq!(value(kept_note(&[late.clone(), None, None], 0, 2)), None);
    }

    #[test]
    fn a_silent_master_that_could_decide_leaves_the_note_undecided() {
        let (late, kept) = (note("late", 7, 30), note("kept", 7, 10));
        assert_eq!(
            kept_note(&[late.clone(), kept.clone()], 1, 2),
            Kept::Undecided
        );
        assert_eq!(
            value(kept_note(&[kept.clone(), kept.clone()], 1, 2)).as_deref(),
            Some("kept")
        );
        // Five masters, three answering alike: decided whatever the other two hold.
        let three = [kept.clone(), kept.clone(), kept.clone()];
        assert_eq!(value(kept_note(&three, 2, 3)).as_deref(), Some("kept"));
        // All answered, none alike (a master lost its copy): the highest, latest write.
        assert_eq!(
            value(kept_note(&[late, kept, None], 0, 2)).as_deref(),
            Some("late")
        );
        assert_eq!(kept_note(&[], 0, 2), Kept::Note(None));
    }
}
