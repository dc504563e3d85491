//! Clean-ups a client runs in the background — a dropped acquire's cancel, a dropped
//! guard's release — counted, so a program about to exit can wait for them
//! ([`Client::settle`](crate::Client::settle)) instead of leaving a queue entry or a grant
//! behind until it expires.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

/// The background clean-ups of one client still running.
#[derive(Debug, Default)]
pub(crate) struct Cleanups {
    running: AtomicUsize,
    idle: Notify,
    /// The same news for a thread that blocks (`wait_idle`): no runtime timer involved.
    idle_lock: Mutex<()>,
    idle_blocking: Condvar,
}

impl Cleanups {
    /// Counts a clean-up from now until the returned guard is dropped (at its end, or when
    /// its task is dropped with its runtime).
    pub(crate) fn start(self: &Arc<Self>) -> Cleanup {
        self.running.fetch_add(1, Ordering::AcqRel);
        Cleanup(self.clone())
    }

    /// Whether no clean-up runs.
    pub(crate) fn idle(&self) -> bool {
        self.running.load(Ordering::Acquire) == 0
    }

    /// Blocks the calling thread until no clean-up runs, at most `within`; true if none
    /// does. It needs no runtime to time it out, so it ends even when every worker of the
    /// runtime running the clean-ups is busy.
    pub(crate) fn wait_idle(&self, within: Duration) -> bool {
        let deadline = Instant::now() + within;
        let mut lock = self.idle_lock.lock().unwrap_or_else(|p| p.into_inner());
        while !self.idle() {
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
pub(crate) struct Cleanup(Arc<Cleanups>);

impl Drop for Cleanup {
    fn drop(&mut self) {
        if self.0.running.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.0.idle.notify_waiters();
            // Taken so a waiter between its check and its wait is not missed.
            let _lock = self.0.idle_lock.lock().unwrap_or_else(|p| p.into_inner());
            self.0.idle_blocking.notify_all();
        }
    }
}
