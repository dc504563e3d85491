//! Clean-ups a client runs in the background — a dropped acquire's cancel, a dropped
//! guard's release — counted, so a program about to exit can wait for them
//! ([`Client::settle`](crate::Client::settle)) instead of leaving a queue entry or a grant
//! behind until it expires.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use crate::backend::Grant;
use crate::stranded::Stranded;

/// The background clean-ups of one client still running.
#[derive(Debug, Default)]
pub(crate) struct Cleanups {
    /// The releases among them, noted for a runtime that ends before they run.
    pub(crate) stranded: Stranded,
    running: AtomicUsize,
    /// Those of them that release a grant (the rest withdraw a request).
    releasing: AtomicUsize,
    idle: Notify,
    /// News of the last release's end for a thread that blocks (`wait_releases`): no
    /// runtime timer involved.
    idle_lock: Mutex<()>,
    idle_blocking: Condvar,
}

impl Cleanups {
    /// Counts a clean-up (a request's withdrawal) from now until the returned guard is
    /// dropped (at its end, or when its task is dropped with its runtime).
    pub(crate) fn start(self: &Arc<Self>) -> Cleanup {
        self.running.fetch_add(1, Ordering::AcqRel);
        Cleanup {
            cleanups: self.clone(),
            release: false,
            stranded: None,
        }
    }

    /// Counts a release of a grant, as [`start`](Self::start) counts any clean-up.
    pub(crate) fn start_release(self: &Arc<Self>) -> Cleanup {
        self.releasing.fetch_add(1, Ordering::AcqRel);
        self.running.fetch_add(1, Ordering::AcqRel);
        Cleanup {
            cleanups: self.clone(),
            release: true,
            stranded: None,
        }
    }

    /// Counts the release of `grant` in the background, as [`start_release`]
    /// (Self::start_release) does, and notes it until it ends, in case the runtime ends
    /// before it runs (see [`Stranded`]).
    pub(crate) fn start_background_release(
        self: &Arc<Self>,
        grant: Grant,
        by_session: bool,
    ) -> Cleanup {
        let mut cleanup = self.start_release();
        cleanup.stranded = Some(self.stranded.note(grant, by_session));
        cleanup
    }

    /// Whether no release runs.
    pub(crate) fn releases_done(&self) -> bool {
        self.releasing.load(Ordering::Acquire) == 0
    }

    /// Blocks the calling thread until no release runs, at most `within`; true if none
    /// does. It needs no runtime to time it out, so it ends even when every worker of the
    /// runtime running the releases is busy.
    pub(crate) fn wait_releases(&self, within: Duration) -> bool {
        let deadline = Instant::now() + within;
        let mut lock = self.idle_lock.lock().unwrap_or_else(|p| p.into_inner());
        while !self.releases_done() {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            lock = self
                .idle_blocking
                .wait_timeout(lock, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        true
    }

    /// Waits until no clean-up runs, at most `within`; true if none does.
    pub(crate) async fn settle(&self, within: Duration) -> bool {
        let idle = async {
            loop {
                let notified = self.idle.notified();
                if self.running.load(Ordering::Acquire) == 0 {
                    return;
                }
                notified.await;
            }
        };
        tokio::time::timeout(within, idle).await.is_ok()
    }
}

/// One running clean-up; dropping it ends it.
pub(crate) struct Cleanup {
    cleanups: Arc<Cleanups>,
    release: bool,
    /// Its note among the stranded releases, for a release in the background.
    stranded: Option<u64>,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        let cleanups = &self.cleanups;
        if let Some(id) = self.stranded {
            cleanups.stranded.done(id);
        }
        if self.release && cleanups.releasing.fetch_sub(1, Ordering::AcqRel) == 1 {
            // Taken so a waiter between its check and its wait is not missed.
            let _lock = cleanups.idle_lock.lock().unwrap_or_else(|p| p.into_inner());
            cleanups.idle_blocking.notify_all();
        }
        if cleanups.running.fetch_sub(1, Ordering::AcqRel) == 1 {
            cleanups.idle.notify_waiters();
        }
    }
}
