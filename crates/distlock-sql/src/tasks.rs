//! Pieces every SQL backend's `Backend` implementation shares.

use distlock_core::backend::{LeaseOutcome, WritesPaused};
use distlock_core::{Error, ErrorKind, Result};

/// Runs database work on a task of its own and waits for it: if the caller gives up (an
/// acquire future dropped by a timeout), the work still finishes, so no transaction is
/// left open on the connection and the caller's cancellation runs after it.
pub(crate) async fn detached<T, F>(backend: &'static str, work: F) -> Result<T>
where
    T: Send + 'static,
    F: Future<Output = Result<T>> + Send + 'static,
{
    tokio::spawn(work).await.map_err(|e| {
        Error::new(ErrorKind::Backend, format!("a database task failed: {e}")).with_backend(backend)
    })?
}

/// The gate every write of one client passes, so that
/// [`Backend::pause_writes`](distlock_core::backend::Backend::pause_writes) can wait for
/// the writes under way and hold new ones back: a process stopped in the middle of one
/// keeps what it locked (SQLite's one write lock, a transaction's row and name locks)
/// until it runs again, and every other client of the lock waits for it.
#[derive(Debug, Clone, Default)]
pub(crate) struct WriteGate(std::sync::Arc<tokio::sync::RwLock<()>>);

impl WriteGate {
    /// `work`, run with a read hold of the gate, taken when it starts and kept until it
    /// ends (on the task that runs it, even if its caller gave up).
    pub(crate) fn pass<T, F>(&self, work: F) -> impl Future<Output = T> + use<T, F>
    where
        F: Future<Output = T>,
    {
        let gate = self.clone();
        async move {
            let _writing = gate.hold().await;
            work.await
        }
    }

    /// A read hold of the gate: no pause begins while it lives.
    pub(crate) async fn hold(&self) -> tokio::sync::OwnedRwLockReadGuard<()> {
        self.0.clone().read_owned().await
    }

    /// Waits for the writes under way, and holds new ones back until the answer is
    /// dropped.
    pub(crate) async fn pause(&self) -> WritesPaused {
        WritesPaused::holding(self.0.clone().write_owned().await)
    }
}

/// Maps a database error to a distlock error of `backend` for `operation`. Connection
/// failures, serialisation failures, deadlocks and a server shutting down are temporary;
/// so is a protocol error, which is a connection garbled on its way (a link that dropped
/// bytes): the driver discards that connection, and the next call takes another.
#[cfg(any(feature = "postgres", feature = "mysql"))]
pub(crate) fn db_error(
    backend: &'static str,
    operation: &'static str,
) -> impl Fn(sqlx::Error) -> Error + Clone {
    move |err| {
        let temporary = match &err {
            sqlx::Error::PoolTimedOut
            | sqlx::Error::Io(_)
            | sqlx::Error::PoolClosed
            | sqlx::Error::Protocol(_)
            | sqlx::Error::WorkerCrashed => true,
            sqlx::Error::Database(db) => db.code().is_some_and(|code| {
                code.starts_with("08")
                    || code.starts_with("57P")
                    || code == "40001"
                    || code == "40P01"
            }),
            _ => false,
        };
        let kind = match temporary {
            true => ErrorKind::Unavailable,
            false => ErrorKind::Backend,
        };
        let out = Error::new(kind, format!("{backend} {operation} failed"))
            .with_backend(backend)
            .with_operation(operation)
            .with_source(err);
        if temporary { out.temporary() } else { out }
    }
}

/// Makes one connection, before a pool is built on the same options, so that a server
/// that refuses it fails at once with its own reason (connection refused, a wrong password,
/// no such database) instead of the pool's "timed out" after its acquire timeout. A refusal
/// of the URL's credentials or database is bad input; no answer within `timeout` is
/// unavailable.
#[cfg(any(feature = "postgres", feature = "mysql"))]
pub(crate) async fn first_connection<O>(
    backend: &'static str,
    options: &O,
    timeout: std::time::Duration,
) -> Result<()>
where
    O: sqlx::ConnectOptions,
    O::Connection: Sized,
{
    use sqlx::Connection;
    crate::use_ring_provider();
    let connection = match tokio::time::timeout(timeout, options.connect()).await {
        Ok(Ok(connection)) => connection,
        Ok(Err(err)) => return Err(connect_error(backend, err)),
        Err(_) => {
            return Err(Error::new(
                ErrorKind::Unavailable,
                format!("{backend}: no connection within {timeout:?} (the URL's connect_timeout)"),
            )
            .with_backend(backend)
            .with_operation("connect")
            .temporary());
        }
    };
    // The pool makes its own connections; closing this one politely is all that is left.
    let _ = connection.close().await;
    Ok(())
}

/// A failed connect to a PostgreSQL or MySQL server as a distlock error: the server
/// refusing the URL's credentials (SQLSTATE class 28) or database (PostgreSQL 3D000, or
/// 42501 for one the user may not connect to; MySQL 1049, or 1044 for one the user may not
/// use), or a TLS connection the URL's settings cannot make, makes the URL bad input
/// ([`ErrorKind::InvalidInput`]); a server out of reach, starting or full is
/// [`ErrorKind::Unavailable`]. `backend` names the server's kind in the message.
///
/// # Examples
///
/// ```
/// use distlock_core::ErrorKind;
///
/// let err = distlock_sql::connect_error("postgres", sqlx::Error::Configuration("no".into()));
/// assert_eq!(err.kind(), ErrorKind::InvalidInput);
/// let err = distlock_sql::connect_error("postgres", sqlx::Error::PoolTimedOut);
/// assert_eq!(err.kind(), ErrorKind::Unavailable);
/// ```
#[cfg(any(feature = "postgres", feature = "mysql"))]
pub fn connect_error(backend: &'static str, err: sqlx::Error) -> Error {
    let reason = match &err {
        sqlx::Error::Database(db) => {
            let code = db.code().unwrap_or_default();
            let refused = code.starts_with("28")
                || code == "3D000"
                || code == "42501"
                || refused_mysql_database(db.as_ref());
            refused.then_some("the server refused the connection")
        }
        // TLS asked of a server that has none, or an authority file that holds no
        // certificate.
        sqlx::Error::Tls(_) => Some("no TLS connection as the URL asks"),
        sqlx::Error::Configuration(_) => Some("the URL's settings cannot be used"),
        // A server certificate the URL's authorities do not vouch for. Any other TLS
        // failure (a message corrupted on the way, a server that offers no common
        // version) may pass, and is temporary.
        sqlx::Error::Io(io) if refused_certificate(io) => {
            Some("the server's TLS certificate was not accepted")
        }
        _ => None,
    };
    match reason {
        Some(reason) => Error::invalid(format!("{backend}: {reason}: {err}"))
            .with_backend(backend)
            .with_operation("connect"),
        None => db_error(backend, "connect")(err),
    }
}

/// Whether a connection failed because rustls refused the server's certificate.
#[cfg(any(feature = "postgres", feature = "mysql"))]
fn refused_certificate(io: &std::io::Error) -> bool {
    io.get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>())
        .is_some_and(|tls| matches!(tls, rustls::Error::InvalidCertificate(_)))
}

#[cfg(feature = "mysql")]
fn refused_mysql_database(db: &dyn sqlx::error::DatabaseError) -> bool {
    db.try_downcast_ref::<sqlx::mysql::MySqlDatabaseError>()
        .is_some_and(|db| matches!(db.number(), 1044 | 1049))
}

#[cfg(all(feature = "postgres", not(feature = "mysql")))]
fn refused_mysql_database(_: &dyn sqlx::error::DatabaseError) -> bool {
    false
}

/// Whether each lease was renewed or released, as lease outcomes.
pub(crate) fn outcomes(done: Vec<bool>) -> Vec<LeaseOutcome> {
    done.into_iter().map(outcome).collect()
}

/// `Done` if the grant was there, `NotHeld` otherwise.
pub(crate) fn outcome(done: bool) -> LeaseOutcome {
    match done {
        true => LeaseOutcome::Done,
        false => LeaseOutcome::NotHeld,
    }
}

/// What an SQL backend's ticket remembers: the poll of it still running detached, when its
/// queue row was last written, and a session-mode request's connection. Its grant keeps it.
#[derive(Default)]
pub(crate) struct SqlTicket {
    /// Resolves once the ticket's last poll, left running on its own task by an acquire
    /// dropped halfway (see [`detached`]), has ended.
    running: Option<tokio::sync::watch::Receiver<()>>,
    /// When this process last wrote the request's queue row (`None`: it has none). Only
    /// the stores that look read-only first (SQLite, MySQL) need it.
    #[cfg_attr(not(any(feature = "sqlite", feature = "mysql")), allow(dead_code))]
    pub(crate) queued_at: Option<tokio::time::Instant>,
    /// A session-mode request's wait, then its lock (a `session::SlotCell`).
    #[cfg_attr(not(any(feature = "postgres", feature = "mysql")), allow(dead_code))]
    pub(crate) session: Option<std::sync::Arc<dyn std::any::Any + Send + Sync>>,
}

/// Runs `work`, a poll of `ticket`, detached, and records it in the ticket until it ends,
/// so that a cancellation can wait for it: otherwise the poll could grant the lock after
/// the cancellation ran, and leave a grant nobody holds until its TTL ends.
pub(crate) async fn poll_detached<T, F>(
    ticket: &mut distlock_core::backend::Ticket,
    backend: &'static str,
    work: F,
) -> Result<T>
where
    T: Send + 'static,
    F: Future<Output = Result<T>> + Send + 'static,
{
    let (done, running) = tokio::sync::watch::channel(());
    ticket.state_or_default::<SqlTicket>().running = Some(running);
    detached(backend, async move {
        let answer = work.await;
        drop(done);
        answer
    })
    .await
}

/// Waits until no poll of `ticket` is running.
pub(crate) async fn settled(ticket: &mut distlock_core::backend::Ticket) {
    let running = ticket
        .state_mut::<SqlTicket>()
        .and_then(|state| state.running.take());
    if let Some(mut running) = running {
        // Resolves (with an error) once the poll's task drops its sender.
        let _ = running.changed().await;
    }
}

#[cfg(all(test, any(feature = "postgres", feature = "mysql")))]
mod tests {
    use super::db_error;

    #[test]
    fn a_garbled_connection_is_temporary_a_refused_statement_is_not() {
        let err = db_error("postgres", "acquire");
        let garbled = err(sqlx::Error::Protocol(
            "unexpected response from SSLRequest".into(),
        ));
        assert!(garbled.is_temporary(), "{garbled}");
        let refused = err(sqlx::Error::ColumnNotFound("x".into()));
        assert!(!refused.is_temporary(), "{refused}");
    }
}
