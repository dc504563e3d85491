//! Semaphores in the layout of Curator's `InterProcessSemaphoreV2`: a request queues as a
//! mutex contender in `<lock>/locks`; at the head of that queue it creates one lease node
//! per permit in `<lock>/leases` (`_c_<uuid>-lease-<seq>`) and is granted once the leases
//! number no more than the limit, giving up its place in `locks`. Until then it watches the
//! leases, and everyone behind it waits on the one ahead in `locks`.

use distlock_core::backend::{PollOutcome, Ticket};
use distlock_core::{Error, Result};
use zookeeper_client as zk;

use crate::backend::ZkBackend;
use crate::error::zk_error;
use crate::names;
use crate::nodes;
use crate::nodes::Live;
use crate::queue::QueueRead;
use crate::record::Record;
use crate::request::{Blocker, request_mut};
use crate::session::Doomed;

/// A semaphore request's poll (see the module docs); `limit` permits in all.
pub(crate) async fn poll(
    backend: &ZkBackend,
    ticket: &mut Ticket,
    limit: u32,
) -> Result<PollOutcome> {
    let node = backend.queue_node(ticket).await?;
    let (listing, _) = backend
        .queue_listing(ticket, &node, QueueRead::Plain)
        .await?;
    let queue = names::queue(&listing.children);
    let Some(index) = queue.iter().position(|c| c.name == node.name()) else {
        return backend.missing(ticket, &node).await;
    };
    let live = backend.sessions.slot.current()?;
    let permits = ticket.request.permits as usize;
    let name = ticket.request.name.clone();
    let request = request_mut(ticket)?;
    if let Some(ahead) = index.checked_sub(1).map(|i| &queue[i]) {
        request.blocker = Some(Blocker::Node(format!("{}/{}", request.dir, ahead.name)));
        return backend.pending(ticket).await;
    }
    let (leases_dir, prefix) = (request.leases_dir(), request.lease_prefix());
    if request.leases.is_empty() {
        check_use(&live, &request.dir, &leases_dir, &name, limit).await?;
    }
    while request.leases.len() < permits {
        let lease =
            nodes::create_protected(&live, &leases_dir, &prefix, &request.data, &request.leases)
                .await?;
        request.leases.push(lease);
    }
    let Some(last) = request.leases.last().cloned() else {
        return Err(
            Error::invalid("a semaphore request needs at least one permit")
                .with_backend("zookeeper"),
        );
    };
    // The last lease is stamped right behind the listing: if the listing grants, the stamp
    // is a fencing token above every one granted before.
    let (leases, stamp) =
        nodes::list_and_stamp(&live, &leases_dir, &last.path, &request.data).await?;
    if leases.children.len() > limit as usize {
        request.blocker = Some(Blocker::Children {
            dir: leases_dir,
            limit,
        });
        return backend.pending(ticket).await;
    }
    let token = match stamp {
        Some(stamp) => stamp,
        None => match nodes::stamp(&live, &last.path, &request.data).await? {
            Some(stamp) => stamp,
            // A lease node went (deleted by someone else, or with its session): the
            // request's leases are given up and made again. Its place at the head of the
            // queue is kept while its queue node lives (one gone with its session queues
            // again, at the end).
            None => {
                for lease in std::mem::take(&mut request.leases) {
                    if lease.session == live.id {
                        backend
                            .delete_surely(&live, Doomed::Node(lease.path))
                            .await?;
                    }
                }
                return Ok(PollOutcome::pending(Some(std::time::Duration::ZERO)));
            }
        },
    };
    // Granted: the place in the queue is given up, as Curator releases its mutex. A failure
    // here does not undo the grant; the place goes with the session at the latest.
    if let Err(err) = backend
        .delete_surely(&live, Doomed::Node(node.path.clone()))
        .await
    {
        tracing::warn!(error = %err, node = %node.path, "a semaphore's place in its queue is given up later");
    }
    request.node = None;
    for lease in &request.leases {
        request.watch_grant(&backend.sessions, lease.session, lease.path.clone(), None);
    }
    Ok(PollOutcome::granted_in_session(
        crate::queue::token_of(token)?,
        last.session,
    ))
}

/// Whether a lock node with these children is a semaphore's (its `locks` and `leases`).
pub(crate) fn is_semaphore(children: &[String]) -> bool {
    children.iter().any(|c| c == "leases" || c == "locks")
}

/// Refuses a semaphore request (`limit` permits) on lock `name` where the name is in use
/// as a lock (contenders beside `locks_dir`) or as a semaphore of another size (a lease
/// node of a distlock holder says so).
async fn check_use(
    live: &Live,
    locks_dir: &str,
    leases_dir: &str,
    name: &str,
    limit: u32,
) -> Result<()> {
    let lock = locks_dir.strip_suffix("/locks").unwrap_or(locks_dir);
    let beside = live
        .client
        .list_children(lock)
        .await
        .map_err(zk_error("poll"))?;
    if beside.iter().any(|c| names::contender(c).is_some()) {
        return Err(
            Error::invalid(format!("`{name}` is in use as a lock, not as a semaphore"))
                .with_backend("zookeeper"),
        );
    }
    let leases = match live.client.list_children(leases_dir).await {
        Err(zk::Error::NoNode) => return Ok(()),
        other => other.map_err(zk_error("poll"))?,
    };
    for lease in leases {
        let data = match live.client.get_data(&format!("{leases_dir}/{lease}")).await {
            Err(zk::Error::NoNode) => continue,
            other => other.map_err(zk_error("poll"))?.0,
        };
        if let Some(other) = Record::limit_of(&data).filter(|l| *l != limit) {
            return Err(Error::invalid(format!(
                "this semaphore is in use with {other} permits, not {limit}"
            ))
            .with_backend("zookeeper"));
        }
        return Ok(());
    }
    Ok(())
}
