//! A client's close as the bodies running under its grants see it: [`Client::close`]
//! first stops every body (a template's closure, a job's, an election's) at its next
//! await, waits for it to end, and only then releases the grants, so no body runs on
//! under a grant already given back.
//!
//! [`Client::close`]: crate::Client::close

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

/// The closes of one client, and the bodies running under its grants.
#[derive(Debug)]
pub(crate) struct Closing {
    /// How many closes began: a body that started under an earlier count is stopped.
    closes: watch::Sender<u64>,
    /// How many bodies run under the client's grants.
    running: watch::Sender<usize>,
}

impl Closing {
    pub(crate) fn new() -> Arc<Closing> {
        Arc::new(Closing {
            closes: watch::Sender::new(0),
            running: watch::Sender::new(0),
        })
    }

    /// Counts a body in until the returned mark is dropped.
    pub(crate) fn enter(self: &Arc<Self>) -> Running {
        self.running.send_modify(|n| *n += 1);
        let closes = self.closes.subscribe();
        let started = *closes.borrow();
        Running {
            closing: self.clone(),
            closes,
            started,
        }
    }

    /// Stops the bodies running now, and waits up to `within` for them to end: whether
    /// they all did.
    pub(crate) async fn stop_bodies(&self, within: Duration) -> bool {
        self.closes.send_modify(|n| *n += 1);
        let mut running = self.running.subscribe();
        tokio::time::timeout(within, running.wait_for(|n| *n == 0))
            .await
            .is_ok()
    }
}

/// A body counted in, until dropped.
pub(crate) struct Running {
    closing: Arc<Closing>,
    closes: watch::Receiver<u64>,
    started: u64,
}

impl Running {
    /// Resolves once a close began after the body started.
    pub(crate) async fn closed(&mut self) {
        let started = self.started;
        // The sender lives as long as this mark's `closing`: the wait ends only by a close.
        let _ = self.closes.wait_for(|n| *n != started).await;
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.closing.running.send_modify(|n| *n -= 1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_close_stops_the_bodies_running_and_waits_for_them() {
        let closing = Closing::new();
        assert!(
            closing.stop_bodies(Duration::from_millis(10)).await,
            "none ran"
        );
        let mut body = closing.enter();
        let stopper = {
            let closing = closing.clone();
            tokio::spawn(async move { closing.stop_bodies(Duration::from_secs(5)).await })
        };
        body.closed().await;
        drop(body);
        assert!(stopper.await.unwrap(), "the body ended in time");
        let mut later = closing.enter();
        let not_yet = tokio::time::timeout(Duration::from_millis(20), later.closed()).await;
        assert!(
            not_yet.is_err(),
            "a body started after a close is not stopped by it"
        );
    }
}
