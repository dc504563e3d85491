//! Session mode's sentinel: one connection per client that waits in a server-side sleep,
//! so that the client learns within milliseconds that its database server went away. A
//! server that restarts (or crashes) forgets every session lock at once, and grants them
//! again as soon as it is back up, which takes it a fraction of a second; a holder that
//! learned of it only at its next renewal would go on working under a lock somebody else
//! already holds.
//!
//! The sentinel counts *generations*: even while it watches the server over a live
//! connection, odd from the moment that connection broke (or its task ended) until a new
//! one is made. A session lock records the generation in force before the statement that
//! granted it was sent, and is lost as soon as the generation moves on. Locks are only
//! asked for while the sentinel watches, on connections made in the same generation, so no
//! grant escapes it: one made on a server that restarted before the sentinel noticed is
//! counted lost too, which errs on the safe side.
//!
//! What it sees is a broken connection: a server process that ends, closing its sockets.
//! A server host that loses power, or a network that drops everything, breaks nothing the
//! client can see; the sentinel then notices within [`SLEEP_WITHIN`], and each lock's own
//! renewals within its TTL. A failover to another server (a virtual address or DNS name
//! moved) is such a case: the new primary holds none of the session locks from the start,
//! so session mode is not safe across a failover, as the crate docs say.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use distlock_core::{Error, ErrorKind, Result};
use tokio::sync::watch;
use tokio::task::AbortHandle;
use tokio::time::Instant;

use crate::session_dialect::SessionDialect;

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
/// How long one sleep statement (the dialect's, about ten seconds) may take before its
/// connection counts as broken: an answer that never comes is a connection that is gone
/// without a word (a server host down, a network dropping everything).
pub(crate) const SLEEP_WITHIN: Duration = Duration::from_secs(15);
/// A connection that broke sooner than this after it was made is not made again at once.
const SHORT_WATCH: Duration = Duration::from_secs(1);

/// A client's watch on its database server, started by the first session lock asked for
/// and stopped when the client's session store is dropped.
pub(crate) struct Sentinel {
    generation: watch::Sender<u64>,
    /// Why the sentinel's last connection attempt failed, for the error of an acquire that
    /// could not wait for it.
    last_error: Arc<Mutex<Option<String>>>,
    /// The task, started by the first session lock asked for, and again whenever it ended
    /// (its runtime shut down).
    task: Mutex<Option<AbortHandle>>,
}

impl Sentinel {
    /// A sentinel not yet started: generation 1, not watching.
    pub(crate) fn new() -> Sentinel {
        Sentinel {
            generation: watch::channel(1).0,
            last_error: Arc::default(),
            task: Mutex::default(),
        }
    }

    /// Starts the sentinel's task on `dialect`'s connections, if it is not running (not
    /// yet, or no longer: the runtime it ran on ended).
    fn start<D: SessionDialect>(&self, dialect: &Arc<D>) {
        let mut task = locked(&self.task);
        if task.as_ref().is_some_and(|t| !t.is_finished()) {
            return;
        }
        let watching = watch_server(
            dialect.clone(),
            self.generation.clone(),
            self.last_error.clone(),
        );
        *task = Some(tokio::spawn(watching).abort_handle());
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
                let why = match locked(&self.last_error).as_ref() {
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
        if let Some(task) = locked(&self.task).as_ref() {
            task.abort();
        }
    }
}

fn locked<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

/// Moves the generation on to odd when the sentinel's watch ends, however it ends: its
/// connection broke, or its task was dropped (its runtime shut down), after which nothing
/// watches the server until it is started again.
struct Watching<'a>(&'a watch::Sender<u64>);

impl Drop for Watching<'_> {
    fn drop(&mut self) {
        self.0.send_modify(|g| {
            if watching(*g) {
                *g += 1;
            }
        });
    }
}

/// Whether the sentinel watches the server in `generation`.
fn watching(generation: u64) -> bool {
    generation.is_multiple_of(2)
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
        let mut conn = match dialect.connect_sentinel().await {
            Ok(conn) => conn,
            Err(err) => {
                tracing::debug!(backend = D::BACKEND, error = %err, "the connection that watches the database server cannot be made; trying again");
                *locked(&last_error) = Some(err.to_string());
                tokio::time::sleep(retry).await;
                retry = (retry * 2).min(LAST_RETRY);
                continue;
            }
        };
        *locked(&last_error) = None;
        generation.send_modify(|g| *g += 1);
        let started = Instant::now();
        let why = {
            let _watching = Watching(&generation);
            watch_until_gone(&*dialect, &mut conn).await
        };
        tracing::warn!(
            backend = D::BACKEND,
            error = %why,
            "the connection that watches the database server broke; every session lock this client held is counted lost"
        );
        drop(conn);
        // A connection that breaks at once (a proxy that drops it after the login, say) is
        // not made again in a tight loop.
        match started.elapsed() < SHORT_WATCH {
            true => {
                tokio::time::sleep(retry).await;
                retry = (retry * 2).min(LAST_RETRY);
            }
            false => retry = FIRST_RETRY,
        }
    }
}

/// Sleeps on the server over `conn` until the connection breaks; what broke it (or that a
/// sleep or ping went unanswered past [`SLEEP_WITHIN`]).
async fn watch_until_gone<D: SessionDialect>(dialect: &D, conn: &mut D::Conn) -> String {
    loop {
        let err = match tokio::time::timeout(SLEEP_WITHIN, dialect.sleep(conn)).await {
            Ok(Ok(())) => continue,
            Ok(Err(err)) => err,
            Err(_) => return format!("no answer within {SLEEP_WITHIN:?}"),
        };
        if !matches!(err, sqlx::Error::Database(_)) {
            return err.to_string();
        }
        // The server refused the statement and answered: the connection may be whole.
        match tokio::time::timeout(SLEEP_WITHIN, dialect.ping(conn)).await {
            Ok(Ok(())) => {}
            Ok(Err(gone)) => return gone.to_string(),
            Err(_) => return format!("no answer within {SLEEP_WITHIN:?}"),
        }
        tokio::time::sleep(AFTER_STATEMENT_ERROR).await;
    }
}
