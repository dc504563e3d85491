//! The ZooKeeper backend: each request is an ephemeral sequential node under the lock's
//! node, granted when no contender ahead of it conflicts, waiting on the one node whose
//! deletion can let it go.

use std::sync::Arc;
use std::time::Duration;

use distlock_core::backend::{
    Backend, Capabilities, Floor, Grant, HolderRecord, LeaseOutcome, LockState, PollOutcome,
    Session, Ticket, async_trait,
};
use distlock_core::{Error, HolderInfo, LockKind, Result};
use tokio::sync::watch;
use zookeeper_client as zk;

use crate::config::ZkConfig;
use crate::error::zk_error;
use crate::inspect;
use crate::names;
use crate::nodes::{self, Listing, Node};
use crate::request::{Blocker, Request, request_mut};
use crate::semaphore;
use crate::session::{Doomed, Live, Sessions};

/// How a poll reads its queue when it has no listing from its create.
#[derive(Debug, Clone, Copy)]
pub(crate) enum QueueRead {
    /// A listing alone.
    Plain,
    /// A listing, and the request's node stamped right behind it when its wait has just
    /// ended because the node it waited for went (the grant is likely).
    Stamped,
}

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

    /// Makes sure the ticket has its queue node in the current session: a request whose
    /// node went with an expired session (or was deleted by hand while it waited) queues
    /// again with a new one, as does one whose first create failed.
    pub(crate) async fn queue_node(&self, ticket: &mut Ticket) -> Result<Node> {
        let live = self.sessions.slot.current()?;
        let kind = ticket.request.kind;
        let request = request_mut(ticket)?;
        if let Some(node) = request.node.as_ref().filter(|n| n.session == live.id) {
            return Ok(node.clone());
        }
        // A node of an ended session went with it; one whose create was dropped or lost
        // halfway is found by its prefix (here, or by a cancel).
        request.node = None;
        if request.leases.iter().any(|lease| lease.session != live.id) {
            request.leases.clear();
        }
        let prefix = request.prefix(kind);
        if request.unsure
            && let Some(node) = nodes::find_own(&live, &request.dir, &prefix).await?
        {
            request.unsure = false;
            request.node = Some(node.clone());
            return Ok(node);
        }
        request.unsure = true;
        let (node, listing) =
            nodes::create_and_list(&live, &request.dir, &prefix, &request.data).await?;
        request.unsure = false;
        request.node = Some(node.clone());
        request.listing = listing;
        Ok(node)
    }

    /// The ticket's queue directory: listed with its create, the first time; else read now
    /// as `read` says (with the stamp, if one was made).
    pub(crate) async fn queue_listing(
        &self,
        ticket: &mut Ticket,
        node: &Node,
        read: QueueRead,
    ) -> Result<(Listing, Option<i64>)> {
        let request = request_mut(ticket)?;
        if let Some(listing) = request.listing.take() {
            return Ok((listing, None));
        }
        let live = self.sessions.slot.current()?;
        match read {
            QueueRead::Stamped if std::mem::take(&mut request.likely) => {
                nodes::list_and_stamp(&live, &request.dir, &node.path, &request.data).await
            }
            _ => Ok((nodes::list(&live, &request.dir).await?, None)),
        }
    }

    /// A queue node missing from its directory's listing: deleted by someone else while it
    /// waited (it queues again, at the end), or not yet in a listing made before it (it
    /// stays). Either way the request polls again at once.
    pub(crate) async fn missing(&self, ticket: &mut Ticket, node: &Node) -> Result<PollOutcome> {
        let live = self.sessions.slot.current()?;
        let exists = live
            .client
            .check_stat(&node.path)
            .await
            .map_err(zk_error("poll"))?
            .is_some();
        if !exists {
            request_mut(ticket)?.node = None;
        }
        Ok(PollOutcome::pending(Some(Duration::ZERO)))
    }

    /// Deletes every node of the ticket's request in the current session: the ones it
    /// knows, and any whose create's answer was lost.
    pub(crate) async fn withdraw(&self, ticket: &mut Ticket) -> Result<()> {
        // With no session open, the nodes went (or go) with the one that ended.
        let Some(live) = self.sessions.slot.live() else {
            return Ok(());
        };
        let kind = ticket.request.kind;
        let Some(request) = ticket.state_mut::<Request>() else {
            return Ok(());
        };
        request.blocker = None;
        let mut doomed = Vec::new();
        let leases = std::mem::take(&mut request.leases);
        doomed.extend(
            leases
                .into_iter()
                .filter(|l| l.session == live.id)
                .map(|l| Doomed::Node(l.path)),
        );
        if matches!(kind, LockKind::Semaphore { .. }) {
            doomed.push(Doomed::Prefix {
                dir: request.leases_dir(),
                prefix: request.lease_prefix(),
            });
        }
        if let Some(node) = &request.node {
            // Withdrawn after its grant, when the core turned it away (made in a session
            // that ended meanwhile).
            self.sessions.unrecorded.forget(&node.path);
        }
        match request.node.take() {
            Some(node) if node.session == live.id => doomed.push(Doomed::Node(node.path)),
            Some(_) => {}
            None => doomed.push(Doomed::Prefix {
                dir: request.dir.clone(),
                prefix: request.prefix(kind),
            }),
        }
        for what in doomed {
            self.delete_surely(&live, what).await?;
        }
        Ok(())
    }

    /// Deletes `what` now; if that gets no answer (or this call is dropped halfway), once
    /// the session answers again, the error still being returned. True if a node was there.
    pub(crate) async fn delete_surely(&self, live: &Live, what: Doomed) -> Result<bool> {
        let note = self.sessions.pending.note(live.id, what.clone());
        let deleted = match &what {
            Doomed::Node(path) => nodes::delete(live, path).await,
            Doomed::Prefix { dir, prefix } => nodes::delete_with_prefix(live, dir, prefix)
                .await
                .map(|()| true),
        };
        if !deleted.as_ref().is_err_and(Error::is_temporary) {
            note.done();
        }
        deleted
    }

    /// A lock's poll: granted when no contender ahead conflicts.
    async fn poll_lock(&self, ticket: &mut Ticket) -> Result<PollOutcome> {
        let node = self.queue_node(ticket).await?;
        let exclusive = ticket.request.kind.is_exclusive();
        // A mutex's or writer's fencing token is the listing's `pzxid`; a reader's is a
        // write to its node after the listing, sent in the same round trip when the grant
        // is likely (see the crate docs).
        let read = match exclusive {
            true => QueueRead::Plain,
            false => QueueRead::Stamped,
        };
        let (listing, stamp) = self.queue_listing(ticket, &node, read).await?;
        let children = &listing.children;
        if semaphore::is_semaphore(children) {
            return Err(Error::invalid(format!(
                "`{}` is in use as a semaphore, not as a {}",
                ticket.request.name,
                ticket.request.kind.as_str()
            ))
            .with_backend("zookeeper"));
        }
        let queue = names::queue(children);
        let Some(index) = queue.iter().position(|c| c.name == node.name()) else {
            return self.missing(ticket, &node).await;
        };
        if let Some(ahead) = names::blocker(&queue, index) {
            let request = request_mut(ticket)?;
            request.blocker = Some(Blocker::Node(format!("{}/{}", request.dir, ahead.name)));
            return self.pending(ticket).await;
        }
        let mut record = None;
        let token = match stamp {
            Some(stamp) => stamp,
            None if exclusive => {
                // The listing's `pzxid`, the transaction that last changed the queue (see
                // the crate docs): no write stands between the end of the wait and the
                // grant. `status` shows a node's creation unless its record says otherwise.
                let token = listing.pzxid.max(node.czxid);
                if token != node.czxid {
                    let token = token_of(token)?;
                    record = Some(HolderRecord::encode_granted(&ticket.request, token));
                    let live = self.sessions.slot.live().map_or(node.session, |l| l.id);
                    self.sessions
                        .unrecorded
                        .note(&node.path, node.session, token, live);
                }
                token
            }
            None => {
                let live = self.sessions.slot.current()?;
                match nodes::stamp(&live, &node.path, &request_mut(ticket)?.data).await? {
                    Some(stamp) => stamp,
                    // Gone since the listing (with its session, or deleted by someone
                    // else): it queues again.
                    None => return self.missing(ticket, &node).await,
                }
            }
        };
        request_mut(ticket)?.watch_grant(&self.sessions, node.session, node.path.clone(), record);
        Ok(PollOutcome::granted_in_session(
            token_of(token)?,
            node.session,
        ))
    }

    /// A request that must wait: a waiting one keeps its nodes; one that does not wait
    /// leaves nothing behind.
    pub(crate) async fn pending(&self, ticket: &mut Ticket) -> Result<PollOutcome> {
        if !ticket.request.wait {
            self.withdraw(ticket).await?;
        }
        Ok(PollOutcome::pending(None))
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
        let mut caps = Capabilities::session();
        caps.rwlock = true;
        caps.semaphore = true;
        caps.fair = true;
        caps.fencing = true;
        caps.durable_fencing = true;
        caps.push_wakeups = true;
        caps.force_release = true;
        caps
    }

    fn session(&self) -> Option<watch::Receiver<Session>> {
        Some(self.sessions.slot.subscribe())
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

/// A zxid as a fencing token; a negative one (an invalid answer) is refused.
pub(crate) fn token_of(zxid: i64) -> Result<u64> {
    u64::try_from(zxid).map_err(|_| {
        Error::new(
            distlock_core::ErrorKind::Backend,
            format!("ZooKeeper answered the invalid transaction id {zxid}"),
        )
        .with_backend("zookeeper")
    })
}

/// Waits until `blocker` lets its waiter go or its session ends: true when the node it
/// waited for was deleted, or the leases left room. A change that is not one of those (a
/// write to a node watched with `exists`, a change among the leases that leaves no room)
/// sets the watch again instead of waking the waiter.
async fn wait_for(sessions: &Sessions, blocker: &Blocker) -> Result<bool> {
    loop {
        let Some(live) = sessions.slot.live() else {
            return Ok(false);
        };
        let watcher = match blocker {
            Blocker::Node(path) => match nodes::watch(&live, path).await {
                Ok(None) => return Ok(true),
                Ok(Some(watcher)) => watcher,
                Err(err) => return Err(zk_error("wait")(err)),
            },
            Blocker::Children { dir, limit } => {
                match live.client.list_and_watch_children(dir).await {
                    // Room already (a permit went back between the poll and this watch).
                    Ok((children, _)) if children.len() <= *limit as usize => return Ok(true),
                    Ok((_, watcher)) => watcher,
                    Err(zk::Error::NoNode) => return Ok(true),
                    Err(err) => return Err(zk_error("wait")(err)),
                }
            }
        };
        // The watch does not keep the session open: a session this client ends must close.
        drop(live);
        match watcher.changed().await.event_type {
            zk::EventType::NodeChildrenChanged | zk::EventType::NodeDataChanged => continue,
            zk::EventType::Session => return Ok(false),
            _ => return Ok(true),
        }
    }
}
