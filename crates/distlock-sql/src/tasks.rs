//! Pieces every SQL backend's `Backend` implementation shares.

use distlock_core::backend::LeaseOutcome;
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

/// Maps a database error to a distlock error of `backend` for `operation`. Connection
/// failures, serialisation failures, deadlocks and a server shutting down are temporary.
#[cfg(any(feature = "postgres", feature = "mysql"))]
pub(crate) fn db_error(
    backend: &'static str,
    operation: &'static str,
) -> impl Fn(sqlx::Error) -> Error + Clone {
    move |err| {
        let temporary = match &err {
            sqlx::Error::PoolTimedOut | sqlx::Error::Io(_) | sqlx::Error::PoolClosed => true,
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
    /// A session-mode request's wait, then its lock (a `sessions::SlotCell`).
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
