//! Writing a history: the torture run's [`distlock_check::Recorder`], whose writes cannot
//! fail quietly: a history that cannot be written makes the run worthless.

use std::path::Path;

use crate::output::errln;
use distlock::{Error, Result};
use distlock_check::history::What;

/// The history file, as one process appends to it.
#[derive(Debug)]
pub struct Recorder(distlock_check::Recorder);

impl Recorder {
    /// Starts the history file at `path`, empty (a history of an earlier run would be
    /// judged with this one); the run checked it is a file it can write.
    pub fn create(path: &Path) -> Result<Recorder> {
        distlock_check::Recorder::create(path)
            .map(Recorder)
            .map_err(|e| cannot_write(path, e))
    }

    /// Opens the history file at `path` for appending.
    pub fn open(path: &Path) -> Result<Recorder> {
        distlock_check::Recorder::open(path)
            .map(Recorder)
            .map_err(|e| cannot_write(path, e))
    }

    /// Records that `what` happened to `worker` now. A history that cannot be written
    /// makes the run worthless, so that ends the process.
    pub fn record(&self, worker: u32, what: What) {
        written(self.0.record(worker, what));
    }

    /// Records that `what` happened to `worker` at `at`, on the shared clock.
    pub fn record_at(&self, worker: u32, at: u64, what: What) {
        written(self.0.record_at(worker, at, what));
    }
}

/// Ends the process if a write of the history failed.
fn written(outcome: std::io::Result<()>) {
    if let Err(err) = outcome {
        errln!("distlock torture: cannot write the history: {err}");
        std::process::exit(i32::from(crate::exit::SOFTWARE));
    }
}

fn cannot_write(path: &Path, err: std::io::Error) -> Error {
    Error::invalid(format!(
        "cannot write the history {}: {err}",
        path.display()
    ))
}
