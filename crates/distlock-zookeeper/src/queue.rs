//! The queue of one lock: each request an ephemeral sequential node under the lock's node,
//! granted when no contender ahead of it conflicts, waiting on the one node whose deletion
//! can let it go (a semaphore's requests on the lease nodes, in `semaphore.rs`).

use std::time::Duration;

use distlock_core::backend::{HolderRecord, PollOutcome, Ticket};
use distlock_core::{Error, LockKind, Result};
use zookeeper_client as zk;

use crate::backend::ZkBackend;
use crate::error::zk_error;
use crate::names;
use crate::nodes::Live;
use crate::nodes::{self, Listing, Node};
use crate::request::{Blocker, Request, request_mut};
use crate::semaphore;
use crate::session::{Doomed, Sessions};

/// How a poll reads its queue when it has no listing from its create.
#[derive(Debug, Clone, Copy)]
pub(crate) enum QueueRead {
    /// A listing alone.
    Plain,
    /// A listing, and the request's node stamped right behind it when its wait has just
    /// ended because the node it waited for went (the grant is likely).
    Stamped,
}

impl ZkBackend {
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
    pub(crate) async fn poll_lock(&self, ticket: &mut Ticket) -> Result<PollOutcome> {
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
pub(crate) async fn wait_for(sessions: &Sessions, blocker: &Blocker) -> Result<bool> {
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
