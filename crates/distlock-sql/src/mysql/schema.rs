//! MySQL's tables: created when missing (one client at a time, under a named lock), and
//! those an older distlock made with text keys given byte keys.

use distlock_core::Result;
use sqlx::mysql::MySqlConnection;
use sqlx::{Executor, MySqlPool};

use super::db_error;
use crate::fences;
use crate::rows::LeaseRow;

const SCHEMA: &str = include_str!("schema.sql");

/// The tables [`SCHEMA`] creates.
const SCHEMA_TABLES: [&str; 6] = [
    "distlock_fence",
    "distlock_lease",
    "distlock_waiter",
    "distlock_session_lock",
    "distlock_session_waiter",
    "distlock_name",
];

/// Creates the tables if they are missing (one client at a time, under a named lock), and
/// forgets the session-mode waiters of connections that are gone.
pub(super) async fn prepare(pool: &MySqlPool) -> Result<()> {
    let err = db_error("connect");
    let mut conn = pool.acquire().await.map_err(&err)?;
    let marks = crate::rows::bind_marks(SCHEMA_TABLES.len());
    // The tables of [`SCHEMA`] present, and whether the sweep table is, in one round trip.
    let count = format!(
        "SELECT CAST(SUM(TABLE_NAME IN ({marks})) AS SIGNED),
                CAST(SUM(TABLE_NAME = 'distlock_sweep') AS SIGNED),
                CAST(SUM(TABLE_NAME = 'distlock_note') AS SIGNED)
         FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE()"
    );
    let (present, swept, noted): (Option<i64>, Option<i64>, Option<i64>) = SCHEMA_TABLES
        .iter()
        .fold(sqlx::query_as(&count), |query, table| query.bind(table))
        .fetch_one(&mut *conn)
        .await
        .map_err(&err)?;
    let (present, swept, noted) = (present.unwrap_or(0), swept.unwrap_or(0), noted.unwrap_or(0));
    let outdated = text_keyed_tables(&mut conn).await.map_err(&err)?;
    let make_tables = present < SCHEMA_TABLES.len() as i64 || !outdated.is_empty();
    if make_tables || swept == 0 || noted == 0 {
        sqlx::query("SELECT GET_LOCK('distlock:schema', 60)")
            .execute(&mut *conn)
            .await
            .map_err(&err)?;
        let created = match make_tables {
            true => create_tables(&mut conn).await,
            false => Ok(()),
        };
        // The tables a database made by an older distlock lacks: a user who may not create
        // them still connects (each client then sweeps by itself, and jobs keep no run
        // records).
        for statement in fences::SWEEP_TABLE.iter().filter(|_| created.is_ok()) {
            if let Err(refused) = pool.execute(*statement).await {
                crate::mode::sweep_table_refused("mysql", &refused);
                break;
            }
        }
        if created.is_ok()
            && let Err(refused) = pool.execute(super::notes::NOTE_TABLE).await
        {
            crate::mode::note_table_refused("mysql", super::notes::NOTE_TABLE, &refused);
        }
        let _ = sqlx::query("SELECT RELEASE_LOCK('distlock:schema')")
            .execute(&mut *conn)
            .await;
        created.map_err(&err)?;
    }
    sqlx::query(
        "DELETE FROM distlock_session_waiter
         WHERE conn NOT IN (SELECT ID FROM information_schema.PROCESSLIST)",
    )
    .execute(&mut *conn)
    .await
    .map_err(&err)?;
    Ok(())
}

/// The tables of [`SCHEMA_TABLES`] an older distlock made with text keys, which pad and so
/// merge `pad` and `pad `.
async fn text_keyed_tables(conn: &mut MySqlConnection) -> sqlx::Result<Vec<String>> {
    let marks = crate::rows::bind_marks(SCHEMA_TABLES.len());
    let sql = format!(
        "SELECT CAST(TABLE_NAME AS CHAR CHARACTER SET utf8mb4) FROM information_schema.COLUMNS
         WHERE TABLE_SCHEMA = DATABASE() AND COLUMN_NAME = 'lock_key'
           AND DATA_TYPE <> 'varbinary' AND TABLE_NAME IN ({marks})"
    );
    let rows = SCHEMA_TABLES
        .iter()
        .fold(sqlx::query(&sql), |query, table| query.bind(table))
        .fetch_all(&mut *conn)
        .await?;
    rows.iter().map(|row| row.text(0)).collect()
}

/// Runs [`SCHEMA`]; the in-memory tables may grow to 256 MiB. Tables an older distlock
/// made with text keys get byte keys (no two of their rows can differ only where the new
/// type tells them apart). A user without the ALTER privilege keeps them, with a warning
/// that gives the statement to run.
async fn create_tables(conn: &mut MySqlConnection) -> sqlx::Result<()> {
    conn.execute("SET SESSION max_heap_table_size = 268435456")
        .await?;
    let sql: Vec<&str> = SCHEMA
        .lines()
        .filter(|line| !line.trim_start().starts_with("--"))
        .collect();
    for statement in sql.join("\n").split(';').filter(|s| !s.trim().is_empty()) {
        conn.execute(statement).await?;
    }
    // Read again under the schema lock: another client may have altered them meanwhile.
    for table in text_keyed_tables(conn).await? {
        let alter = format!("ALTER TABLE {table} MODIFY lock_key VARBINARY(256) NOT NULL");
        match conn.execute(alter.as_str()).await {
            Ok(_) => {}
            // ER_TABLEACCESS_DENIED_ERROR: not this user's to change.
            Err(sqlx::Error::Database(db))
                if db
                    .try_downcast_ref::<sqlx::mysql::MySqlDatabaseError>()
                    .is_some_and(|db| db.number() == 1142) =>
            {
                tracing::warn!(
                    table = %table,
                    "lock names that differ only in trailing spaces share a lock here until \
                     someone allowed to runs: {alter}"
                );
            }
            Err(err) => return Err(err),
        }
    }
    Ok(())
}
