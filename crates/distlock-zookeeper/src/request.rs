//! What a request's ticket (and, once granted, its grant) remembers of its nodes.

use std::sync::{Arc, Weak};
use std::time::Duration;

use distlock_core::backend::{
    EntryWatch, Grant, HolderRecord, LockRequest, LossFlag, LossWatch, Ticket, until_done,
    watch_entry,
};
use distlock_core::{Error, ErrorKind, LockKind, Result};
use zookeeper_client as zk;

use crate::error::zk_error;
use crate::names;
use crate::nodes::{self, Listing, Node};
use crate::session::Sessions;

/// A request's state.
#[derive(Debug)]
pub(crate) struct Request {
    /// Unique to the request, in its nodes' names: after a lost answer a node is found by
    /// it (Curator's protected create).
    pub(crate) uuid: String,
    /// Where its queue node goes: the lock's node, or a semaphore's `locks` child.
    pub(crate) dir: String,
    /// What its nodes hold: the request's record, written once for all its creates and
    /// stamps.
    pub(crate) data: Vec<u8>,
    /// Its queue node, once created.
    pub(crate) node: Option<Node>,
    /// A semaphore's lease nodes, one per permit, once created.
    pub(crate) leases: Vec<Node>,
    /// What it waits for.
    pub(crate) blocker: Option<Blocker>,
    /// The children of `dir` listed together with the create of its queue node, for the
    /// first poll.
    pub(crate) listing: Option<Listing>,
    /// Whether its last wait ended because what it waited for went: its next poll will
    /// likely grant, and a reader's stamps its node in the same round trip.
    pub(crate) likely: bool,
    /// Whether a create of its queue node may have been made without its answer (lost, or
    /// dropped halfway): the next one first looks for it by its prefix.
    pub(crate) unsure: bool,
    /// Set, once granted, when a node of the grant is deleted (by anyone).
    pub(crate) gone: LossFlag,
}

/// What a waiting request waits for.
#[derive(Debug, Clone)]
pub(crate) enum Blocker {
    /// The deletion of this node.
    Node(String),
    /// A change among the children of `dir` (a semaphore's leases) that leaves no more
    /// than `limit` of them.
    Children { dir: String, limit: u32 },
}

impl Request {
    /// State for `request`, on the lock whose node is `lock`.
    pub(crate) fn new(lock: String, request: &LockRequest) -> Request {
        let dir = match request.kind {
            LockKind::Semaphore { .. } => format!("{lock}/locks"),
            _ => lock,
        };
        Request {
            uuid: uuid::Uuid::new_v4().to_string(),
            dir,
            data: HolderRecord::encode(request),
            node: None,
            leases: Vec::new(),
            blocker: None,
            listing: None,
            likely: false,
            unsure: false,
            gone: LossFlag::default(),
        }
    }

    /// The path prefix of its queue node.
    pub(crate) fn prefix(&self, kind: LockKind) -> String {
        format!("{}/{}", self.dir, names::node_prefix(&self.uuid, kind))
    }

    /// A semaphore's `leases` node (beside `locks`).
    pub(crate) fn leases_dir(&self) -> String {
        let lock = self.dir.strip_suffix("/locks").unwrap_or(&self.dir);
        format!("{lock}/leases")
    }

    /// The path prefix of its lease nodes.
    pub(crate) fn lease_prefix(&self) -> String {
        format!("{}/_c_{}-lease-", self.leases_dir(), self.uuid)
    }

    /// Whether a node of the grant was deleted while its session lived.
    pub(crate) fn lost(grant: &Grant) -> bool {
        grant
            .state::<Request>()
            .is_some_and(|request| request.gone.is_lost())
    }

    /// Watches `path`, a node of this grant made in session `session`, until it is deleted
    /// (by its holder's release, or by someone else: an operator, a forced release) or the
    /// session ends. A deletion marks the grant gone and tells the core, which turns the
    /// guard `Lost` unless it was released. The watch is set shortly after the grant,
    /// and only if the grant still exists then, so a short hold costs the server
    /// nothing more; a node deleted in the meantime is found gone when it is set. It is set
    /// again after a failure to set it, as long as the session and the grant last.
    ///
    /// `record`, if any, is written to the node beside the watch, once the grant has lasted
    /// [`RECORD_AFTER`]: a mutex's or writer's record with its fencing token, for `status`.
    /// Written at once, it would stand between the grant and the release of a short hold
    /// (the release's delete comes after it in the session), for no reader.
    pub(crate) fn watch_grant(
        &self,
        sessions: &Arc<Sessions>,
        session: u64,
        path: String,
        record: Option<Vec<u8>>,
    ) {
        let (sessions, gone) = (Arc::downgrade(sessions), self.gone.watch());
        crate::runtime::SESSIONS.spawn(async move {
            let recorded = async {
                if let Some(record) = &record {
                    write_record(&sessions, session, &path, record, &gone).await;
                }
            };
            let watched = watch_node(sessions.clone(), session, path.clone(), gone.clone());
            tokio::join!(recorded, watched);
        });
    }
}

/// How long a grant lasts before its record with its fencing token is written.
const RECORD_AFTER: Duration = Duration::from_millis(10);

/// Writes `record` to `path`, a grant's node in `session`, once the grant has lasted
/// [`RECORD_AFTER`] and while it is held: made again after a failure (a lost connection
/// the session survives, a server that throttles), given up when the session is gone. A
/// node found gone is a loss to report: the grant's node was deleted by someone else —
/// possibly before the grant, which a member that had not yet applied the deletion
/// decided (its token is then below the next holder's, whose grant came after the
/// deletion).
async fn write_record(
    sessions: &Weak<Sessions>,
    session: u64,
    path: &str,
    record: &[u8],
    gone: &LossWatch,
) {
    tokio::time::sleep(RECORD_AFTER).await;
    // Whether the node was found gone.
    let attempt = || async {
        let Some(live) = sessions.upgrade().and_then(|s| s.slot.live()) else {
            return Ok(false);
        };
        if live.id != session {
            return Ok(false);
        }
        match live.client.set_data(path, record, None).await {
            Ok(_) => Ok(false),
            Err(zk::Error::NoNode) => Ok(true),
            Err(zk::Error::SessionExpired | zk::Error::ClientClosed | zk::Error::AuthFailed) => {
                Ok(false)
            }
            Err(err) => Err(zk_error("record a grant")(err)),
        }
    };
    if !gone.is_held() {
        return;
    }
    let found_gone = until_done("record a grant's token", || gone.is_held(), attempt).await;
    if let (Some(true), Some(sessions)) = (found_gone, sessions.upgrade()) {
        gone.report(&sessions.slot);
    }
}

/// Watches `path`, a grant's node in `session`, until it is deleted (a loss to report),
/// the grant is released, or the session ends (which loses the grant through the session
/// channel).
async fn watch_node(sessions: Weak<Sessions>, session: u64, path: String, gone: LossWatch) {
    let watched = sessions.clone();
    let deleted = watch_entry(gone.clone(), move || {
        watch_once(watched.clone(), session, path.clone())
    })
    .await;
    if let Some(sessions) = sessions.upgrade().filter(|_| deleted) {
        gone.report(&sessions.slot);
    }
}

/// One watch on `path`, a grant's node in `session`: what it saw.
async fn watch_once(sessions: Weak<Sessions>, session: u64, path: String) -> EntryWatch {
    let Some(live) = sessions.upgrade().and_then(|s| s.slot.live()) else {
        return EntryWatch::Over;
    };
    if live.id != session {
        return EntryWatch::Over;
    }
    let watched = nodes::watch(&live, &path).await;
    // The watch does not keep the session open: a session this client ends must close.
    drop(live);
    match watched {
        Ok(None) => EntryWatch::Deleted,
        Ok(Some(watcher)) => match watcher.changed().await.event_type {
            zk::EventType::NodeDeleted => EntryWatch::Deleted,
            zk::EventType::Session => EntryWatch::Over,
            _ => EntryWatch::Again,
        },
        Err(zk::Error::SessionExpired | zk::Error::ClientClosed | zk::Error::AuthFailed) => {
            EntryWatch::Over
        }
        Err(_) => EntryWatch::Failed,
    }
}

/// The backend state of `ticket`, which `enqueue` made.
pub(crate) fn request_mut(ticket: &mut Ticket) -> Result<&mut Request> {
    ticket.state_mut::<Request>().ok_or_else(|| {
        Error::new(
            ErrorKind::Backend,
            "a ZooKeeper ticket was polled before it was enqueued",
        )
        .with_backend("zookeeper")
    })
}
