//! What each dialect of session mode supplies: how to open a connection, and the
//! statements run on it ([`SessionDialect`]), with what they answer.

use std::time::Duration;

use tokio::time::Instant;

use distlock_core::backend::{LockRequest, async_trait};
use distlock_core::{Error, Result};

/// What a try-lock statement found.
pub(crate) struct Tried {
    /// The fencing token, if the lock was taken.
    pub(crate) fence: Option<i64>,
    /// The server's id of this connection (to stop its waits).
    pub(crate) conn_id: i64,
    /// Other names recorded under the same key: a collision.
    pub(crate) others: Vec<String>,
    /// What else the name is in use as (a semaphore, a lease), if the lock was refused
    /// for that.
    pub(crate) clash: Option<&'static str>,
}

/// A note to write: its value, the fencing token of the grant it is written under, and
/// its quiet window in milliseconds (`None`: the note's window goes on).
pub(crate) struct NoteWrite<'a> {
    pub(crate) value: &'a str,
    pub(crate) fence: i64,
    pub(crate) quiet_ms: Option<i64>,
}

/// How a wait in the server's queue ended once the lock was granted: the fencing token and
/// when the statement that minted it was sent (the server's limit on a silent session runs
/// from no earlier), or what else the name turned out to be in use as (the lock is then
/// not held).
pub(crate) type WaitEnd = std::result::Result<(i64, Instant), &'static str>;

/// One dialect's session locks: how to open a connection, and the statements run on it.
#[async_trait]
pub(crate) trait SessionDialect: Send + Sync + 'static {
    /// A connection of the dialect's driver, with whatever the dialect tracks beside it.
    type Conn: Send + 'static;
    /// What the server locks for a request.
    type Key: Clone + Send + Sync + 'static;

    /// The backend's name in errors and logs.
    const BACKEND: &'static str;

    /// The error for a failed `operation`.
    fn error(operation: &'static str, err: sqlx::Error) -> Error;

    /// Whether a statement failed because the connection is gone (a stale idle connection,
    /// e.g. after a database restart), so a new connection may be tried.
    fn connection_gone(err: &sqlx::Error) -> bool;

    /// The key `request` locks.
    fn key(&self, request: &LockRequest) -> Self::Key;

    /// A new connection, set up for holding locks.
    async fn connect(&self) -> Result<Self::Conn>;

    /// Tries the lock without waiting; if taken, mints the fencing token and records the
    /// holder.
    async fn try_lock(
        &self,
        conn: &mut Self::Conn,
        request: &LockRequest,
        key: &Self::Key,
    ) -> sqlx::Result<Tried>;

    /// Records the waiter, waits in the server's lock queue until granted, then mints the
    /// fencing token. Stopped by [`interrupt`](Self::interrupt) from another connection.
    async fn wait(
        &self,
        conn: &mut Self::Conn,
        request: &LockRequest,
        key: &Self::Key,
    ) -> sqlx::Result<WaitEnd>;

    /// Asks the server, from another connection, to stop the statement of connection
    /// `conn_id`.
    async fn interrupt(&self, conn_id: i64) -> sqlx::Result<()>;

    /// Forgets the waiter record of `token` on connection `conn_id`.
    async fn forget_waiter(&self, conn_id: i64, token: &str) -> sqlx::Result<()>;

    /// Shows the session is alive and still holds `key`: the renewal of a session lock,
    /// which also re-arms the server's limit on a silent session to `ttl`.
    async fn renew(
        &self,
        conn: &mut Self::Conn,
        key: &Self::Key,
        ttl: Duration,
    ) -> sqlx::Result<bool>;

    /// Writes lock `name`'s note on the connection that holds `key`, if it still holds it,
    /// in one statement: the server's time of the write, `None` if it does not hold it.
    async fn write_note(
        &self,
        conn: &mut Self::Conn,
        key: &Self::Key,
        name: &str,
        note: &NoteWrite<'_>,
    ) -> sqlx::Result<Option<i64>>;

    /// Releases `key`; whether the session still held it.
    async fn unlock(&self, conn: &mut Self::Conn, key: &Self::Key) -> sqlx::Result<bool>;

    /// Closes a connection; the server releases everything it held.
    fn close(conn: Self::Conn) -> futures_util::future::BoxFuture<'static, ()>;

    /// A new connection for the [`Sentinel`](crate::sentinel::Sentinel), named so where the server shows names (so
    /// that operators can tell it from a stuck query). The default: [`connect`](Self::connect).
    async fn connect_sentinel(&self) -> Result<Self::Conn> {
        self.connect().await
    }

    /// Sleeps on the server for ten seconds, doing nothing: the statement the [`Sentinel`](crate::sentinel::Sentinel)
    /// waits in, which fails the moment the server goes away.
    async fn sleep(&self, conn: &mut Self::Conn) -> sqlx::Result<()>;

    /// One trivial statement, to see whether a connection still answers.
    async fn ping(&self, conn: &mut Self::Conn) -> sqlx::Result<()>;
}
