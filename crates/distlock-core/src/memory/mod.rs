//! The memory backend: full lock semantics inside one process (TTL expiry, fairness,
//! fencing, read/write locks, semaphores), for tests, examples and single-process services.
//!
//! `memory://` is one lock space shared by every client in the process; `memory://NAME` is
//! a separate space per name. Fencing tokens do not survive the process.

mod space;

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex as StdMutex};
use std::time::Duration;

use async_trait::async_trait;
use url::Url;

use crate::backend::{
    Backend, Capabilities, LeaseKey, LeaseOutcome, LockRequest, LockState, PollOutcome, Ticket,
};
use crate::error::{Error, Result};
use crate::registry::Connector;
use space::Space;

static SPACES: LazyLock<StdMutex<HashMap<String, Arc<Space>>>> =
    LazyLock::new(|| StdMutex::new(HashMap::new()));

/// Process-local lock store.
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> distlock_core::Result<()> {
/// use std::sync::Arc;
/// use distlock_core::{Client, MemoryBackend};
///
/// let client = Client::with_backend(Arc::new(MemoryBackend::new()));
/// let guard = client.mutex("a").lock().await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct MemoryBackend {
    space: Arc<Space>,
}

impl Default for MemoryBackend {
    fn default() -> Self {
        Self::new()
    }
}

impl MemoryBackend {
    /// A backend with a private lock space of its own.
    ///
    /// # Examples
    ///
    /// See [`MemoryBackend`].
    pub fn new() -> Self {
        MemoryBackend {
            space: Arc::new(Space::default()),
        }
    }

    /// The process-wide lock space called `name` (`""` for `memory://`).
    ///
    /// # Examples
    ///
    /// ```
    /// let a = distlock_core::MemoryBackend::shared("tests");
    /// let b = distlock_core::MemoryBackend::shared("tests");
    /// ```
    pub fn shared(name: &str) -> Self {
        let mut spaces = SPACES.lock().unwrap_or_else(|p| p.into_inner());
        let space = spaces.entry(name.to_owned()).or_default().clone();
        MemoryBackend { space }
    }
}

#[async_trait]
impl Backend for MemoryBackend {
    fn scheme(&self) -> &'static str {
        "memory"
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            durable_fencing: false,
            cross_process: false,
            ..Capabilities::full(true)
        }
    }

    async fn enqueue(&self, request: LockRequest) -> Result<Ticket> {
        Ok(self.space.enqueue(request))
    }

    async fn poll(&self, ticket: &Ticket) -> Result<PollOutcome> {
        // Cooperate like tokio's own primitives: a task that locks and unlocks in a tight
        // loop still lets the other tasks on its thread run.
        tokio::task::consume_budget().await;
        self.space.poll(ticket)
    }

    async fn wait_for_change(&self, ticket: &Ticket, backstop: Duration) -> Result<()> {
        self.space.wakers.wait(ticket, backstop).await;
        Ok(())
    }

    async fn cancel(&self, ticket: &Ticket) -> Result<()> {
        self.space.cancel(ticket);
        Ok(())
    }

    async fn renew(&self, lease: &LeaseKey, ttl: Duration) -> Result<LeaseOutcome> {
        Ok(self.space.renew(lease, ttl))
    }

    async fn release(&self, lease: &LeaseKey) -> Result<LeaseOutcome> {
        tokio::task::consume_budget().await;
        Ok(self.space.release(lease))
    }

    async fn inspect(&self, name: Option<&str>) -> Result<Vec<LockState>> {
        Ok(self.space.inspect(name))
    }

    fn floor_op(&self) -> &'static str {
        "tokio::sync::Mutex lock+unlock"
    }

    async fn floor_round(&self) -> Result<()> {
        drop(self.space.floor.lock().await);
        Ok(())
    }
}

/// Connects `memory://` URLs.
#[derive(Debug)]
pub(crate) struct MemoryConnector;

#[async_trait]
impl Connector for MemoryConnector {
    fn schemes(&self) -> &'static [&'static str] {
        &["memory"]
    }

    async fn connect(&self, url: &Url) -> Result<Arc<dyn Backend>> {
        if url.path() != "" && url.path() != "/" || url.query().is_some() {
            return Err(Error::invalid(format!(
                "memory URLs take only a space name: memory:// or memory://NAME, not `{url}`"
            )));
        }
        Ok(Arc::new(MemoryBackend::shared(
            url.host_str().unwrap_or(""),
        )))
    }
}
