//! Bounds on what a command asks of a lock store: a server that accepts and never answers
//! (or a member that never grants a session) holds no command past its deadline.

use std::future::Future;
use std::time::{Duration, Instant};

use distlock::{Error, ErrorKind, Result};

/// Runs `future` for at most `limit`; past it, the error `late` makes of the limit.
pub async fn within<T>(
    limit: Duration,
    future: impl Future<Output = Result<T>>,
    late: impl FnOnce(Duration) -> Error,
) -> Result<T> {
    match tokio::time::timeout(limit, future).await {
        Ok(outcome) => outcome,
        Err(_) => Err(late(limit)),
    }
}

/// The error of a store that did not answer within `limit`.
pub fn unanswered(limit: Duration) -> Error {
    Error::new(
        ErrorKind::Unavailable,
        format!(
            "the lock store did not answer within {}",
            humantime::format_duration(limit)
        ),
    )
    .temporary()
}

/// Runs `attempt` until it succeeds, fails for good, or `deadline` passes, each try
/// bounded by the time left: a temporary failure (a store restarting, a refused
/// connection) is tried again after a backoff. Past the deadline, the error `late` makes of
/// the last temporary failure, if there was one.
pub async fn retry_until<T, F, Fut>(
    deadline: Instant,
    mut attempt: F,
    late: impl FnOnce(Option<Error>) -> Error,
) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T>>,
{
    let mut last = None;
    let mut pause = FIRST_RETRY;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(late(last));
        }
        match tokio::time::timeout(left, attempt()).await {
            Ok(Ok(value)) => return Ok(value),
            Ok(Err(err)) if err.is_temporary() => {
                last = Some(err);
                let left = deadline.saturating_duration_since(Instant::now());
                tokio::time::sleep(pause.min(left)).await;
                pause = (pause * 2).min(LAST_RETRY);
            }
            Ok(Err(err)) => return Err(err),
            Err(_) => return Err(late(last)),
        }
    }
}

/// The first pause between two tries of [`retry_until`]; each next one is twice as long.
const FIRST_RETRY: Duration = Duration::from_millis(50);
/// The longest pause between two tries of [`retry_until`].
const LAST_RETRY: Duration = Duration::from_secs(1);
