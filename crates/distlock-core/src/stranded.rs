//! Releases stranded by the end of a current-thread runtime. A program on such a runtime
//! (`#[tokio::main(flavor = "current_thread")]`) that returns from `main` with a guard
//! still held drops the guard, whose release starts as a task of that runtime, and then
//! the runtime, which drops the task before it ever runs: the lock would stay taken until
//! its lease or session ended. So each release started in the background is noted here
//! until it ends, and the client's last handle, dropped while the runtime can run none of
//! them, makes those still noted on a thread of its own, with a runtime of its own.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::backend::{Backend, Grant};

/// A release started in the background and not ended yet.
struct Pending {
    grant: Grant,
    /// Whether the grant lives by a session (a connection of its own, for a session-mode
    /// database lock) rather than by its own lease.
    by_session: bool,
}

/// The releases of one client started in the background and not ended yet.
#[derive(Default)]
pub(crate) struct Stranded {
    next: AtomicU64,
    pending: Mutex<HashMap<u64, Pending>>,
}

impl std::fmt::Debug for Stranded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stranded").finish_non_exhaustive()
    }
}

impl Stranded {
    /// Notes the release of `grant`, started in the background: its id, for [`done`](Self::done).
    pub(crate) fn note(&self, grant: Grant, by_session: bool) -> u64 {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        self.locked().insert(id, Pending { grant, by_session });
        id
    }

    /// The release `id` ended (or its task was dropped).
    pub(crate) fn done(&self, id: u64) {
        self.locked().remove(&id);
    }

    /// Makes the releases still noted on a thread of its own, with a runtime of its own,
    /// and waits for them at most `within`: through `backend` where its calls outlive the
    /// runtime that connected it, else through a new connection to `url` (the grants that
    /// live by a connection of their own end with it). The releases' own tasks, if they
    /// ever run, find the grants gone.
    pub(crate) fn release_elsewhere(
        &self,
        backend: &Arc<dyn Backend>,
        url: Option<&str>,
        within: Duration,
    ) {
        let pending: Vec<Pending> = self.locked().drain().map(|(_, p)| p).collect();
        let (reuse, url) = match (backend.calls_outlive_the_runtime(), url) {
            (true, _) => (Some(backend.clone()), None),
            (false, Some(url)) => (None, Some(url.to_owned())),
            (false, None) => return,
        };
        let grants: Vec<Grant> = pending
            .into_iter()
            .filter(|p| reuse.is_some() || !p.by_session)
            .map(|p| p.grant)
            .collect();
        if grants.is_empty() {
            return;
        }
        let releasing = std::thread::Builder::new()
            .name("distlock-exit".into())
            .spawn(move || {
                let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                else {
                    return;
                };
                runtime.block_on(async move {
                    let released = release_all(reuse, url, grants);
                    if tokio::time::timeout(within, released).await.is_err() {
                        tracing::debug!(
                            "releases at the client's end took longer than {within:?}; their leases will expire"
                        );
                    }
                });
            });
        if let Ok(releasing) = releasing {
            let _ = releasing.join();
        }
    }

    fn locked(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Pending>> {
        self.pending.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Releases `grants` through `backend`, or through a new connection to `url`.
async fn release_all(backend: Option<Arc<dyn Backend>>, url: Option<String>, grants: Vec<Grant>) {
    let backend = match (backend, url) {
        (Some(backend), _) => backend,
        (None, Some(url)) => match crate::memory::connect_url(&url).await {
            Ok(backend) => backend,
            Err(err) => {
                tracing::debug!(error = %err, "no connection to release the grants left at the client's end; their leases will expire");
                return;
            }
        },
        (None, None) => return,
    };
    let mut releases = tokio::task::JoinSet::new();
    for grant in grants {
        let backend = backend.clone();
        releases.spawn(async move {
            if let Err(err) = backend.release(&grant).await {
                tracing::debug!(lock = %grant.name, error = %err, "a release at the client's end failed; its lease will expire");
            }
        });
    }
    while releases.join_next().await.is_some() {}
}
