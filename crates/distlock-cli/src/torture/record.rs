//! Writing a history: each event one line appended to the shared history file with one
//! write, so lines of several processes never mix and a killed process loses nothing it
//! recorded.

use std::fs::File;
use std::io::Write;
use std::path::Path;
use std::sync::Mutex;

use crate::output::errln;
use distlock::{Error, Result};
use distlock_cli::history::{Event, What, monotonic_ns};

/// The history file, as one process appends to it.
#[derive(Debug)]
pub struct Recorder {
    file: Mutex<File>,
}

impl Recorder {
    /// Starts the history file at `path`, empty (a history of an earlier run would be
    /// judged with this one); the run checked it is a file it can write.
    pub fn create(path: &Path) -> Result<Recorder> {
        File::create(path).map_err(|e| cannot_write(path, e))?;
        Recorder::open(path)
    }

    /// Opens the history file at `path` for appending.
    pub fn open(path: &Path) -> Result<Recorder> {
        let file = File::options()
            .append(true)
            .open(path)
            .map_err(|e| cannot_write(path, e))?;
        Ok(Recorder {
            file: Mutex::new(file),
        })
    }

    /// Records that `what` happened to `worker` now. A history that cannot be written
    /// makes the run worthless, so that ends the process.
    pub fn record(&self, worker: u32, what: What) {
        self.record_at(worker, monotonic_ns(), what);
    }

    /// Records that `what` happened to `worker` at `at`, on the shared clock.
    pub fn record_at(&self, worker: u32, at: u64, what: What) {
        let event = Event { at, worker, what };
        let mut line = serde_json::to_string(&event).expect("an event is plain data");
        line.push('\n');
        let mut file = self.file.lock().unwrap_or_else(|p| p.into_inner());
        if let Err(err) = file.write_all(line.as_bytes()) {
            errln!("distlock torture: cannot write the history: {err}");
            std::process::exit(i32::from(crate::exit::SOFTWARE));
        }
    }
}

fn cannot_write(path: &Path, err: std::io::Error) -> Error {
    Error::invalid(format!(
        "cannot write the history {}: {err}",
        path.display()
    ))
}
