//! A lock's note: a short text kept by the store beside a lock's name, written only under
//! a live grant of that name (a job's run record), stamped with the store's clock, with an
//! optional quiet window the store measures.

use std::time::Duration;

use crate::error::{Error, Result};

/// What a backend keeps of lock `name`'s note, as [`Backend::read_note`](super::Backend::read_note)
/// answers it.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use distlock_core::backend::Note;
/// let mut note = Note::new("{\"outcome\":\"succeeded\"}", 7);
/// note.written_unix_ms = Some(1_700_000_000_000);
/// note.quiet_for = Some(Duration::from_secs(60));
/// assert_eq!(note.fencing_token, 7);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Note {
    /// The text, as written.
    pub value: String,
    /// The fencing token of the grant it was written under.
    pub fencing_token: u64,
    /// When it was written, on the store's clock (milliseconds since the Unix epoch);
    /// `None` for a store without a clock of its own (etcd).
    pub written_unix_ms: Option<u64>,
    /// What is left of the quiet window it was written with, measured by the store at the
    /// read; `None` when it had none or it has ended.
    pub quiet_for: Option<Duration>,
}

impl Note {
    /// A note of `value` written under the grant of `fencing_token`, with no time and no
    /// quiet window until the backend sets them.
    ///
    /// # Examples
    ///
    /// See [`Note`].
    pub fn new(value: impl Into<String>, fencing_token: u64) -> Note {
        Note {
            value: value.into(),
            fencing_token,
            written_unix_ms: None,
            quiet_for: None,
        }
    }
}

/// The longest note a backend must keep: a job's run record is a fraction of it.
///
/// # Examples
///
/// ```
/// assert!(distlock_core::backend::MAX_NOTE_LEN >= 1024);
/// ```
pub const MAX_NOTE_LEN: usize = 4096;

/// The refusal of a note written under a grant that is no longer live (`NotHeld`), for a
/// backend's [`write_note`](super::Backend::write_note).
///
/// # Examples
///
/// ```
/// use distlock_core::ErrorKind;
/// use distlock_core::backend::note_refused;
/// assert_eq!(note_refused("jobs/a").kind(), ErrorKind::NotHeld);
/// ```
pub fn note_refused(name: &str) -> Error {
    Error::new(
        crate::error::ErrorKind::NotHeld,
        format!("the grant of lock `{name}` is gone: the note is not written"),
    )
}

/// Refuses a note longer than [`MAX_NOTE_LEN`], for a backend's
/// [`write_note`](super::Backend::write_note).
///
/// # Examples
///
/// ```
/// use distlock_core::backend::{MAX_NOTE_LEN, check_note};
/// assert!(check_note("ran").is_ok());
/// assert!(check_note(&"x".repeat(MAX_NOTE_LEN + 1)).is_err());
/// ```
pub fn check_note(value: &str) -> Result<()> {
    match value.len() > MAX_NOTE_LEN {
        true => Err(Error::invalid(format!(
            "a note of {} bytes is longer than the {MAX_NOTE_LEN} a store keeps",
            value.len()
        ))),
        false => Ok(()),
    }
}
