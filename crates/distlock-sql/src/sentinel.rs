//! Session mode's sentinel: one connection per client that waits in a long server-side
//! sleep, so that the client learns within milliseconds that its database server went
//! away. A server that restarts (or crashes, or fails over) forgets every session lock at
//! once, and grants them again as soon as it is back up, which takes it a fraction of a
//! second; a holder that learned of it only at its next renewal would go on working under
//! a lock somebody else already holds.
//!
//! The sentinel counts *generations*: even while it watches the server over a live
//! connection, odd from the moment that connection broke until a new one is made. A
//! session lock records the generation in force before the statement that granted it was
//! sent, and is lost as soon as the generation moves on. Locks are only asked for while
//! the sentinel watches, so no grant escapes it: one made on a server that restarted
//! before the sentinel noticed is counted lost too, which errs on the safe side.

use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use distlock_core::{Error, ErrorKind, Result};
use tokio::sync::watch;
use tokio::task::AbortHandle;

use crate::sessions::SessionDialect;

/// How long an acquire waits for the sentinel to watch the server before it fails with a
/// temporary error (which the core retries within the acquire's deadline).
const WATCH_WITHIN: Duration = Duration::from_secs(5);
/// The first pause before the sentinel connects again after a failed connection; it
/// doubles up to [`LAST_RETRY`].
const FIRST_RETRY: Duration = Duration::from_millis(20);
/// The longest pause between the sentinel's connection attempts.
const LAST_RETRY: Duration = Duration::from_secs(1);
/// The pause after a sleep statement that failed on a connection that still answers (a
/// statement time limit of the server's, say).
const AFTER_STATEMENT_ERROR: Duration = Duration::from_millis(100);

/// A client's watch on its database server, started by the first session lock asked for
/// and stopped when the client's session store is dropped.
pub(crate) struct Sentinel {
    generation: watch::Sender<u64>,
    /// Why the sentinel's last connection attempt failed, for the error of an acquire that
    /// could not wait for it.
    last_error: Arc<Mutex<Option<String>>>,
    task: OnceLock<AbortHandle>,
}

impl Sentinel {
    /// A sentinel not yet started: generation 1, not watching.
    pub(crate) fn new() -> Sentinel {
        Sentinel {
            generation: watch::channel(1).0,
            last_error: Arc::default(),
            task: OnceLock::new(),
        }
    }

    /// Starts the sentinel's task, if it is not running yet, on `dialect`'s connections.
    pub(crate) fn start<D: SessionDialect>(&self, dialect: &Arc<D>) {
        self.task.get_or_init(|| {
            let watching = watch_server(
                dialect.clone(),
                self.generation.clone(),
                self.last_error.clone(),
            );
            tokio::spawn(watching).abort_handle()
        });
    }

    /// The generation a grant about to be asked for records: at once while the sentinel
    /// watches the server; otherwise after waiting, at most [`WATCH_WITHIN`], for it to
    /// watch again (starting it if need be).
    pub(crate) async fn ready<D: SessionDialect>(&self, dialect: &Arc<D>) -> Result<u64> {
        let now = self.current();
        if watching(now) {
            return Ok(now);
        }
        self.start(dialect);
        let mut generation = self.generation.subscribe();
        match tokio::time::timeout(WATCH_WITHIN, generation.wait_for(|g| watching(*g))).await {
            Ok(Ok(now)) => Ok(*now),
            _ => {
                let why = match self
                    .last_error
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .as_ref()
                {
                    Some(err) => format!(": {err}"),
                    None => String::new(),
                };
                Err(Error::new(
                    ErrorKind::Unavailable,
                    format!(
                        "no connection watches the server for restarts within {WATCH_WITHIN:?}, so no session lock is asked for{why}"
                    ),
                )
                .with_backend(D::BACKEND)
                .temporary())
            }
        }
    }

    /// The generation now.
    pub(crate) fn current(&self) -> u64 {
        *self.generation.borrow()
    }

    /// A channel that changes with every generation, for the core's news of lost grants.
    pub(crate) fn subscribe(&self) -> watch::Receiver<u64> {
        self.generation.subscribe()
    }
}

impl Drop for Sentinel {
    fn drop(&mut self) {
        if let Some(task) = self.task.get() {
            task.abort();
        }
    }
}

/// Whether the sentinel watches the server in `generation`.
fn watching(generation: u64) -> bool {
    generation % 2 == 0
}

/// The sentinel's task: connects, watches until the connection breaks, and again, for as
/// long as it runs.
async fn watch_server<D: SessionDialect>(
    dialect: Arc<D>,
    generation: watch::Sender<u64>,
    last_error: Arc<Mutex<Option<String>>>,
) {
    let mut retry = FIRST_RETRY;
    loop {
        let mut conn = match dialect.connect().await {
            Ok(conn) => conn,
            Err(err) => {
                *last_error.lock().unwrap_or_else(|p| p.into_inner()) = Some(err.to_string());
                tokio::time::sleep(retry).await;
                retry = (retry * 2).min(LAST_RETRY);
                continue;
            }
        };
        retry = FIRST_RETRY;
        generation.send_modify(|g| *g += 1);
        let why = watch_until_gone(&*dialect, &mut conn).await;
        generation.send_modify(|g| *g += 1);
        tracing::warn!(
            backend = D::BACKEND,
            error = %why,
            "the connection that watches the database server broke; every session lock this client held is counted lost"
        );
        drop(conn);
    }
}

/// Sleeps on the server over `conn` until the connection breaks; what broke it.
async fn watch_until_gone<D: SessionDialect>(dialect: &D, conn: &mut D::Conn) -> sqlx::Error {
    loop {
        let err = match dialect.sleep(conn).await {
            Ok(()) => continue,
            Err(err) => err,
        };
        if !matches!(err, sqlx::Error::Database(_)) {
            return err;
        }
        // The server refused the statement and answered: the connection may be whole.
        if let Err(gone) = dialect.ping(conn).await {
            return gone;
        }
        tokio::time::sleep(AFTER_STATEMENT_ERROR).await;
    }
}
