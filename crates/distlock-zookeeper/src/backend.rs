//! The ZooKeeper backend: the store's side of distlock's contract, over one session at a
//! time, each lock a queue of nodes (`queue.rs`).

use std::sync::Arc;
use std::time::Duration;

use distlock_core::backend::{
    Backend, Capabilities, Floor, Grant, LeaseOutcome, Liveness, LockState, Note, PollOutcome,
    Session, Ticket, async_trait,
};
use distlock_core::{HolderInfo, LockKind, Result};
use tokio::sync::watch;

use crate::config::ZkConfig;
use crate::inspect;
use crate::names;
use crate::nodes;
use crate::notes;
use crate::queue::wait_for;
use crate::request::Request;
use crate::semaphore;
use crate::session::{Doomed, Sessions};

/// A distlock client's ZooKeeper backend: one session at a time (see the crate docs).
///
/// # Examples
///
/// ```no_run
/// # async fn demo() -> distlock_core::Result<()> {
/// use std::sync::Arc;
/// use distlock_zookeeper::{ZkBackend, ZkConfig};
///
/// let url = distlock_core::parse_lock_url("zk://127.0.0.1:2181/locks")?;
/// let backend = ZkBackend::open(ZkConfig::from_url(&url)?).await?;
/// let client = distlock_core::Client::with_backend(Arc::new(backend));
/// let guard = client.mutex("orders/42").lock().await?;
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct ZkBackend {
    pub(crate) sessions: Arc<Sessions>,
}

impl ZkBackend {
    /// Opens the first session (an unreachable ensemble fails at once) and keeps it.
    ///
    /// # Examples
    ///
    /// See [`ZkBackend`].
    pub async fn open(config: ZkConfig) -> Result<Self> {
        Ok(ZkBackend {
            sessions: Sessions::open(config).await?,
        })
    }

    /// Ends this client's current session from a second connection to `hosts` that joins
    /// it and closes it, as Curator's test utility `KillSession` does: on the server, what
    /// an expiry does (every node of the session goes). This client notices when it next
    /// reaches the server: every guard of the session turns `Lost`, and a new session serves
    /// later requests. For fault tests, which should cut this client's own link first:
    /// otherwise it may join the session again before the other connection closes it.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn demo(backend: &distlock_zookeeper::ZkBackend) -> distlock_core::Result<()> {
    /// backend.close_session_from("127.0.0.1:2181").await?;
    /// # Ok(()) }
    /// ```
    pub async fn close_session_from(&self, hosts: &str) -> Result<()> {
        self.sessions.close_from(hosts).await
    }

    fn base(&self) -> &str {
        &self.sessions.config().base
    }
}

#[async_trait]
impl Backend for ZkBackend {
    fn scheme(&self) -> &'static str {
        "zookeeper"
    }

    /// The lock's node, whose children are its contenders.
    fn place_of(&self, name: &str) -> Option<String> {
        Some(format!(
            "zookeeper node {}",
            names::lock_path(self.base(), name)
        ))
    }

    /// Its session, and every call, run on the ZooKeeper side runtime.
    fn calls_outlive_the_runtime(&self) -> bool {
        true
    }

    fn capabilities(&self) -> Capabilities {
        // Everything, by the session, each waiter woken by its own watch.
        let mut caps = Capabilities::full(true);
        caps.liveness = Liveness::Session;
        caps.detachable = false;
        caps.waiter_refresh = None;
        caps
    }

    fn session(&self) -> Option<watch::Receiver<Session>> {
        Some(self.sessions.slot.subscribe())
    }

    /// Watches on the lock's node and its note, set again each time they fire, kept while
    /// a receiver lives.
    fn lock_news(&self, name: &str) -> Option<watch::Receiver<u64>> {
        let dir = names::lock_path(self.base(), name);
        let note = notes::note_path(self.base(), name);
        let sessions = Arc::downgrade(&self.sessions);
        Some(crate::news::start(sessions, dir, note))
    }

    /// Prepares the request's state. Its first poll creates its queue node and lists the
    /// queue in one round trip; the node's unique prefix is in the ticket before the create
    /// is sent, so a cancel finds the node even if that poll is dropped halfway, and a poll
    /// that finds the store out of reach is retried like any other.
    async fn enqueue(&self, ticket: &mut Ticket) -> Result<()> {
        let lock = names::lock_path(self.base(), &ticket.request.name);
        ticket.set_state(Request::new(lock, &ticket.request));
        Ok(())
    }

    /// Lists the contenders and grants the request when none ahead conflicts (a semaphore:
    /// when its turn came and the leases leave room).
    async fn poll(&self, ticket: &mut Ticket) -> Result<PollOutcome> {
        match ticket.request.kind {
            LockKind::Semaphore { limit } => semaphore::poll(self, ticket, limit).await,
            _ => self.poll_lock(ticket).await,
        }
    }

    /// Watches the one node whose deletion may let the request go (no other waiter is
    /// woken by it), or a semaphore's leases, until it changes or the session ends.
    async fn wait_for_change(&self, ticket: &mut Ticket, backstop: Option<Duration>) -> Result<()> {
        let Some(live) = self.sessions.slot.live() else {
            return Ok(());
        };
        let Some(request) = ticket.state_mut::<Request>() else {
            return Ok(());
        };
        let in_session = request.node.as_ref().is_some_and(|n| n.session == live.id);
        let Some(blocker) = request.blocker.take().filter(|_| in_session) else {
            return Ok(());
        };
        // The watch does not keep the session open: a session this client ends must close.
        drop(live);
        let waited = wait_for(&self.sessions, &blocker);
        let freed = match backstop {
            Some(limit) => tokio::time::timeout(limit, waited)
                .await
                .unwrap_or(Ok(false))?,
            None => waited.await?,
        };
        // The next poll will likely grant: a reader's stamps its node in the same round trip.
        request.likely = freed;
        Ok(())
    }

    async fn cancel(&self, ticket: &mut Ticket) -> Result<()> {
        self.withdraw(ticket).await
    }

    fn grant_lost(&self, grant: &Grant) -> bool {
        Request::lost(grant)
    }

    /// Deletes the grant's node (a semaphore's lease nodes): not held if one was gone.
    async fn release(&self, grant: &Grant) -> Result<LeaseOutcome> {
        let Some(request) = grant.state::<Request>() else {
            return Ok(LeaseOutcome::NotHeld);
        };
        if let Some(node) = &request.node {
            self.sessions.unrecorded.forget(&node.path);
        }
        let Some(live) = self.sessions.slot.live() else {
            return Ok(LeaseOutcome::NotHeld);
        };
        // The deletion below is this release's, not a loss to report.
        request.gone.releasing();
        let held = match grant.kind {
            LockKind::Semaphore { .. } => request.leases.iter().collect::<Vec<_>>(),
            _ => request.node.iter().collect(),
        };
        // A session past its validity is being ended, and its nodes with it.
        let valid = self.sessions.slot.is_valid(live.id);
        if !valid || held.is_empty() || held.iter().any(|n| n.session != live.id) {
            return Ok(LeaseOutcome::NotHeld);
        }
        let mut all_there = true;
        let mut failed = None;
        for node in held {
            // Every lease is deleted, even after one failed.
            match self
                .delete_surely(&live, Doomed::Node(node.path.clone()))
                .await
            {
                Ok(there) => all_there &= there,
                Err(err) => failed = Some(err),
            }
        }
        if let Some(err) = failed {
            return Err(err);
        }
        Ok(match all_there {
            true => LeaseOutcome::Done,
            false => LeaseOutcome::NotHeld,
        })
    }

    async fn inspect(&self, name: Option<&str>) -> Result<Vec<LockState>> {
        let live = self.sessions.slot.current()?;
        inspect::locks(&live.client, &self.sessions.unrecorded, self.base(), name).await
    }

    /// A note's time and quiet window are the leader's clock (its nodes' `mtime`).
    async fn write_note(
        &self,
        grant: &Grant,
        fencing_token: u64,
        value: &str,
        quiet_for: Option<Duration>,
    ) -> Result<Option<u64>> {
        let live = self.sessions.slot.current()?;
        notes::write(&live, self.base(), grant, fencing_token, value, quiet_for).await
    }

    async fn read_note(&self, name: &str) -> Result<Option<Note>> {
        let live = self.sessions.slot.current()?;
        notes::read(&live, self.base(), name).await
    }

    /// Deletes the nodes of the matching holders (a semaphore holder's lease nodes, all of
    /// them), each only if it was not written since it was read (a waiter's node stamped
    /// with its token as it was granted is another grant). ZooKeeper's transaction id moves
    /// on with each deletion, so every later
    /// grant's token is above the broken one's: there is no counter to bump. The broken
    /// holder's client sees its node deleted, as after an operator's `delete`.
    async fn force_release(
        &self,
        name: &str,
        fencing_token: Option<u64>,
    ) -> Result<Vec<HolderInfo>> {
        let live = self.sessions.slot.current()?;
        let dir = names::lock_path(self.base(), name);
        let unrecorded = &self.sessions.unrecorded;
        let Some((state, held)) =
            inspect::lock(&live.client, unrecorded, &dir, name.to_owned()).await?
        else {
            return Ok(vec![]);
        };
        let mut broken = Vec::new();
        for (holder, grant_nodes) in state.holders.into_iter().zip(held) {
            if fencing_token.is_some_and(|token| token != holder.fencing_token) {
                continue;
            }
            let mut deleted = false;
            for (node, version) in &grant_nodes {
                deleted |= nodes::delete_at(&live, node, *version).await?;
            }
            if deleted {
                broken.push(holder);
            }
        }
        Ok(broken)
    }

    fn floor(&self) -> Option<&dyn Floor> {
        Some(self)
    }
}

#[async_trait]
impl Floor for ZkBackend {
    fn op(&self) -> &'static str {
        "create ephemeral-sequential + delete"
    }

    async fn round(&self) -> Result<()> {
        let live = self.sessions.slot.current()?;
        let prefix = format!("{}/%floor-", self.base());
        let node = nodes::create_protected(&live, self.base(), &prefix, b"", &[]).await?;
        nodes::delete(&live, &node.path).await.map(drop)
    }
}
