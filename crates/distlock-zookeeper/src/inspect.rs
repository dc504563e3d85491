//! `distlock status` on ZooKeeper: holders and waiters read from the contenders' nodes,
//! Curator's and kazoo's too.

use distlock_core::Result;
use distlock_core::backend::{HolderInfo, LockState};
use zookeeper_client as zk;

use crate::error::zk_error;
use crate::names;
use crate::record::Record;
use crate::record::Unrecorded;
use crate::semaphore::is_semaphore;

/// The most nodes one `status` of every lock visits under the base.
const MAX_VISITED: usize = 10_000;

/// The state of lock `name`, or of every lock under `base` with contenders.
pub(crate) async fn locks(
    client: &zk::Client,
    unrecorded: &Unrecorded,
    base: &str,
    name: Option<&str>,
) -> Result<Vec<LockState>> {
    match name {
        Some(name) => Ok(vec![
            lock(
                client,
                unrecorded,
                &names::lock_path(base, name),
                name.to_owned(),
            )
            .await?
            .map_or_else(|| LockState::new(name), |(state, _)| state),
        ]),
        None => {
            let mut states = Vec::new();
            let mut pending = vec![base.to_owned()];
            let mut visited = 0;
            while let Some(dir) = pending.pop() {
                visited += 1;
                if visited > MAX_VISITED {
                    break;
                }
                let children = match client.list_children(&dir).await {
                    Err(zk::Error::NoNode) => continue,
                    other => other.map_err(zk_error("inspect"))?,
                };
                // Every child of the base is a lock's node (or on the way to one), whatever
                // its name; below a lock's node, its contenders and a semaphore's `locks`
                // and `leases` are the lock's own (no lock's node is named so there), and
                // any other child leads to more locks.
                let below_base = dir != base;
                let semaphore = below_base && is_semaphore(&children);
                let contended = semaphore || children.iter().any(|c| names::contender(c).is_some());
                if below_base
                    && contended
                    && let Some(name) = names::lock_name(base, &dir)
                    && let Some((state, _)) = lock(client, unrecorded, &dir, name).await?
                {
                    states.push(state);
                }
                pending.extend(
                    children
                        .iter()
                        .filter(|c| !below_base || names::contender(c).is_none())
                        .filter(|c| !semaphore || (c.as_str() != "locks" && c.as_str() != "leases"))
                        .map(|c| format!("{dir}/{c}")),
                );
            }
            states.sort_by(|a, b| a.name.cmp(&b.name));
            Ok(states)
        }
    }
}

/// The children of `dir`; none if it does not exist.
async fn children_of(client: &zk::Client, dir: &str) -> Result<Vec<String>> {
    match client.list_children(dir).await {
        Err(zk::Error::NoNode) => Ok(Vec::new()),
        other => other.map_err(zk_error("inspect")),
    }
}

/// A node that makes (part of) a grant: its path and the version read.
pub(crate) type GrantNode = (String, i32);

/// The nodes that make each holder's grant, in the order of the state's holders.
pub(crate) type HeldNodes = Vec<Vec<GrantNode>>;

/// The state of the lock whose node is `dir`, and its holders' nodes; `None` if it has no
/// contenders. This client's own holders show their tokens though their records do not
/// yet.
pub(crate) async fn lock(
    client: &zk::Client,
    unrecorded: &Unrecorded,
    dir: &str,
    name: String,
) -> Result<Option<(LockState, HeldNodes)>> {
    let children = children_of(client, dir).await?;
    if is_semaphore(&children) {
        return semaphore(client, dir, name).await;
    }
    let queue = names::queue(&children);
    if queue.is_empty() {
        return Ok(None);
    }
    let mut state = LockState::new(&*name);
    let mut nodes = Vec::new();
    for (index, contender) in queue.iter().enumerate() {
        let path = format!("{dir}/{}", contender.name);
        let (data, stat) = match client.get_data(&path).await {
            Err(zk::Error::NoNode) => continue,
            other => other.map_err(zk_error("inspect"))?,
        };
        match names::blocker(&queue, index) {
            None => {
                let mut holder = Record::holder(contender, &data, stat.mzxid);
                // A persistent node (another program's): no session's end removes it.
                holder.no_expiry = stat.ephemeral_owner == 0;
                if let Some(token) = unrecorded.token(&path) {
                    holder.fencing_token = token;
                }
                state.last_fencing_token = state.last_fencing_token.max(holder.fencing_token);
                state.holders.push(holder);
                nodes.push(vec![(path, stat.version)]);
            }
            Some(_) => state.waiters.push(Record::waiter(contender, &data)),
        }
    }
    Ok(Some((state, nodes)))
}

/// The state of the semaphore whose node is `dir`: its holders are the lease nodes (one
/// per permit, grouped by request) of requests no longer queued in `locks`; its waiters are
/// the requests queued there.
async fn semaphore(
    client: &zk::Client,
    dir: &str,
    name: String,
) -> Result<Option<(LockState, HeldNodes)>> {
    let locks_dir = format!("{dir}/locks");
    let leases_dir = format!("{dir}/leases");
    let queue = names::queue(&children_of(client, &locks_dir).await?);
    let leases = children_of(client, &leases_dir).await?;
    if queue.is_empty() && leases.is_empty() {
        return Ok(None);
    }
    let request_of = |node: &str| {
        node.split_once("-lease-")
            .map_or(node, |(r, _)| r)
            .to_owned()
    };
    let queued_requests: Vec<String> = queue
        .iter()
        .map(|c| {
            c.name
                .split_once("-lock-")
                .map_or(&*c.name, |(r, _)| r)
                .to_owned()
        })
        .collect();
    let mut state = LockState::new(&*name);
    let mut groups: Vec<(String, HolderInfo, Vec<GrantNode>)> = Vec::new();
    for lease in &leases {
        let request = request_of(lease);
        if queued_requests.contains(&request) {
            continue;
        }
        let path = format!("{leases_dir}/{lease}");
        let (data, stat) = match client.get_data(&path).await {
            Err(zk::Error::NoNode) => continue,
            other => other.map_err(zk_error("inspect"))?,
        };
        state.last_fencing_token = state.last_fencing_token.max(stat.mzxid.max(0) as u64);
        match groups.iter_mut().find(|(r, _, _)| *r == request) {
            Some((_, holder, nodes)) => {
                holder.permits += 1;
                holder.fencing_token = holder.fencing_token.max(stat.mzxid.max(0) as u64);
                nodes.push((path, stat.version));
            }
            None => {
                let lease = names::Contender {
                    name: lease.clone(),
                    seq: 0,
                    role: names::Role::Shared,
                };
                let holder = Record::holder(&lease, &data, stat.mzxid);
                groups.push((request, holder, vec![(path, stat.version)]));
            }
        }
    }
    let (holders, nodes) = groups.into_iter().map(|(_, h, n)| (h, n)).unzip();
    state.holders = holders;
    for contender in &queue {
        let data = match client
            .get_data(&format!("{locks_dir}/{}", contender.name))
            .await
        {
            Err(zk::Error::NoNode) => continue,
            other => other.map_err(zk_error("inspect"))?.0,
        };
        state.waiters.push(Record::waiter(contender, &data));
    }
    Ok(Some((state, nodes)))
}
