//! The ZooKeeper backend: each request is an ephemeral sequential node under the lock's
//! node, granted when no contender ahead of it conflicts, waiting on the one node whose
//! deletion can let it go.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use distlock_core::backend::{
    Backend, Capabilities, Grant, LeaseOutcome, Liveness, LockState, PollOutcome, Session, Ticket,
    async_trait,
};
use distlock_core::{Error, ErrorKind, LockKind, Result};
use tokio::sync::watch;
use zookeeper_client as zk;

use crate::config::ZkConfig;
use crate::error::zk_error;
use crate::inspect;
use crate::names::{self, Contender};
use crate::record::Record;
use crate::session::{Live, Sessions};

/// How often a create is tried again when its parent vanished in between (a container
/// node the server deleted) or its outcome was unknown.
const CREATE_TRIES: usize = 5;

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
    sessions: Arc<Sessions>,
}

/// What a request's ticket (and, once granted, its grant) remembers.
#[derive(Debug)]
struct Request {
    /// Unique to the request, in its node's name: after a lost answer the node is found by
    /// it (Curator's protected create).
    uuid: String,
    /// The lock's node.
    dir: String,
    /// Its node, once created.
    node: Option<Node>,
    /// The node whose deletion may let it go, while it waits.
    blocker: Option<String>,
    /// Set, once granted, when its node is deleted (by anyone).
    gone: Arc<AtomicBool>,
}

/// A request's node.
#[derive(Debug, Clone)]
struct Node {
    path: String,
    /// The session it lives in.
    session: u64,
    /// The transaction that created it: the grant's fencing token.
    czxid: i64,
}

impl Request {
    fn prefix(&self, kind: LockKind) -> String {
        format!("{}/{}", self.dir, names::node_prefix(&self.uuid, kind))
    }
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
        let live = self.sessions.current();
        let config = self.sessions.config();
        let mut connector = zk::Client::connector()
            .with_session(live.client.session().clone())
            .with_session_timeout(config.session_timeout)
            .with_fail_eagerly();
        if let Some(digest) = &config.digest {
            connector = connector.with_auth("digest", digest.as_bytes());
        }
        let intruder = match connector.connect(hosts).await {
            Ok(intruder) => intruder,
            // Ended already.
            Err(zk::Error::SessionExpired) => return Ok(()),
            Err(err) => return Err(zk_error("close")(err)),
        };
        let mut state = intruder.state_watcher();
        drop(intruder);
        let closed = async { while !state.changed().await.is_terminated() {} };
        let bound = config.session_timeout + Duration::from_secs(5);
        tokio::time::timeout(bound, closed).await.map_err(|_| {
            Error::new(
                ErrorKind::Timeout,
                format!("the session was not closed within {bound:?}"),
            )
            .with_backend("zookeeper")
        })
    }

    fn base(&self) -> &str {
        &self.sessions.config().base
    }

    /// Creates the ticket's node in the current session, finding it by its unique prefix
    /// when the create's answer was lost.
    async fn create(&self, ticket: &mut Ticket) -> Result<()> {
        let live = self.sessions.current();
        let kind = ticket.request.kind;
        let data = Record::of(&ticket.request);
        let request = request_mut(ticket)?;
        let prefix = request.prefix(kind);
        let options = zk::CreateMode::EphemeralSequential.with_acls(zk::Acls::anyone_all());
        for _ in 0..CREATE_TRIES {
            match live.client.create(&prefix, &data, &options).await {
                Ok((stat, seq)) => {
                    request.node = Some(Node {
                        path: format!("{prefix}{seq}"),
                        session: live.id,
                        czxid: stat.czxid,
                    });
                    return Ok(());
                }
                Err(zk::Error::NoNode) => {
                    let parents = zk::CreateMode::Container.with_acls(zk::Acls::anyone_all());
                    live.client
                        .mkdir(&request.dir, &parents)
                        .await
                        .map_err(zk_error("create"))?;
                }
                Err(zk::Error::ConnectionLoss | zk::Error::Custom(_)) => {
                    if let Some(node) = find_own(&live, &request.dir, &prefix).await? {
                        request.node = Some(node);
                        return Ok(());
                    }
                }
                Err(err) => return Err(zk_error("create")(err)),
            }
        }
        Err(Error::new(
            ErrorKind::Unavailable,
            format!(
                "could not create a node under {} in {CREATE_TRIES} tries",
                request.dir
            ),
        )
        .with_backend("zookeeper")
        .temporary())
    }

    /// Deletes every node of the ticket's request (the one it knows, and any whose create's
    /// answer was lost), in the current session.
    async fn withdraw(&self, ticket: &mut Ticket) -> Result<()> {
        let live = self.sessions.current();
        let kind = ticket.request.kind;
        let Some(request) = ticket.state_mut::<Request>() else {
            return Ok(());
        };
        request.blocker = None;
        if let Some(node) = request.node.take() {
            if node.session == live.id {
                delete(&live, &node.path).await?;
            }
            return Ok(());
        }
        let prefix = request.prefix(kind);
        let children = match live.client.list_children(&request.dir).await {
            Err(zk::Error::NoNode | zk::Error::SessionExpired | zk::Error::ClientClosed) => {
                return Ok(());
            }
            other => other.map_err(zk_error("cancel"))?,
        };
        for child in children {
            let path = format!("{}/{child}", request.dir);
            if path.starts_with(&prefix) {
                delete(&live, &path).await?;
            }
        }
        Ok(())
    }
}

/// Watches a granted node until it is deleted (by its holder's release, or by someone
/// else: an operator, a forced release) or its session ends. A deletion marks the grant
/// `gone` and tells the core, which turns the guard `Lost` unless it was released.
async fn watch_own_node(sessions: Weak<Sessions>, live: Live, path: String, gone: Arc<AtomicBool>) {
    let deleted = match live.client.check_and_watch_stat(&path).await {
        Ok((None, _)) => true,
        Ok((Some(_), watcher)) => watcher.changed().await.event_type == zk::EventType::NodeDeleted,
        Err(_) => false,
    };
    if deleted {
        gone.store(true, Ordering::Release);
        if let Some(sessions) = sessions.upgrade() {
            sessions.announce_loss();
        }
    }
}

/// The backend state of `ticket`, which `enqueue` made.
fn request_mut(ticket: &mut Ticket) -> Result<&mut Request> {
    ticket.state_mut::<Request>().ok_or_else(|| {
        Error::new(
            ErrorKind::Backend,
            "a ZooKeeper ticket was polled before it was enqueued",
        )
        .with_backend("zookeeper")
    })
}

/// Deletes the node at `path`; gone already (or gone with its session) is fine.
async fn delete(live: &Live, path: &str) -> Result<()> {
    match live.client.delete(path, None).await {
        Ok(()) | Err(zk::Error::NoNode | zk::Error::SessionExpired | zk::Error::ClientClosed) => {
            Ok(())
        }
        Err(err) => Err(zk_error("delete")(err)),
    }
}

/// Our node under `dir` whose name starts with `prefix`, made in session `live`, if the
/// create whose answer was lost made it.
async fn find_own(live: &Live, dir: &str, prefix: &str) -> Result<Option<Node>> {
    let children = match live.client.list_children(dir).await {
        Err(zk::Error::NoNode) => return Ok(None),
        other => other.map_err(zk_error("create"))?,
    };
    for child in children {
        let path = format!("{dir}/{child}");
        if !path.starts_with(prefix) {
            continue;
        }
        if let Some(stat) = live
            .client
            .check_stat(&path)
            .await
            .map_err(zk_error("create"))?
        {
            if stat.ephemeral_owner == live.client.session_id().0 {
                return Ok(Some(Node {
                    path,
                    session: live.id,
                    czxid: stat.czxid,
                }));
            }
        }
    }
    Ok(None)
}

#[async_trait]
impl Backend for ZkBackend {
    fn scheme(&self) -> &'static str {
        "zookeeper"
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            semaphore: false,
            liveness: Liveness::Session,
            waiter_refresh: None,
            ..Capabilities::full(true)
        }
    }

    fn session(&self) -> Option<watch::Receiver<Session>> {
        Some(self.sessions.subscribe())
    }

    /// Creates the request's node. Its unique prefix is in the ticket before the create is
    /// sent, so a cancel finds the node even if this call is dropped halfway.
    async fn enqueue(&self, ticket: &mut Ticket) -> Result<()> {
        if matches!(ticket.request.kind, LockKind::Semaphore { .. }) {
            return Err(Error::new(
                ErrorKind::Unsupported,
                "the ZooKeeper backend has no semaphores yet",
            )
            .with_backend("zookeeper"));
        }
        ticket.set_state(Request {
            uuid: uuid::Uuid::new_v4().to_string(),
            dir: names::lock_path(self.base(), &ticket.request.name),
            node: None,
            blocker: None,
            gone: Arc::default(),
        });
        self.create(ticket).await
    }

    /// Lists the lock's contenders and grants the request when none ahead conflicts. A
    /// request whose node went with an expired session (or was deleted by hand while it
    /// waited) queues again with a new node.
    async fn poll(&self, ticket: &mut Ticket) -> Result<PollOutcome> {
        let live = self.sessions.current();
        let current = request_mut(ticket)?
            .node
            .as_ref()
            .is_some_and(|node| node.session == live.id);
        if !current {
            request_mut(ticket)?.node = None;
            self.create(ticket).await?;
        }
        let request = request_mut(ticket)?;
        let children = live
            .client
            .list_children(&request.dir)
            .await
            .map_err(zk_error("poll"))?;
        let queue = names::queue(&children);
        let node = request.node.clone().expect("created above");
        let own = node.path.rsplit('/').next().unwrap_or_default();
        let Some(index) = queue.iter().position(|c| c.name == own) else {
            // Deleted by someone else while it waited: queue again, at the end.
            request.node = None;
            return Ok(PollOutcome::Pending {
                retry_within: Some(Duration::ZERO),
            });
        };
        match names::blocker(&queue, index) {
            None => {
                tokio::spawn(watch_own_node(
                    Arc::downgrade(&self.sessions),
                    live,
                    node.path.clone(),
                    request.gone.clone(),
                ));
                Ok(PollOutcome::Granted {
                    fencing_token: node.czxid.max(0) as u64,
                    session: Some(node.session),
                })
            }
            Some(Contender { name, .. }) => {
                request.blocker = Some(format!("{}/{name}", request.dir));
                if !ticket.request.wait {
                    self.withdraw(ticket).await?;
                }
                Ok(PollOutcome::Pending { retry_within: None })
            }
        }
    }

    /// Watches the one node whose deletion may let the request go (no other waiter is
    /// woken by it), until it goes or the session ends.
    async fn wait_for_change(&self, ticket: &mut Ticket, backstop: Option<Duration>) -> Result<()> {
        let live = self.sessions.current();
        let Some(request) = ticket.state_mut::<Request>() else {
            return Ok(());
        };
        let (Some(blocker), Some(node)) = (request.blocker.take(), request.node.as_ref()) else {
            return Ok(());
        };
        if node.session != live.id {
            return Ok(());
        }
        let watcher = match live.client.check_and_watch_stat(&blocker).await {
            Ok((None, _)) => return Ok(()),
            Ok((Some(_), watcher)) => watcher,
            Err(err) => return Err(zk_error("wait")(err)),
        };
        let changed = watcher.changed();
        match backstop {
            Some(limit) => {
                let _ = tokio::time::timeout(limit, changed).await;
            }
            None => {
                changed.await;
            }
        }
        Ok(())
    }

    async fn cancel(&self, ticket: &mut Ticket) -> Result<()> {
        self.withdraw(ticket).await
    }

    /// Whether the grant's node was deleted while its session lived (found by the watch
    /// every grant sets on its own node).
    fn grant_lost(&self, grant: &Grant) -> bool {
        grant
            .state::<Request>()
            .is_some_and(|request| request.gone.load(Ordering::Acquire))
    }

    /// Never asked: grants live by the session.
    async fn renew_many(&self, grants: &[Grant], _ttl: Duration) -> Result<Vec<LeaseOutcome>> {
        Ok(vec![LeaseOutcome::Done; grants.len()])
    }

    async fn release(&self, grant: &Grant) -> Result<LeaseOutcome> {
        let live = self.sessions.current();
        let Some(node) = grant.state::<Request>().and_then(|r| r.node.as_ref()) else {
            return Ok(LeaseOutcome::NotHeld);
        };
        if node.session != live.id {
            return Ok(LeaseOutcome::NotHeld);
        }
        match live.client.delete(&node.path, None).await {
            Ok(()) => Ok(LeaseOutcome::Done),
            // The session ended, and the server deleted every node of it.
            Err(zk::Error::NoNode | zk::Error::SessionExpired | zk::Error::ClientClosed) => {
                Ok(LeaseOutcome::NotHeld)
            }
            Err(err) => Err(zk_error("release")(err)),
        }
    }

    async fn inspect(&self, name: Option<&str>) -> Result<Vec<LockState>> {
        let live = self.sessions.current();
        inspect::locks(&live.client, self.base(), name).await
    }

    fn floor_op(&self) -> &'static str {
        "create ephemeral-sequential + delete"
    }

    async fn floor_round(&self) -> Result<()> {
        let live = self.sessions.current();
        let options = zk::CreateMode::EphemeralSequential.with_acls(zk::Acls::anyone_all());
        let prefix = format!("{}/%floor-", self.base());
        let created = match live.client.create(&prefix, b"", &options).await {
            Err(zk::Error::NoNode) => {
                let parents = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
                live.client
                    .mkdir(self.base(), &parents)
                    .await
                    .map_err(zk_error("floor"))?;
                live.client.create(&prefix, b"", &options).await
            }
            other => other,
        };
        let (_, seq) = created.map_err(zk_error("floor"))?;
        delete(&live, &format!("{prefix}{seq}")).await
    }
}
