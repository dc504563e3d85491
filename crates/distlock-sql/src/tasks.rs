//! Pieces every SQL backend's `Backend` implementation shares.

use distlock_core::{Error, ErrorKind, LeaseOutcome, Result};

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
