//! The lock directory: `locks.json` read and rewritten under an exclusive `flock(2)` on
//! `.store`, one operation at a time across every process and thread of the machine.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{ErrorKind as IoErrorKind, Write};
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use distlock::backend::{
    Error, ErrorKind, HolderInfo, HolderMeta, LockKind, LockRequest, Result, WaiterInfo,
};
use serde::{Deserialize, Serialize};

/// The longest an operation waits for the directory's lock.
const LOCK_WAIT: Duration = Duration::from_secs(5);

/// Every lock of the directory, by name.
pub(crate) type Locks = BTreeMap<String, Lock>;

/// One lock name: its fencing counter, and its holder while there is one.
#[derive(Debug, Default, Serialize, Deserialize)]
pub(crate) struct Lock {
    /// The last fencing token granted for the name.
    pub(crate) fence: u64,
    /// The grant, until it is released, broken, or taken over once its lease ended.
    pub(crate) holder: Option<Holder>,
    /// Who waits for it, for `distlock status`: each entry kept while its waiter polls.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) waiters: Vec<Waiter>,
}

impl Lock {
    /// Notes that `request` waits, until `kept_until_ms` unless it polls again.
    pub(crate) fn wait(&mut self, request: &LockRequest, now_ms: u64, kept_until_ms: u64) {
        self.waiters.retain(|waiter| waiter.kept_until_ms > now_ms);
        match self.waiters.iter_mut().find(|w| w.token == request.token) {
            Some(waiter) => waiter.kept_until_ms = kept_until_ms,
            None => {
                let mut meta = request.meta.clone();
                meta.acquired_at_unix_ms = now_ms;
                self.waiters.push(Waiter {
                    token: request.token.clone(),
                    owner: request.owner.as_str().to_owned(),
                    kept_until_ms,
                    meta,
                });
            }
        }
    }

    /// Forgets the waiter entry of request `token`.
    pub(crate) fn stop_waiting(&mut self, token: &str) {
        self.waiters.retain(|waiter| waiter.token != token);
    }

    /// The waiters whose entries are kept at `now_ms`, as `distlock status` shows them.
    pub(crate) fn waiting(&self, now_ms: u64) -> Vec<WaiterInfo> {
        self.waiters
            .iter()
            .filter(|waiter| waiter.kept_until_ms > now_ms)
            .map(|waiter| {
                let mut info = WaiterInfo::new(waiter.owner.clone(), LockKind::Mutex);
                info.meta = waiter.meta.clone();
                info
            })
            .collect()
    }
}

/// A request waiting for a lock.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Waiter {
    /// The request token.
    token: String,
    /// Who waits.
    owner: String,
    /// Until when the entry is kept unless its waiter polls again.
    kept_until_ms: u64,
    /// The waiter's host, process and time it began to wait.
    meta: HolderMeta,
}

/// A grant as the file keeps it.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Holder {
    /// The request token the grant is stored under.
    pub(crate) token: String,
    /// Who holds it.
    pub(crate) owner: String,
    /// Its fencing token.
    pub(crate) fencing_token: u64,
    /// When its lease ends, in milliseconds since the Unix epoch.
    pub(crate) expires_at_ms: u64,
    /// The holder's host, process and time of grant.
    pub(crate) meta: HolderMeta,
}

impl Holder {
    /// The grant of `request` with `fencing_token`, its lease running from `now_ms`.
    pub(crate) fn of(request: &LockRequest, fencing_token: u64, now_ms: u64) -> Self {
        let ttl_ms = u64::try_from(request.ttl.as_millis()).unwrap_or(u64::MAX);
        Holder {
            token: request.token.clone(),
            owner: request.owner.as_str().to_owned(),
            fencing_token,
            expires_at_ms: now_ms.saturating_add(ttl_ms),
            meta: request.meta.clone(),
        }
    }

    /// The grant as `distlock status` shows it at `now_ms`.
    pub(crate) fn info(&self, now_ms: u64) -> HolderInfo {
        let mut info = HolderInfo::new(self.owner.clone(), LockKind::Mutex, self.fencing_token);
        info.remaining_ms = Some(self.expires_at_ms.saturating_sub(now_ms));
        info.meta = self.meta.clone();
        info
    }
}

/// The lock directory.
#[derive(Debug)]
pub(crate) struct Store {
    dir: PathBuf,
}

impl Store {
    /// Opens `dir`, creating it (and its `.store` file) if need be. A directory that cannot
    /// be made or opened (a path under a file, a place this process may not write) is bad
    /// input: nothing will change that but another path or other rights.
    pub(crate) fn open(dir: PathBuf) -> Result<Self> {
        let unusable = |err: Error| Error::invalid(err.message().to_owned());
        std::fs::create_dir_all(&dir).map_err(|err| unusable(failed(&dir, "create", &err)))?;
        let store = Store { dir };
        store.open_guard().map_err(unusable)?;
        Ok(store)
    }

    /// Runs `change` on the locks, with the time in milliseconds since the Unix epoch,
    /// under the directory's exclusive lock, and writes them back if it changed them.
    pub(crate) fn change<T>(&self, change: impl FnOnce(&mut Locks, u64) -> T) -> Result<T> {
        // A file description of its own: flock excludes other descriptions, even this
        // process's other threads, and is let go when it closes, even if this thread dies.
        let guard = self.open_guard()?;
        self.lock(&guard)?;
        let path = self.dir.join("locks.json");
        let before = match std::fs::read(&path) {
            Ok(bytes) => bytes,
            Err(err) if err.kind() == IoErrorKind::NotFound => Vec::new(),
            Err(err) => return Err(failed(&path, "read", &err)),
        };
        let mut locks: Locks = match before.is_empty() {
            true => Locks::new(),
            false => serde_json::from_slice(&before).map_err(|err| {
                Error::new(
                    ErrorKind::Backend,
                    format!("{} is not a lock file: {err}", path.display()),
                )
            })?,
        };
        let answer = change(&mut locks, now_ms());
        let after = serde_json::to_vec(&locks)
            .map_err(|err| Error::new(ErrorKind::Backend, err.to_string()))?;
        if after != before {
            // A whole new file renamed over the old: a process killed while writing leaves
            // the last state whole.
            let staged = self.dir.join(format!("locks.json.{}", std::process::id()));
            let mut file = File::create(&staged).map_err(|err| failed(&staged, "create", &err))?;
            file.write_all(&after)
                .map_err(|err| failed(&staged, "write", &err))?;
            std::fs::rename(&staged, &path).map_err(|err| failed(&path, "replace", &err))?;
        }
        drop(guard);
        Ok(answer)
    }

    /// Takes the exclusive lock of `guard`, waiting at most [`LOCK_WAIT`]: a process
    /// stopped (SIGSTOP) inside an operation keeps it until it runs again, and callers are
    /// told so instead of waiting for ever.
    fn lock(&self, guard: &File) -> Result<()> {
        let started = Instant::now();
        loop {
            // SAFETY: flock on a descriptor the caller owns; it touches no memory.
            if unsafe { libc::flock(guard.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
                return Ok(());
            }
            let err = std::io::Error::last_os_error();
            if err.kind() != IoErrorKind::WouldBlock {
                return Err(failed(&self.guard_path(), "lock", &err));
            }
            if started.elapsed() >= LOCK_WAIT {
                return Err(Error::new(
                    ErrorKind::Unavailable,
                    format!(
                        "{} stayed locked for {LOCK_WAIT:?}: a process stopped in the middle of an operation holds it",
                        self.guard_path().display()
                    ),
                )
                .temporary());
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    fn guard_path(&self) -> PathBuf {
        self.dir.join(".store")
    }

    fn open_guard(&self) -> Result<File> {
        let path = self.guard_path();
        OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|err| failed(&path, "open", &err))
    }
}

/// The time in milliseconds since the Unix epoch.
fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| {
            u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
        })
}

/// An error saying what could not be done to which file.
fn failed(path: &std::path::Path, what: &str, err: &std::io::Error) -> Error {
    Error::new(
        ErrorKind::Backend,
        format!("cannot {what} {}: {err}", path.display()),
    )
}
