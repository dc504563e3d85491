//! The memory backend's session mode: each client is a session whose grants and queue
//! entries live until the session expires, and a test hook moves the session through its
//! states as a ZooKeeper or etcd client's would move.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use super::space::Space;
use crate::backend::deadline::far_future;
use crate::backend::safe_deadline;
use crate::backend::{Session, SessionState};

/// Session numbers, unique in the process, so that the entries of one session are told
/// apart from every other's in a shared space.
static NEXT_SESSION: AtomicU64 = AtomicU64::new(1);

/// The test hook of a memory client in session mode: suspend, resume or expire its session
/// the way a network fault or a server would.
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> distlock_core::Result<()> {
/// use std::sync::Arc;
/// use std::time::Duration;
/// use distlock_core::{Client, Health, MemoryBackend};
///
/// let backend = MemoryBackend::with_sessions(Duration::from_secs(10));
/// let session = backend.session_control().expect("session mode");
/// let client = Client::with_backend(Arc::new(backend));
/// let guard = client.mutex("a").lock().await?;
/// session.suspend();
/// tokio::task::yield_now().await;
/// assert_eq!(guard.health(), Health::AtRisk);
/// session.expire();
/// guard.lost().await;
/// assert_eq!(guard.health(), Health::Lost);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct MemorySession {
    inner: Arc<SessionInner>,
}

#[derive(Debug)]
struct SessionInner {
    space: Arc<Space>,
    sender: Arc<watch::Sender<Session>>,
    timeout: Duration,
}

impl MemorySession {
    pub(super) fn new(space: Arc<Space>, timeout: Duration) -> Self {
        let (sender, _) = watch::channel(Session {
            id: NEXT_SESSION.fetch_add(1, Ordering::Relaxed),
            state: connected(),
        });
        let sender = Arc::new(sender);
        space.register_session(&sender);
        MemorySession {
            inner: Arc::new(SessionInner {
                space,
                sender,
                timeout,
            }),
        }
    }

    pub(super) fn subscribe(&self) -> watch::Receiver<Session> {
        self.inner.sender.subscribe()
    }

    /// The session now.
    pub(super) fn current(&self) -> Session {
        *self.inner.sender.borrow()
    }

    /// Contact with the "server" is lost: every grant turns `AtRisk`, and `Lost` once the
    /// session timeout (less drift and margin) has passed without [`MemorySession::resume`].
    /// The grants stay in the space until [`MemorySession::expire`], as a real server keeps
    /// them until it expires the session.
    ///
    /// # Examples
    ///
    /// See [`MemorySession`].
    pub fn suspend(&self) {
        let now = Instant::now();
        let valid_until = safe_deadline(now, self.inner.timeout);
        self.inner
            .sender
            .send_if_modified(|session| match session.state {
                SessionState::Connected { .. } => {
                    session.state = SessionState::Suspended {
                        since: now,
                        valid_until,
                    };
                    true
                }
                _ => false,
            });
    }

    /// Contact is back within the session timeout: the session is connected again.
    ///
    /// # Examples
    ///
    /// ```
    /// let backend = distlock_core::MemoryBackend::with_sessions(std::time::Duration::from_secs(1));
    /// let session = backend.session_control().unwrap();
    /// session.suspend();
    /// session.resume();
    /// ```
    pub fn resume(&self) {
        self.inner
            .sender
            .send_if_modified(|session| match session.state {
                SessionState::Suspended { .. } => {
                    session.state = connected();
                    true
                }
                _ => false,
            });
    }

    /// The "server" expires the session: its grants and queue entries are deleted (waiters
    /// behind them are granted), every guard of it turns `Lost`, and a new session serves
    /// the client's later requests.
    ///
    /// # Examples
    ///
    /// See [`MemorySession`].
    pub fn expire(&self) {
        let ended = self.current().id;
        self.inner.sender.send_modify(|session| {
            session.state = SessionState::Expired;
        });
        self.inner.space.drop_session(ended);
        self.inner.sender.send_modify(|session| {
            session.id = NEXT_SESSION.fetch_add(1, Ordering::Relaxed);
            session.state = connected();
        });
    }
}

/// Connected to the in-process "server": valid for good, in effect.
fn connected() -> SessionState {
    SessionState::Connected {
        valid_until: far_future(),
    }
}
