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

/// The polls still running for each request token. An acquire dropped in the middle of a
/// poll leaves that poll running on its own task (see [`detached`]); the cancellation that
/// follows must wait for it, or the poll could grant the lock after the cancellation ran
/// and leave a grant nobody holds until its TTL ends.
#[derive(Debug, Default)]
pub(crate) struct InFlight {
    running: std::sync::Mutex<std::collections::HashMap<String, tokio::sync::watch::Receiver<()>>>,
}

impl InFlight {
    /// Runs `work`, a poll for `token`, detached, and records it until it ends.
    pub(crate) async fn poll<T, F>(
        self: &std::sync::Arc<Self>,
        backend: &'static str,
        token: &str,
        work: F,
    ) -> Result<T>
    where
        T: Send + 'static,
        F: Future<Output = Result<T>> + Send + 'static,
    {
        let (done, running) = tokio::sync::watch::channel(());
        self.lock().insert(token.to_owned(), running.clone());
        let (this, token) = (self.clone(), token.to_owned());
        detached(backend, async move {
            let answer = work.await;
            drop(done);
            let mut map = this.lock();
            if map.get(&token).is_some_and(|r| r.same_channel(&running)) {
                map.remove(&token);
            }
            answer
        })
        .await
    }

    /// Waits until no poll for `token` is running.
    pub(crate) async fn settled(&self, token: &str) {
        let running = self.lock().get(token).cloned();
        if let Some(mut running) = running {
            // Resolves (with an error) once the poll's task drops its sender.
            let _ = running.changed().await;
        }
    }

    fn lock(
        &self,
    ) -> std::sync::MutexGuard<
        '_,
        std::collections::HashMap<String, tokio::sync::watch::Receiver<()>>,
    > {
        self.running.lock().unwrap_or_else(|p| p.into_inner())
    }
}
