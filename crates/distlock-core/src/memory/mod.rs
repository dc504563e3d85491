//! The memory backend: full lock semantics inside one process (TTL expiry, fairness,
//! fencing, read/write locks, semaphores), for tests, examples and single-process services.
//!
//! `memory://` is one lock space shared by every client in the process; `memory://NAME` is
//! a separate space per name. Fencing tokens do not survive the process. A space forgets a
//! name as soon as it has no holders and no waiters, so locking ever new names costs no
//! memory; tokens still increase, from one counter per space.
//!
//! Two kinds of liveness, so the core's two contracts each have a worked example:
//!
//! * **lease** (the default): every grant has a TTL, renewed by the core's watchdog, and
//!   lapses when its holder stops renewing.
//! * **session** (`memory://NAME?liveness=session`, or [`MemoryBackend::with_sessions`]):
//!   every client is a session; its grants and queue entries live until the session expires,
//!   nothing is renewed, and the test hook [`MemorySession`] suspends, resumes or expires it.
//!   `session_timeout=10s` sets how long a suspended session stays valid.

mod session;
mod space;

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex as StdMutex};
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::watch;
use url::Url;

use crate::backend::{
    Backend, Capabilities, Connector, Floor, Grant, HolderInfo, LeaseOutcome, Liveness, LockState,
    Note, PollOutcome, Session, Ticket, UrlParams,
};
use crate::error::{Error, Result};
pub use session::MemorySession;
use space::Space;

/// How long a suspended session stays valid unless the URL says otherwise.
const DEFAULT_SESSION_TIMEOUT: Duration = Duration::from_secs(10);

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
    session: Option<MemorySession>,
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
        Self::in_space(Arc::default(), None)
    }

    /// A client of `space`, in session mode when given a session timeout.
    fn in_space(space: Arc<Space>, session_timeout: Option<Duration>) -> Self {
        MemoryBackend {
            session: session_timeout.map(|timeout| MemorySession::new(space.clone(), timeout)),
            space,
        }
    }

    /// A backend in session mode with a private lock space: its grants live as long as its
    /// session, which stays valid `timeout` after it is suspended.
    ///
    /// # Examples
    ///
    /// See [`MemorySession`].
    pub fn with_sessions(timeout: Duration) -> Self {
        Self::in_space(Arc::default(), Some(timeout))
    }

    /// The test hook of this backend's session, in session mode.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> distlock_core::Result<()> {
    /// use std::any::Any;
    /// use distlock_core::{Client, MemoryBackend};
    ///
    /// let client = Client::connect("memory://hooked?liveness=session").await?;
    /// let backend: &dyn Any = distlock_core::backend::backend_of(&client).as_ref();
    /// let memory = backend.downcast_ref::<MemoryBackend>().expect("a memory backend");
    /// assert!(memory.session_control().is_some());
    /// # Ok(()) }
    /// ```
    pub fn session_control(&self) -> Option<MemorySession> {
        self.session.clone()
    }

    /// The session the backend's requests are made in, in session mode.
    fn session_id(&self) -> Option<u64> {
        self.session.as_ref().map(|s| s.current().id)
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
        Self::in_space(shared_space(name), None)
    }

    /// A client of the process-wide lock space `name` in session mode (see
    /// [`MemoryBackend::with_sessions`]).
    ///
    /// # Examples
    ///
    /// ```
    /// let backend = distlock_core::MemoryBackend::shared_with_sessions("tests", std::time::Duration::from_secs(5));
    /// assert!(backend.session_control().is_some());
    /// ```
    pub fn shared_with_sessions(name: &str, timeout: Duration) -> Self {
        Self::in_space(shared_space(name), Some(timeout))
    }
}

fn shared_space(name: &str) -> Arc<Space> {
    let mut spaces = SPACES.lock().unwrap_or_else(|p| p.into_inner());
    spaces.entry(name.to_owned()).or_default().clone()
}

#[async_trait]
impl Backend for MemoryBackend {
    fn scheme(&self) -> &'static str {
        "memory"
    }

    /// Its locks are data in this process, reached from any thread.
    fn calls_outlive_the_runtime(&self) -> bool {
        true
    }

    fn capabilities(&self) -> Capabilities {
        let full = Capabilities {
            durable_fencing: false,
            cross_process: false,
            adopt: true,
            ..Capabilities::full(true)
        };
        match self.session {
            None => full,
            Some(_) => Capabilities {
                liveness: Liveness::Session,
                detachable: false,
                adopt: false,
                waiter_refresh: None,
                ..full
            },
        }
    }

    fn session(&self) -> Option<watch::Receiver<Session>> {
        self.session.as_ref().map(MemorySession::subscribe)
    }

    async fn poll(&self, ticket: &mut Ticket) -> Result<PollOutcome> {
        // Cooperate like tokio's own primitives: a task that locks and unlocks in a tight
        // loop still lets the other tasks on its thread run.
        tokio::task::consume_budget().await;
        self.space.poll(ticket, self.session_id())
    }

    async fn wait_for_change(&self, ticket: &mut Ticket, backstop: Option<Duration>) -> Result<()> {
        self.space.wakers.wait(ticket, backstop).await;
        Ok(())
    }

    async fn cancel(&self, ticket: &mut Ticket) -> Result<()> {
        self.space.cancel(ticket);
        Ok(())
    }

    async fn renew_many(&self, grants: &[Grant], ttl: Duration) -> Result<Vec<LeaseOutcome>> {
        Ok(grants.iter().map(|g| self.space.renew(g, ttl)).collect())
    }

    async fn release(&self, grant: &Grant) -> Result<LeaseOutcome> {
        tokio::task::consume_budget().await;
        Ok(self.space.release(grant))
    }

    async fn inspect(&self, name: Option<&str>) -> Result<Vec<LockState>> {
        Ok(self.space.inspect(name))
    }

    async fn adopt(
        &self,
        handed: &Grant,
        fencing_token: u64,
        ticket: &mut Ticket,
    ) -> Result<PollOutcome> {
        match self.session {
            None => Ok(PollOutcome::granted(self.space.adopt(
                handed,
                fencing_token,
                ticket,
            )?)),
            Some(_) => Err(crate::backend::adopt_unsupported(
                self.scheme(),
                self.capabilities(),
            )),
        }
    }

    async fn force_release(
        &self,
        name: &str,
        fencing_token: Option<u64>,
    ) -> Result<Vec<HolderInfo>> {
        Ok(self.space.force_release(name, fencing_token))
    }

    /// The space's clock is the process's, which every client of the space shares.
    async fn write_note(
        &self,
        grant: &Grant,
        fencing_token: u64,
        value: &str,
        quiet_for: Option<Duration>,
    ) -> Result<Option<u64>> {
        self.space
            .write_note(grant, fencing_token, value, quiet_for)
    }

    async fn read_note(&self, name: &str) -> Result<Option<Note>> {
        Ok(self.space.read_note(name))
    }

    /// A grant gone from the space while its holder's client held on to it was broken
    /// (or has expired).
    fn grant_lost(&self, grant: &Grant) -> bool {
        !self.space.holds(grant)
    }

    fn floor(&self) -> Option<&dyn Floor> {
        Some(self)
    }
}

#[async_trait]
impl Floor for MemoryBackend {
    fn op(&self) -> &'static str {
        "tokio::sync::Mutex lock+unlock"
    }

    async fn round(&self) -> Result<()> {
        drop(self.space.floor.lock().await);
        Ok(())
    }
}

/// Connects `memory://` URLs.
#[derive(Debug)]
pub(crate) struct MemoryConnector;

/// Connects to any lock URL: through the connector registered for its scheme, or the memory
/// backend's, which every build has.
pub(crate) async fn connect_url(url: &str) -> Result<Arc<dyn Backend>> {
    crate::backend::connector::connect(url, &[&MemoryConnector]).await
}

#[async_trait]
impl Connector for MemoryConnector {
    fn schemes(&self) -> &'static [&'static str] {
        &["memory"]
    }

    async fn connect(&self, url: &Url) -> Result<Arc<dyn Backend>> {
        let refuse = |why: String| {
            Error::invalid(format!(
                "{why}; memory URLs are memory://[NAME][?liveness=lease|session&session_timeout=10s], not `{}`",
                crate::lock_url::redact_url(url.as_str())
            ))
        };
        if url.path() != "" && url.path() != "/" {
            return Err(refuse("a memory URL has no path".into()));
        }
        let mut params = UrlParams::of(url).map_err(|err| refuse(err.message().to_owned()))?;
        let sessions = match params.text("liveness").as_deref() {
            None | Some("lease") => false,
            Some("session") => true,
            Some(other) => {
                return Err(refuse(format!(
                    "liveness `{other}` is neither lease nor session"
                )));
            }
        };
        let timeout = match params.text("session_timeout") {
            None => None,
            Some(text) => match humantime::parse_duration(&text) {
                Ok(t) if !t.is_zero() => Some(t),
                _ => {
                    return Err(refuse(format!(
                        "session_timeout `{text}` is not a duration above zero"
                    )));
                }
            },
        };
        params
            .finish()
            .map_err(|err| refuse(err.message().to_owned()))?;
        if timeout.is_some() && !sessions {
            return Err(refuse("session_timeout applies to liveness=session".into()));
        }
        let space = url.host_str().unwrap_or("");
        Ok(Arc::new(match sessions {
            true => MemoryBackend::shared_with_sessions(
                space,
                timeout.unwrap_or(DEFAULT_SESSION_TIMEOUT),
            ),
            false => MemoryBackend::shared(space),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Client;

    #[tokio::test]
    async fn a_space_forgets_names_with_no_holders_or_waiters() {
        let backend = MemoryBackend::new();
        let mut last = 0;
        for n in 0..1_000_000u32 {
            let mut ticket = Ticket::new(crate::backend::LockRequest {
                name: format!("orders/{n}"),
                kind: crate::LockKind::Mutex,
                permits: 1,
                owner: crate::Owner::random(),
                token: n.to_string(),
                ttl: Duration::from_secs(30),
                fair: false,
                wait: n % 2 == 0,
                meta: crate::HolderMeta::this_process(),
            });
            backend.enqueue(&mut ticket).await.unwrap();
            let PollOutcome::Granted { fencing_token, .. } =
                backend.poll(&mut ticket).await.unwrap()
            else {
                panic!("a free name was not granted");
            };
            assert!(fencing_token > last, "tokens increase across names");
            last = fencing_token;
            let grant = ticket.into_grant();
            assert_eq!(backend.release(&grant).await.unwrap(), LeaseOutcome::Done);
        }
        assert_eq!(backend.space.remembered(), 0);
        let client = Client::with_backend(Arc::new(backend.clone()));
        client
            .mutex("last")
            .lock()
            .await
            .unwrap()
            .release()
            .await
            .unwrap();
        assert_eq!(backend.space.remembered(), 0);
    }
}
