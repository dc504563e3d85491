//! Forgetting locks a program is done with (`Client::forget`): the fencing counters of the
//! names given, where idle [`MIN_FENCE_TTL`] or more, by the rule `fence_ttl` sweeps by (see
//! `fences`). A name locked again seeds its counter anew from the clock, above every token
//! it gave. Counters below [`FLOORED`] are kept, as by the sweep.

use distlock_core::backend::MIN_FENCE_TTL;

use crate::fences::{FLOORED, ttl_us};

/// How many names one statement names.
#[cfg(any(feature = "sqlite", feature = "mysql"))]
const CHUNK: usize = 500;

/// Deletes the idle counters of `names` from a PostgreSQL database (both modes keep theirs
/// in one table): how many went.
#[cfg(feature = "postgres")]
pub(crate) async fn forget_postgres(pool: &sqlx::PgPool, names: &[String]) -> sqlx::Result<usize> {
    use crate::postgres::CLOCK_US;
    let done = sqlx::query(&format!(
        "DELETE FROM distlock_fence WHERE name = ANY($1) AND value >= $2 AND value < {CLOCK_US} - $3"
    ))
    .bind(names)
    .bind(FLOORED)
    .bind(ttl_us(MIN_FENCE_TTL))
    .execute(pool)
    .await?;
    Ok(done.rows_affected() as usize)
}

/// Deletes the idle counters of `names` from a MySQL or MariaDB database, in both modes'
/// tables (a session lock's only while nobody holds its `GET_LOCK`), and the names no row
/// refers to any more: how many counters went. Each statement names its rows by primary
/// key and commits alone, holding its locks only while it runs.
#[cfg(feature = "mysql")]
pub(crate) async fn forget_mysql(pool: &sqlx::MySqlPool, names: &[String]) -> sqlx::Result<usize> {
    use crate::mysql::{CLOCK_US, lock_key};
    let keys: std::collections::BTreeSet<String> = names.iter().map(|n| lock_key(n)).collect();
    let keys: Vec<String> = keys.into_iter().collect();
    // Each table with a counter per key, and when its row is idle (bind: the idle time).
    let idle_counters = [
        (
            "distlock_fence",
            format!("value >= {FLOORED} AND value < {CLOCK_US} - ?"),
        ),
        (
            "distlock_session_lock",
            format!("fence < {CLOCK_US} - ? AND IS_USED_LOCK(lock_key) IS NULL"),
        ),
    ];
    let mut forgotten = 0;
    for chunk in keys.chunks(CHUNK) {
        let marks = crate::fences::bind_marks(chunk.len());
        for (table, idle) in &idle_counters {
            let text = format!("DELETE FROM {table} WHERE lock_key IN ({marks}) AND {idle}");
            let mut query = sqlx::query(&text);
            for key in chunk {
                query = query.bind(key);
            }
            let done = query.bind(ttl_us(MIN_FENCE_TTL)).execute(pool).await?;
            forgotten += done.rows_affected() as usize;
        }
        let text = format!(
            "DELETE FROM distlock_name WHERE lock_key IN ({marks})
               AND lock_key NOT IN (SELECT lock_key FROM distlock_session_lock)
               AND lock_key NOT IN (SELECT lock_key FROM distlock_session_waiter)"
        );
        let mut unused = sqlx::query(&text);
        for key in chunk {
            unused = unused.bind(key);
        }
        unused.execute(pool).await?;
    }
    Ok(forgotten)
}

/// Deletes the idle counters of `names` from a SQLite database, by this process's clock
/// (the clients of one database share a machine): how many went.
#[cfg(feature = "sqlite")]
pub(crate) async fn forget_sqlite(
    pool: &sqlx::SqlitePool,
    names: &[String],
) -> sqlx::Result<usize> {
    let idle_below = crate::lease_table::now_ms()
        .saturating_mul(1000)
        .saturating_sub(ttl_us(MIN_FENCE_TTL));
    let mut forgotten = 0;
    for chunk in names.chunks(CHUNK) {
        let marks = crate::fences::bind_marks(chunk.len());
        let text = format!(
            "DELETE FROM distlock_fence WHERE name IN ({marks}) AND value >= ? AND value < ?"
        );
        let mut query = sqlx::query(&text);
        for name in chunk {
            query = query.bind(name);
        }
        let done = query.bind(FLOORED).bind(idle_below).execute(pool).await?;
        forgotten += done.rows_affected() as usize;
    }
    Ok(forgotten)
}
