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

use std::future::Future;
use std::time::Duration;

use tokio::task::AbortHandle;

use crate::tasks::WriteGate;

/// The most rows one statement of a sweep deletes.
pub(crate) const SWEEP_LIMIT: i64 = 10_000;

/// How long after its end a grant's or a waiter's row is swept: long past any decision
/// that could read it (a name's own purge deletes it at its end), and past the moment its
/// client turned the guard `Lost`.
const ABANDONED: Duration = Duration::from_secs(60);

/// The lease-table tables whose rows end (`expires_at_ms`).
const ENDING_ROWS: [&str; 2] = ["distlock_lease", "distlock_waiter"];

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

/// Logs that the sweep table could not be made (see [`SWEEP_TABLE`]).
#[cfg(any(feature = "postgres", feature = "mysql"))]
pub(crate) fn sweep_table_refused(backend: &'static str, err: &sqlx::Error) {
    tracing::warn!(
        backend,
        error = %err,
        "cannot make the distlock_sweep table, so every client sweeps idle fencing counters by itself; someone allowed to can run: {}",
        SWEEP_TABLE.join("; ")
    );
}

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
    /// Starts sweeping every `every`, running each statement through `statements`: `mark`
    /// writes the sweep row and says whether it changed it (for a claim: whether this
    /// client got the sweep); `batch` deletes up to [`SWEEP_LIMIT`] idle counters and says
    /// how many went.
    fn start<M, MFut, F, Fut>(statements: Statements, every: Duration, mark: M, batch: F) -> Sweeper
    where
        M: Fn(SweepMark) -> MFut + Send + 'static,
        MFut: Future<Output = sqlx::Result<bool>> + Send + 'static,
        F: Fn() -> Fut + Send + Sync + 'static,
        Fut: Future<Output = sqlx::Result<u64>> + Send + 'static,
    {
        let task = tokio::spawn(async move {
            loop {
                // A claim that fails (a database without the sweep table) sweeps anyway.
                let claimed = statements.run("claim", mark(SweepMark::Claim)).await;
                if claimed != Some(false) && sweep(&statements, &batch).await {
                    statements.run("mark", mark(SweepMark::Done)).await;
                }
                tokio::time::sleep(every).await;
            }
        });
        Sweeper(task.abort_handle())
    }

    /// Starts sweeping `backend`'s database on `pool` for counters idle past `fence_ttl`,
    /// with the dialect's `mark` (its sweep row: see [`SweepMark`]) and `sweep` (one batch),
    /// each statement passing the client's write gate `writes` where one is given (SQLite:
    /// a process stopped in the middle of a statement holds the database's write lock; a
    /// server finishes a statement whether or not its client is stopped).
    pub(crate) fn for_pool<P, M, MFut, S, SFut>(
        backend: &'static str,
        pool: P,
        writes: Option<&WriteGate>,
        fence_ttl: Duration,
        mark: M,
        sweep: S,
    ) -> Sweeper
    where
        P: Clone + Send + Sync + 'static,
        M: Fn(P, Duration, SweepMark) -> MFut + Send + 'static,
        MFut: Future<Output = sqlx::Result<bool>> + Send + 'static,
        S: Fn(P, Duration) -> SFut + Send + Sync + 'static,
        SFut: Future<Output = sqlx::Result<u64>> + Send + 'static,
    {
        let every = sweep_every(fence_ttl);
        let marked = pool.clone();
        let statements = Statements {
            backend,
            writes: writes.cloned(),
        };
        Sweeper::start(
            statements,
            every,
            move |m| mark(marked.clone(), every, m),
            move || sweep(pool.clone(), fence_ttl),
        )
    }
}

/// Deletes idle counters with `batch` until one deletes fewer than [`SWEEP_LIMIT`];
/// whether it got there.
async fn sweep<F, Fut>(statements: &Statements, batch: &F) -> bool
where
    F: Fn() -> Fut,
    Fut: Future<Output = sqlx::Result<u64>> + Send + 'static,
{
    for _ in 0..MAX_BATCHES {
        match statements.run("delete", batch()).await {
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

/// Writes `mark` in PostgreSQL's sweep row, for sweeps every `every` (see [`SweepMark`]).
#[cfg(feature = "postgres")]
pub(crate) async fn mark_postgres(
    pool: sqlx::PgPool,
    every: Duration,
    mark: SweepMark,
) -> sqlx::Result<bool> {
    use crate::postgres::CLOCK_US;
    let (older_than, set_back) = mark.bounds(every);
    let done = sqlx::query(&format!(
        "UPDATE distlock_sweep SET last_us = {CLOCK_US} - $2
         WHERE id = 1 AND (last_us < {CLOCK_US} - $1 OR last_us > {CLOCK_US} + $1)"
    ))
    .bind(older_than)
    .bind(set_back)
    .execute(&pool)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Deletes up to [`SWEEP_LIMIT`] of PostgreSQL's idle counters, and as many rows of each
/// lease table that ended [`ABANDONED`] ago; the most one statement deleted.
#[cfg(feature = "postgres")]
pub(crate) async fn sweep_postgres(pool: sqlx::PgPool, fence_ttl: Duration) -> sqlx::Result<u64> {
    use crate::postgres::{CLOCK_MS, CLOCK_US};
    let done = sqlx::query(&format!(
        "DELETE FROM distlock_fence WHERE ctid = ANY(ARRAY(
           SELECT ctid FROM distlock_fence
           WHERE value >= $1 AND value < {CLOCK_US} - $2 LIMIT $3))"
    ))
    .bind(FLOORED)
    .bind(ttl_us(fence_ttl))
    .bind(SWEEP_LIMIT)
    .execute(&pool)
    .await?;
    let mut most = done.rows_affected();
    for table in ENDING_ROWS {
        let ended = sqlx::query(&format!(
            "DELETE FROM {table} WHERE ctid = ANY(ARRAY(
               SELECT ctid FROM {table} WHERE expires_at_ms < {CLOCK_MS} - $1 LIMIT $2))"
        ))
        .bind(abandoned_ms())
        .bind(SWEEP_LIMIT)
        .execute(&pool)
        .await?;
        most = most.max(ended.rows_affected());
    }
    Ok(most)
}

/// [`ABANDONED`] in milliseconds.
fn abandoned_ms() -> i64 {
    ABANDONED.as_millis() as i64
}

/// Writes `mark` in MySQL's sweep row, for sweeps every `every` (see [`SweepMark`]).
/// Found rows and changed rows agree, whichever the driver counts: the condition is in
/// the `WHERE`, and the clock moves.
#[cfg(feature = "mysql")]
pub(crate) async fn mark_mysql(
    pool: sqlx::MySqlPool,
    every: Duration,
    mark: SweepMark,
) -> sqlx::Result<bool> {
    use crate::mysql::CLOCK_US;
    let (older_than, set_back) = mark.bounds(every);
    let done = sqlx::query(&format!(
        "UPDATE distlock_sweep SET last_us = {CLOCK_US} - ?
         WHERE id = 1 AND (last_us < {CLOCK_US} - ? OR last_us > {CLOCK_US} + ?)"
    ))
    .bind(set_back)
    .bind(older_than)
    .bind(older_than)
    .execute(&pool)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Deletes up to [`SWEEP_LIMIT`] of MySQL's idle lease-mode counters, as many rows of each
/// lease table that ended [`ABANDONED`] ago, and of session mode's records of keys no
/// connection holds, with the full names of those keys. Every statement commits alone: no
/// lock is held across a round trip, so a client frozen mid-sweep (a process stopped with
/// SIGSTOP) holds up no lease transaction.
#[cfg(feature = "mysql")]
pub(crate) async fn sweep_mysql(pool: sqlx::MySqlPool, fence_ttl: Duration) -> sqlx::Result<u64> {
    use crate::mysql::{CLOCK_MS, CLOCK_US};
    let mut conn = pool.acquire().await?;
    let idle = format!("value >= {FLOORED} AND value < {CLOCK_US} - ?");
    let counters = sweep_mysql_rows(
        &mut conn,
        "distlock_fence",
        "lock_key",
        &idle,
        ttl_us(fence_ttl),
    )
    .await?;
    let mut ended = 0;
    for table in ENDING_ROWS {
        let long_ended = format!("expires_at_ms < {CLOCK_MS} - ?");
        let swept = sweep_mysql_rows(&mut conn, table, "token", &long_ended, abandoned_ms());
        ended = ended.max(swept.await?);
    }
    let records = sqlx::query(&format!(
        "DELETE FROM distlock_session_lock
         WHERE fence < {CLOCK_US} - ? AND IS_USED_LOCK(lock_key) IS NULL LIMIT ?"
    ))
    .bind(ttl_us(fence_ttl))
    .bind(SWEEP_LIMIT)
    .execute(&mut *conn)
    .await?;
    sqlx::query(
        "DELETE FROM distlock_name
         WHERE lock_key NOT IN (SELECT lock_key FROM distlock_session_lock)
           AND lock_key NOT IN (SELECT lock_key FROM distlock_session_waiter) LIMIT ?",
    )
    .bind(SWEEP_LIMIT)
    .execute(&mut *conn)
    .await?;
    Ok(counters.max(records.rows_affected()).max(ended))
}

/// Deletes up to [`SWEEP_LIMIT`] rows of `table` where `condition` holds (its one bind:
/// `arg`): their keys (column `key`) read first, by a read that locks nothing, then deleted
/// by key, `condition` checked again, in statements that commit alone. No statement scans
/// the table under locks, and none leaves a lock held across a round trip.
#[cfg(feature = "mysql")]
async fn sweep_mysql_rows(
    conn: &mut sqlx::MySqlConnection,
    table: &str,
    key: &str,
    condition: &str,
    arg: i64,
) -> sqlx::Result<u64> {
    // Read as bytes: the keys' binary collation reads as binary to the driver.
    let keys: Vec<Vec<u8>> = sqlx::query_scalar(&format!(
        "SELECT {key} FROM {table} WHERE {condition} LIMIT ?"
    ))
    .bind(arg)
    .bind(SWEEP_LIMIT)
    .fetch_all(&mut *conn)
    .await?;
    let mut deleted = 0;
    for chunk in keys.chunks(500) {
        let text = format!(
            "DELETE FROM {table} WHERE {key} IN ({}) AND {condition}",
            bind_marks(chunk.len())
        );
        let query = chunk.iter().fold(sqlx::query(&text), |q, k| q.bind(k));
        deleted += query.bind(arg).execute(&mut *conn).await?.rows_affected();
    }
    Ok(deleted)
}

/// `?, ?, …`: the marks of `count` binds, for an `IN (…)` list.
#[cfg(any(feature = "sqlite", feature = "mysql"))]
pub(crate) fn bind_marks(count: usize) -> String {
    vec!["?"; count].join(", ")
}

/// Writes `mark` in SQLite's sweep row, for sweeps every `every` (see [`SweepMark`]), by
/// this process's clock.
#[cfg(feature = "sqlite")]
pub(crate) async fn mark_sqlite(
    pool: sqlx::SqlitePool,
    every: Duration,
    mark: SweepMark,
) -> sqlx::Result<bool> {
    let now_us = crate::lease_table::now_ms().saturating_mul(1000);
    let (older_than, set_back) = mark.bounds(every);
    if let SweepMark::Claim = mark {
        // Read first: an UPDATE takes the database's write lock even where it changes
        // nothing, and every client looks as it opens the database.
        let last: Option<i64> =
            sqlx::query_scalar("SELECT last_us FROM distlock_sweep WHERE id = 1")
                .fetch_optional(&pool)
                .await?;
        let due = last.is_some_and(|last| {
            last < now_us.saturating_sub(older_than) || last > now_us.saturating_add(older_than)
        });
        if !due {
            return Ok(false);
        }
    }
    let done = sqlx::query(
        "UPDATE distlock_sweep SET last_us = ?1 WHERE id = 1 AND (last_us < ?2 OR last_us > ?3)",
    )
    .bind(now_us.saturating_sub(set_back))
    .bind(now_us.saturating_sub(older_than))
    .bind(now_us.saturating_add(older_than))
    .execute(&pool)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Deletes up to [`SWEEP_LIMIT`] of SQLite's idle counters, by this process's clock (the
/// clients of one database share a machine), and as many rows of each lease table that
/// ended [`ABANDONED`] before `lease_now_ms` (the database's lease clock now); the most one
/// statement deleted.
#[cfg(feature = "sqlite")]
pub(crate) async fn sweep_sqlite(
    pool: sqlx::SqlitePool,
    fence_ttl: Duration,
    lease_now_ms: i64,
) -> sqlx::Result<u64> {
    let idle_below = crate::lease_table::now_ms()
        .saturating_mul(1000)
        .saturating_sub(ttl_us(fence_ttl));
    let done = sqlx::query(
        "DELETE FROM distlock_fence WHERE name IN
           (SELECT name FROM distlock_fence WHERE value >= ?1 AND value < ?2 LIMIT ?3)",
    )
    .bind(FLOORED)
    .bind(idle_below)
    .bind(SWEEP_LIMIT)
    .execute(&pool)
    .await?;
    let mut most = done.rows_affected();
    for table in ENDING_ROWS {
        let ended = sqlx::query(&format!(
            "DELETE FROM {table} WHERE rowid IN
               (SELECT rowid FROM {table} WHERE expires_at_ms < ?1 LIMIT ?2)"
        ))
        .bind(lease_now_ms.saturating_sub(abandoned_ms()))
        .bind(SWEEP_LIMIT)
        .execute(&pool)
        .await?;
        most = most.max(ended.rows_affected());
    }
    Ok(most)
}
