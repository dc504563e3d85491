//! The lifetime of fencing counters: every backend keeps one counter row per lock name, so
//! a service locking `orders/<id>` would grow the table by a row per order, for ever. A
//! counter never falls below the clock in microseconds at its last grant, so a counter
//! below the clock less `fence_ttl` has been idle at least that long. Such rows are deleted
//! on a task of each client's own ([`Sweeper`]) — by one client of a database a period, the
//! one that claims the period's sweep first — and a later grant seeds the name's counter
//! again from the clock, above every token it gave.
//!
//! The same sweep deletes lease-table rows whose lease or waiting place ended [`ABANDONED`]
//! ago: a name locked again purges its own expired rows first,
//! but the rows of a name nobody locks again (a holder that died, a waiter that gave up)
//! would otherwise stay.
//!
//! Counters below [`FLOORED`] were written by a distlock that counted from 1 (PostgreSQL's
//! lease mode and SQLite before counters took the clock's floor): they are kept, since a
//! client of that version would seed a deleted one at 1 again.
//!
//! `Client::forget` deletes the counters of the names a program is done with by the same
//! rule, where idle [`MIN_FENCE_TTL`] or more ([`forget`]).
//!
//! What is swept and forgotten, and how, is each dialect's SQL: its [`Upkeep`], in its own
//! `upkeep.rs`. When and under which bounds is this module's.

use std::future::Future;
use std::time::Duration;

use distlock_core::Result;
use distlock_core::backend::MIN_FENCE_TTL;
use tokio::task::AbortHandle;

use crate::tasks::{WriteGate, detached};

/// A dialect's statements for the upkeep of its tables: its sweep row, one batch of idle
/// counters and long-ended rows deleted, and the idle counters of names a program forgets.
/// It holds what they run on (a pool; SQLite's lease clock too) and is cloned into each
/// statement's task.
pub(crate) trait Upkeep: Clone + Send + Sync + 'static {
    /// The backend's name, for logs and errors.
    const BACKEND: &'static str;

    /// Writes `mark` in the database's sweep row, for sweeps every `every` (see
    /// [`SweepMark::bounds`]); whether it changed the row (for a claim: whether this client
    /// got the sweep).
    fn mark(
        self,
        every: Duration,
        mark: SweepMark,
    ) -> impl Future<Output = sqlx::Result<bool>> + Send;

    /// Deletes up to [`SWEEP_LIMIT`] counters idle past `fence_ttl` (none below
    /// [`FLOORED`]), and as many rows of each of [`ENDING_ROWS`] that ended [`ABANDONED`]
    /// ago; the most one statement deleted.
    fn sweep(self, fence_ttl: Duration) -> impl Future<Output = sqlx::Result<u64>> + Send;

    /// Deletes the counters of `names` idle [`MIN_FENCE_TTL`] or more (none below
    /// [`FLOORED`]); how many went.
    fn forget(self, names: Vec<String>) -> impl Future<Output = Result<usize>> + Send;
}

/// `Client::forget` on a dialect: `upkeep`'s statements on a task of their own (a caller
/// that gives up leaves them to end), passing the client's write gate.
pub(crate) async fn forget<U: Upkeep>(
    upkeep: &U,
    writes: &WriteGate,
    names: &[&str],
) -> Result<usize> {
    let names = names.iter().map(|&name| name.to_owned()).collect();
    detached(U::BACKEND, writes.pass(upkeep.clone().forget(names))).await
}

/// [`MIN_FENCE_TTL`] in microseconds: how long a counter [`forget`] deletes was idle.
pub(crate) fn forget_idle_us() -> i64 {
    ttl_us(MIN_FENCE_TTL)
}

/// The most rows one statement of a sweep deletes.
pub(crate) const SWEEP_LIMIT: i64 = 10_000;

/// How long after its end a grant's or a waiter's row is swept: long past any decision
/// that could read it (a name's own purge deletes it at its end), and past the moment its
/// client turned the guard `Lost`.
const ABANDONED: Duration = Duration::from_secs(60);

/// [`ABANDONED`] in milliseconds.
pub(crate) fn abandoned_ms() -> i64 {
    ABANDONED.as_millis() as i64
}

/// The lease-table tables whose rows end (`expires_at_ms`).
pub(crate) const ENDING_ROWS: [&str; 2] = ["distlock_lease", "distlock_waiter"];

/// The smallest counter that took the clock's floor: the clock in microseconds in 2001.
pub(crate) const FLOORED: i64 = 1_000_000_000_000_000;

/// The table that says when a database's idle counters were last swept (one row), in SQL
/// every dialect takes. PostgreSQL and MySQL make it apart from their other tables: a
/// database whose other tables an older distlock made may be used by a user who cannot
/// create it (each client then sweeps by itself, as before it).
pub(crate) const SWEEP_TABLE: [&str; 2] = [
    "CREATE TABLE IF NOT EXISTS distlock_sweep (id INTEGER PRIMARY KEY, last_us BIGINT NOT NULL)",
    "INSERT INTO distlock_sweep (id, last_us)
     SELECT 1, 0 FROM (SELECT COUNT(*) AS n FROM distlock_sweep) AS existing WHERE n = 0",
];

/// How often a database is swept, at most (see [`sweep_every`]).
const SWEEP_EVERY: Duration = Duration::from_secs(3600);

/// The most batches of [`SWEEP_LIMIT`] one sweep deletes.
const MAX_BATCHES: usize = 100;

/// How long one batch may take before the sweep is given up until the next.
const BATCH_TIMEOUT: Duration = Duration::from_secs(30);

/// `fence_ttl` in microseconds, for SQL that subtracts it from the database's clock.
pub(crate) fn ttl_us(fence_ttl: Duration) -> i64 {
    i64::try_from(fence_ttl.as_micros()).unwrap_or(i64::MAX)
}

/// How often a client looks whether the database's sweep is due: an hour, or the
/// `fence_ttl` if shorter (no counter turns idle sooner).
pub(crate) fn sweep_every(fence_ttl: Duration) -> Duration {
    SWEEP_EVERY.min(fence_ttl)
}

/// How long a claimed sweep keeps others from claiming it before it is done: a client that
/// claimed it and ended (a `distlock run` that was over at once) holds it up no longer.
const CLAIM_LEASE: Duration = Duration::from_secs(60);

/// What a client writes in a database's sweep row.
#[derive(Debug, Clone, Copy)]
pub(crate) enum SweepMark {
    /// The sweep is due and this client takes it, for [`CLAIM_LEASE`] at most.
    Claim,
    /// The sweep this client took is done.
    Done,
}

impl SweepMark {
    /// The bounds of the row's update, in microseconds, for a database swept every
    /// `every`: where the last sweep is older than the first (or as far ahead of the clock:
    /// a clock set back), it is set to the clock less the second.
    pub(crate) fn bounds(self, every: Duration) -> (i64, i64) {
        let every_us = ttl_us(every);
        match self {
            SweepMark::Claim => (
                every_us,
                every_us.saturating_sub(ttl_us(CLAIM_LEASE.min(every))),
            ),
            // Any row: its last sweep is older than a time after the clock.
            SweepMark::Done => (-(1 << 62), 0),
        }
    }
}

/// The task that deletes idle counters: as the client connects, then every
/// [`sweep_every`], it claims the database's sweep if it is due (a client that starts and
/// ends within the hour, like every `distlock run`, costs one cheap update, not a scan),
/// and, if it got it, deletes in batches until one deletes fewer than [`SWEEP_LIMIT`], then
/// marks it done. A failure (a user without `DELETE`, a server that refuses the statement,
/// a lock wait past [`BATCH_TIMEOUT`]) is logged and tried again at the next look: the
/// client works on without it. Dropping it stops the task.
#[derive(Debug)]
pub(crate) struct Sweeper(AbortHandle);

impl Sweeper {
    /// Starts sweeping the database of `upkeep` for counters idle past `fence_ttl`, each
    /// statement passing the client's write gate `writes` where one is given (SQLite: a
    /// process stopped in the middle of a statement holds the database's write lock; a
    /// server finishes a statement whether or not its client is stopped).
    pub(crate) fn start<U: Upkeep>(
        upkeep: U,
        writes: Option<&WriteGate>,
        fence_ttl: Duration,
    ) -> Sweeper {
        let every = sweep_every(fence_ttl);
        let statements = Statements {
            backend: U::BACKEND,
            writes: writes.cloned(),
        };
        let task = tokio::spawn(async move {
            loop {
                // A claim that fails (a database without the sweep table) sweeps anyway.
                let claim = upkeep.clone().mark(every, SweepMark::Claim);
                let claimed = statements.run("claim", claim).await;
                if claimed != Some(false) && sweep(&statements, &upkeep, fence_ttl).await {
                    let done = upkeep.clone().mark(every, SweepMark::Done);
                    statements.run("mark", done).await;
                }
                tokio::time::sleep(every).await;
            }
        });
        Sweeper(task.abort_handle())
    }
}

/// Deletes idle counters with `upkeep`'s batches until one deletes fewer than
/// [`SWEEP_LIMIT`]; whether it got there.
async fn sweep<U: Upkeep>(statements: &Statements, upkeep: &U, fence_ttl: Duration) -> bool {
    for _ in 0..MAX_BATCHES {
        match statements
            .run("delete", upkeep.clone().sweep(fence_ttl))
            .await
        {
            Some(deleted) if deleted >= SWEEP_LIMIT as u64 => continue,
            Some(_) => return true,
            None => return false,
        }
    }
    false
}

/// How a sweep runs its statements: the backend's name, for its logs, and the client's
/// write gate, where its statements must pass it.
struct Statements {
    backend: &'static str,
    writes: Option<WriteGate>,
}

impl Statements {
    /// Runs one statement of the sweep on a task of its own, which holds the write gate
    /// (waited for first) until the statement ends; waits for it at most
    /// [`BATCH_TIMEOUT`]. `None` (logged) if it failed or took longer: it then ends on its
    /// own (the driver runs a statement it started to its end anyway).
    async fn run<T: Send + 'static>(
        &self,
        what: &'static str,
        statement: impl Future<Output = sqlx::Result<T>> + Send + 'static,
    ) -> Option<T> {
        let backend = self.backend;
        let hold = match &self.writes {
            Some(writes) => Some(writes.hold().await),
            None => None,
        };
        let running = tokio::spawn(async move {
            let _writing = hold;
            statement.await
        });
        let failed = |err: &dyn std::fmt::Display| {
            tracing::warn!(backend, error = %err, "could not {what} idle fencing counters; trying again later");
            None
        };
        match tokio::time::timeout(BATCH_TIMEOUT, running).await {
            Ok(Ok(Ok(done))) => Some(done),
            Ok(Ok(Err(err))) => failed(&err),
            Ok(Err(err)) => failed(&err),
            Err(_) => {
                tracing::warn!(
                    backend,
                    "a statement to {what} idle fencing counters took over {BATCH_TIMEOUT:?}; trying again later"
                );
                None
            }
        }
    }
}

impl Drop for Sweeper {
    fn drop(&mut self) {
        self.0.abort();
    }
}
