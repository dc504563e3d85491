//! PostgreSQL's part of session mode: connections set up for holding advisory locks, and
//! the statements of [`super::advisory`] behind the shared [`SessionDialect`].

use std::time::Duration;

use distlock_core::backend::{LockRequest, async_trait};
use distlock_core::{Error, Result};
use futures_util::future::BoxFuture;
use sqlx::postgres::PgConnectOptions;
use sqlx::{ConnectOptions, Connection, PgConnection, PgPool};

use super::advisory::{self, Share, advisory_key};
use super::db_error;
use crate::session::{NoteWrite, SessionDialect, Tried, WaitEnd};

/// PostgreSQL advisory locks on connections of their own.
pub(super) struct PgSessions {
    options: PgConnectOptions,
    pool: PgPool,
}

impl PgSessions {
    /// Session connections commit asynchronously (a lock dies with its session, and fencing
    /// tokens stay ahead of the clock; see [`advisory`]) and let the server notice a client
    /// that went away within a second, even during a wait. `pool` serves the statements
    /// that stop a wait.
    pub(super) fn new(options: &PgConnectOptions, pool: PgPool) -> PgSessions {
        let options = options.clone().options([
            ("synchronous_commit", "off"),
            ("client_connection_check_interval", "1000"),
        ]);
        PgSessions { options, pool }
    }
}

#[async_trait]
impl SessionDialect for PgSessions {
    type Conn = PgConnection;
    type Key = (i64, Share);

    const BACKEND: &'static str = "postgres";

    fn error(operation: &'static str, err: sqlx::Error) -> Error {
        db_error(operation)(err)
    }

    fn connection_gone(err: &sqlx::Error) -> bool {
        match err {
            sqlx::Error::Io(_) | sqlx::Error::Protocol(_) => true,
            sqlx::Error::Database(db) => db
                .code()
                .is_some_and(|c| c.starts_with("08") || c.starts_with("57P")),
            _ => false,
        }
    }

    fn key(&self, request: &LockRequest) -> (i64, Share) {
        (advisory_key(&request.name), Share::of(request))
    }

    async fn connect(&self) -> Result<PgConnection> {
        self.options.connect().await.map_err(db_error("connect"))
    }

    async fn try_lock(
        &self,
        conn: &mut PgConnection,
        request: &LockRequest,
        key: &(i64, Share),
    ) -> sqlx::Result<Tried> {
        advisory::try_lock(conn, request, key.0).await
    }

    async fn wait(
        &self,
        conn: &mut PgConnection,
        request: &LockRequest,
        key: &(i64, Share),
    ) -> sqlx::Result<WaitEnd> {
        advisory::queue(conn, request, key.0).await?;
        advisory::wait(conn, key.1, key.0).await?;
        let sent = tokio::time::Instant::now();
        advisory::granted(conn, request)
            .await
            .map(|fence| Ok((fence, sent)))
    }

    async fn interrupt(&self, conn_id: i64) -> sqlx::Result<()> {
        sqlx::query("SELECT pg_cancel_backend($1::INT)")
            .bind(conn_id)
            .execute(&self.pool)
            .await
            .map(drop)
    }

    async fn forget_waiter(&self, conn_id: i64, token: &str) -> sqlx::Result<()> {
        sqlx::query("DELETE FROM distlock_session WHERE backend_pid = $1::INT AND token = $2")
            .bind(conn_id)
            .bind(token)
            .execute(&self.pool)
            .await
            .map(drop)
    }

    async fn renew(
        &self,
        conn: &mut PgConnection,
        _key: &(i64, Share),
        ttl: Duration,
    ) -> sqlx::Result<bool> {
        advisory::renew(conn, &advisory::idle_limit(ttl)).await?;
        Ok(true)
    }

    async fn write_note(
        &self,
        conn: &mut PgConnection,
        key: &(i64, Share),
        name: &str,
        note: &NoteWrite<'_>,
    ) -> sqlx::Result<Option<i64>> {
        super::notes::write_held(conn, key.0, name, note).await
    }

    async fn unlock(&self, conn: &mut PgConnection, key: &(i64, Share)) -> sqlx::Result<bool> {
        advisory::unlock(conn, key.1, key.0).await
    }

    /// Named `distlock-sentinel` in `pg_stat_activity`, where its `pg_sleep` would
    /// otherwise look like a stuck query.
    async fn connect_sentinel(&self) -> Result<PgConnection> {
        let options = self.options.clone().application_name("distlock-sentinel");
        options.connect().await.map_err(db_error("connect"))
    }

    async fn sleep(&self, conn: &mut PgConnection) -> sqlx::Result<()> {
        sqlx::query("SELECT pg_sleep(10)")
            .execute(conn)
            .await
            .map(drop)
    }

    async fn ping(&self, conn: &mut PgConnection) -> sqlx::Result<()> {
        sqlx::query("SELECT 1").execute(conn).await.map(drop)
    }

    fn close(conn: PgConnection) -> BoxFuture<'static, ()> {
        Box::pin(async move {
            let _ = conn.close().await;
        })
    }
}
