//! The loops a session backend runs beside its session: opening the next session until
//! the store answers, and watching a held grant's own entry (a node, a key) for a deletion
//! by someone else.

use std::future::Future;
use std::time::Duration;

use super::sessions::LossWatch;
use crate::Result;

/// The first pause between failed attempts to open a session.
const FIRST_PAUSE: Duration = Duration::from_millis(50);

/// The longest pause between failed attempts to open a session.
const LONGEST_PAUSE: Duration = Duration::from_secs(2);

/// Calls `attempt` until it succeeds, pausing 50 ms after the first failure and twice as
/// long after each next one, up to 2 s; each failure is logged as what `what` cannot do
/// yet. Its success, or `None` once `wanted` says it is no longer wanted (the backend was
/// dropped meanwhile).
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let mut tries = 0;
/// let opened = distlock_core::backend::until_done("open a session", || true, || {
///     tries += 1;
///     let tried = tries;
///     async move {
///         match tried {
///             3 => Ok(tried),
///             _ => Err(distlock_core::Error::new(distlock_core::ErrorKind::Unavailable, "down")),
///         }
///     }
/// })
/// .await;
/// assert_eq!(opened, Some(3));
/// # }
/// ```
pub async fn until_done<T, F: Future<Output = Result<T>>>(
    what: &str,
    wanted: impl Fn() -> bool,
    mut attempt: impl FnMut() -> F,
) -> Option<T> {
    let mut pause = FIRST_PAUSE;
    loop {
        match attempt().await {
            Ok(done) => return Some(done),
            Err(err) => {
                tracing::warn!(error = %err, "cannot {what} yet");
                if !wanted() {
                    return None;
                }
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(LONGEST_PAUSE);
            }
        }
    }
}

/// What one watch on a grant's own entry saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryWatch {
    /// The entry was deleted.
    Deleted,
    /// Watching is over without a deletion to report: the session ended (which loses the
    /// grant through the session channel), or the watch may not be set at all.
    Over,
    /// The watch failed for now: set it again after a pause.
    Failed,
    /// The watch ended with the entry still there: set it again at once.
    Again,
}

/// How long after a grant the watch on its entry is set.
const WATCH_AFTER: Duration = Duration::from_millis(100);

/// How long a watch that failed waits before it is set again.
const WATCH_RETRY: Duration = Duration::from_millis(100);

/// Watches a grant's own entry with `watch_once` (which starts from the grant, so a
/// deletion before the watch is set is still seen) until it is deleted, the grant is
/// released, or watching is over: true if the entry was deleted while the grant was held
/// (the caller then reports it with [`LossWatch::report`]). Starts 100 ms after the grant,
/// so a short hold costs the store nothing more.
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use distlock_core::backend::{EntryWatch, LossFlag, watch_entry};
/// let flag = LossFlag::default();
/// assert!(watch_entry(flag.watch(), || async { EntryWatch::Deleted }).await);
/// flag.releasing();
/// assert!(!watch_entry(flag.watch(), || async { EntryWatch::Deleted }).await);
/// # }
/// ```
pub async fn watch_entry<F: Future<Output = EntryWatch>>(
    gone: LossWatch,
    mut watch_once: impl FnMut() -> F,
) -> bool {
    tokio::time::sleep(WATCH_AFTER).await;
    while gone.is_held() {
        match watch_once().await {
            EntryWatch::Deleted => return true,
            EntryWatch::Over => return false,
            EntryWatch::Failed => tokio::time::sleep(WATCH_RETRY).await,
            EntryWatch::Again => {}
        }
    }
    false
}
