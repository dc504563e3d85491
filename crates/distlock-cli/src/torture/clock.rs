//! The workers' wall clocks, for clock faults: each worker runs under libfaketime (Debian's
//! `faketime`), its wall-clock offset read from a file of its own in the run's directory
//! at every reading, so the coordinator can jump it and bring it back. The monotonic
//! clock is left alone: the history's timestamps and distlock's deadlines stay true.

use std::path::{Path, PathBuf};

use distlock::{Error, Result};
use tokio::process::Command;

/// Where Debian installs libfaketime, under `/usr/lib/<target triple>/`.
const LIBRARY: &str = "faketime/libfaketime.so.1";

/// The workers' fake clocks.
pub struct Clocks {
    library: PathBuf,
    dir: PathBuf,
}

impl Clocks {
    /// Finds libfaketime; the offset files go in `dir`.
    pub fn find(dir: &Path) -> Result<Clocks> {
        let library = std::fs::read_dir("/usr/lib")
            .into_iter()
            .flatten()
            .flatten()
            .map(|entry| entry.path().join(LIBRARY))
            .chain([Path::new("/usr/lib").join(LIBRARY)])
            .find(|path| path.is_file())
            .ok_or_else(|| {
                Error::invalid(
                    "clock faults run workers under libfaketime, which is not installed: \
                     apt-get install faketime",
                )
            })?;
        Ok(Clocks {
            library,
            dir: dir.to_owned(),
        })
    }

    fn file(&self, worker: u32) -> PathBuf {
        self.dir.join(format!("clock-{worker}"))
    }

    /// Has `command`, worker `worker`, run under its fake clock, set right for now.
    pub fn prepare(&self, command: &mut Command, worker: u32) -> Result<()> {
        self.set(worker, 0)?;
        command
            .env("LD_PRELOAD", &self.library)
            .env("FAKETIME_TIMESTAMP_FILE", self.file(worker))
            .env("FAKETIME_NO_CACHE", "1")
            .env("FAKETIME_DONT_FAKE_MONOTONIC", "1");
        Ok(())
    }

    /// Sets worker `worker`'s wall clock `seconds` ahead of the machine's (0: right).
    pub fn set(&self, worker: u32, seconds: u64) -> Result<()> {
        let path = self.file(worker);
        std::fs::write(&path, format!("+{seconds}\n")).map_err(|e| {
            Error::invalid(format!(
                "cannot write the clock file {}: {e}",
                path.display()
            ))
        })
    }
}
