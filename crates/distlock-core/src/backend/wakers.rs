//! Wake-ups between tasks of one process: how a backend tells its own waiters that a lock
//! may have become free, without a herd and without missing a wake-up that comes before
//! the waiter sleeps.

use std::collections::HashMap;
use std::sync::{Arc, Mutex as StdMutex};
use std::time::Duration;

use tokio::sync::Notify;

use super::Ticket;

/// Per-ticket wake-up slots. A wake-up sent before the waiter sleeps is kept and consumed by
/// its next wait, so none is lost between a poll and the wait that follows it.
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// # use std::time::Duration;
/// # use distlock_core::{LockKind, Owner};
/// # use distlock_core::backend::{LockRequest, Ticket};
/// # let request = LockRequest::new("n", LockKind::Mutex, Owner::random(), "t");
/// # let ticket = Ticket::new(request);
/// let wakers = distlock_core::backend::LocalWakers::new();
/// wakers.wake("t"); // nobody registered yet: nothing happens
/// wakers.register(&ticket);
/// wakers.wake("t");
/// wakers.wait(&ticket, Some(Duration::from_secs(5))).await; // returns at once
/// # }
/// ```
#[derive(Debug, Default)]
pub struct LocalWakers {
    slots: StdMutex<HashMap<String, Arc<Notify>>>,
}

impl LocalWakers {
    /// An empty set.
    ///
    /// # Examples
    ///
    /// See [`LocalWakers`].
    pub fn new() -> Self {
        Self::default()
    }

    /// Gives `ticket` a slot, so wake-ups sent from now on reach it.
    ///
    /// # Examples
    ///
    /// See [`LocalWakers`].
    pub fn register(&self, ticket: &Ticket) {
        self.slot(ticket);
    }

    fn slot(&self, ticket: &Ticket) -> Arc<Notify> {
        let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        slots
            .entry(ticket.request.token.clone())
            .or_insert_with(|| Arc::new(Notify::new()))
            .clone()
    }

    /// Waits for a wake-up of `ticket`, or `backstop` (`None`: no bound).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a wake-up not yet consumed stays for the next wait.
    ///
    /// # Examples
    ///
    /// See [`LocalWakers`].
    pub async fn wait(&self, ticket: &Ticket, backstop: Option<Duration>) {
        let notify = self.slot(ticket);
        match backstop {
            Some(backstop) => {
                let _ = tokio::time::timeout(backstop, notify.notified()).await;
            }
            None => notify.notified().await,
        }
    }

    /// Wakes the waiter with this request token.
    ///
    /// # Examples
    ///
    /// ```
    /// distlock_core::backend::LocalWakers::new().wake("no-such-token");
    /// ```
    pub fn wake(&self, token: &str) {
        let slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(notify) = slots.get(token) {
            notify.notify_one();
        }
    }

    /// Wakes every waiter: for a backend whose wake-ups may have gone astray (its
    /// subscription was down a while), so that each looks again.
    ///
    /// # Examples
    ///
    /// ```
    /// distlock_core::backend::LocalWakers::new().wake_all();
    /// ```
    pub fn wake_all(&self) {
        let slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        for notify in slots.values() {
            notify.notify_one();
        }
    }

    /// Drops the slot of a ticket that was granted or cancelled.
    ///
    /// # Examples
    ///
    /// ```
    /// distlock_core::backend::LocalWakers::new().forget("no-such-token");
    /// ```
    pub fn forget(&self, token: &str) {
        let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        // Most grants had no waiter to forget: no hashing of the token for nothing.
        if !slots.is_empty() {
            slots.remove(token);
        }
    }
}
