//! Writing a history: each event one line appended to the history file with one write, so
//! lines of several processes never mix and a killed process loses nothing it recorded.

use std::fs::File;
use std::io::{self, Write};
use std::path::Path;
use std::sync::Mutex;

use crate::history::{Event, What, monotonic_ns};

/// A history file, as one process appends to it; every process of a run opens the same
/// file, and events of all of them land whole, stamped from the clock they share.
///
/// # Examples
///
/// ```
/// use distlock_check::Recorder;
/// use distlock_check::history::{What, parse};
///
/// let dir = tempfile::tempdir()?;
/// let path = dir.path().join("history.jsonl");
/// let recorder = Recorder::create(&path)?;
/// recorder.record(1, What::Acquire)?;
/// recorder.record(1, What::Granted { token: 7, safe_until: u64::MAX })?;
/// let events = parse(&std::fs::read_to_string(&path)?).map_err(std::io::Error::other)?;
/// assert_eq!(events.len(), 2);
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug)]
pub struct Recorder {
    file: Mutex<File>,
}

impl Recorder {
    /// Starts the history file at `path`, empty: a history of an earlier run would be
    /// judged with this one.
    ///
    /// # Examples
    ///
    /// See [`Recorder`].
    pub fn create(path: &Path) -> io::Result<Recorder> {
        File::create(path)?;
        Recorder::open(path)
    }

    /// Opens the history file at `path` for appending (in a worker process of a run whose
    /// coordinator created it).
    ///
    /// # Examples
    ///
    /// ```
    /// let dir = tempfile::tempdir()?;
    /// let path = dir.path().join("history.jsonl");
    /// distlock_check::Recorder::create(&path)?;
    /// let worker = distlock_check::Recorder::open(&path)?;
    /// worker.record(2, distlock_check::history::What::Enter)?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn open(path: &Path) -> io::Result<Recorder> {
        let file = File::options().append(true).open(path)?;
        Ok(Recorder {
            file: Mutex::new(file),
        })
    }

    /// Records that `what` happened to `worker` now, on the shared clock.
    ///
    /// # Examples
    ///
    /// See [`Recorder`].
    pub fn record(&self, worker: u32, what: What) -> io::Result<()> {
        self.record_at(worker, monotonic_ns(), what)
    }

    /// Records that `what` happened to `worker` at `at`, on the shared clock
    /// ([`monotonic_ns`], or [`instant_ns`](crate::history::instant_ns) of an `Instant`).
    ///
    /// # Examples
    ///
    /// ```
    /// use distlock_check::history::{What, monotonic_ns};
    /// let dir = tempfile::tempdir()?;
    /// let recorder = distlock_check::Recorder::create(&dir.path().join("h.jsonl"))?;
    /// recorder.record_at(3, monotonic_ns(), What::Exit)?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn record_at(&self, worker: u32, at: u64, what: What) -> io::Result<()> {
        let event = Event { at, worker, what };
        let mut line = serde_json::to_string(&event).map_err(io::Error::other)?;
        line.push('\n');
        let mut file = self.file.lock().unwrap_or_else(|p| p.into_inner());
        file.write_all(line.as_bytes())
    }
}
