//! Fake wall clocks, for clock faults: each worker (and each RedLock master a run starts)
//! runs under libfaketime (Debian's `faketime`), its wall-clock offset read from a file of
//! its own at every reading, so the coordinator can jump it and bring it back. The
//! monotonic clock is left alone: the history's timestamps and distlock's deadlines stay
//! true.

use std::path::{Path, PathBuf};

use distlock::{Error, Result};
use tokio::process::Command;

/// Where Debian installs libfaketime, under `/usr/lib/<target triple>/`.
const LIBRARY: &str = "faketime/libfaketime.so.1";

/// Where Debian installs glibc's malloc-debugging shim, under `/lib/<target triple>/`.
const GLIBC_MALLOC: &str = "libc_malloc_debug.so.0";

/// `file` in the first of the machine's library directories (`/usr/lib/<triple>/`,
/// `/lib/<triple>/`, then `/usr/lib`) that has it.
fn library(file: &str) -> Option<PathBuf> {
    ["/usr/lib", "/lib"]
        .iter()
        .flat_map(|top| std::fs::read_dir(top).into_iter().flatten().flatten())
        .map(|entry| entry.path().join(file))
        .chain([Path::new("/usr/lib").join(file)])
        .find(|path| path.is_file())
}

/// libfaketime's path, or why there is none.
fn libfaketime() -> Result<PathBuf> {
    library(LIBRARY).ok_or_else(|| {
        Error::invalid(
            "clock faults run processes under libfaketime, which is not installed: \
             apt-get install faketime",
        )
    })
}

/// The environment that runs a `redis-server` under a wall clock read, at every reading,
/// from the file `clock` in its directory (`+<seconds>`, written there before it starts).
/// Debian's `redis-server` allocates with jemalloc, which reads the clock while libfaketime
/// starts and hangs it (libfaketime's own issue 130): glibc's malloc shim, preloaded first,
/// gives the server glibc's allocator, and libfaketime starts.
pub fn faked_server_clock() -> Result<Vec<(&'static str, String)>> {
    let faketime = libfaketime()?;
    let malloc = library(GLIBC_MALLOC).ok_or_else(|| {
        Error::invalid(format!(
            "a RedLock master runs under libfaketime with glibc's allocator, whose {GLIBC_MALLOC} \
             is not on this machine"
        ))
    })?;
    Ok(vec![
        (
            "LD_PRELOAD",
            format!("{} {}", malloc.display(), faketime.display()),
        ),
        ("FAKETIME_TIMESTAMP_FILE", "{dir}/clock".to_owned()),
        ("FAKETIME_NO_CACHE", "1".to_owned()),
        ("FAKETIME_DONT_FAKE_MONOTONIC", "1".to_owned()),
    ])
}

/// The workers' fake clocks.
pub struct Clocks {
    library: PathBuf,
    dir: PathBuf,
}

impl Clocks {
    /// Finds libfaketime; the offset files go in `dir`.
    pub fn find(dir: &Path) -> Result<Clocks> {
        Ok(Clocks {
            library: libfaketime()?,
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
