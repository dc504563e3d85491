//! `distlock status` on ZooKeeper: holders and waiters read from the contenders' nodes,
//! Curator's and kazoo's too.

use distlock_core::Result;
use distlock_core::backend::LockState;
use zookeeper_client as zk;

use crate::error::zk_error;
use crate::names;
use crate::record::Record;

/// The most nodes one `status` of every lock visits under the base.
const MAX_VISITED: usize = 10_000;

/// The state of lock `name`, or of every lock under `base` with contenders.
pub(crate) async fn locks(
    client: &zk::Client,
    base: &str,
    name: Option<&str>,
) -> Result<Vec<LockState>> {
    match name {
        Some(name) => Ok(vec![
            lock(client, &names::lock_path(base, name), name.to_owned())
                .await?
                .unwrap_or_else(|| empty(name)),
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
                if dir != base && children.iter().any(|c| names::contender(c).is_some()) {
                    if let Some(name) = names::lock_name(base, &dir) {
                        if let Some(state) = lock(client, &dir, name).await? {
                            states.push(state);
                        }
                    }
                }
                pending.extend(
                    children
                        .iter()
                        .filter(|c| names::contender(c).is_none())
                        .map(|c| format!("{dir}/{c}")),
                );
            }
            states.sort_by(|a, b| a.name.cmp(&b.name));
            Ok(states)
        }
    }
}

fn empty(name: &str) -> LockState {
    LockState {
        name: name.to_owned(),
        last_fencing_token: 0,
        holders: Vec::new(),
        waiters: Vec::new(),
    }
}

/// The state of the lock whose node is `dir`; `None` if it has no contenders.
async fn lock(client: &zk::Client, dir: &str, name: String) -> Result<Option<LockState>> {
    let children = match client.list_children(dir).await {
        Err(zk::Error::NoNode) => return Ok(None),
        other => other.map_err(zk_error("inspect"))?,
    };
    let queue = names::queue(&children);
    if queue.is_empty() {
        return Ok(None);
    }
    let mut state = empty(&name);
    for (index, contender) in queue.iter().enumerate() {
        let (data, stat) = match client.get_data(&format!("{dir}/{}", contender.name)).await {
            Err(zk::Error::NoNode) => continue,
            other => other.map_err(zk_error("inspect"))?,
        };
        state.last_fencing_token = state.last_fencing_token.max(stat.czxid.max(0) as u64);
        match names::blocker(&queue, index) {
            None => state
                .holders
                .push(Record::holder(contender, &data, stat.czxid)),
            Some(_) => state.waiters.push(Record::waiter(contender, &data)),
        }
    }
    Ok(Some(state))
}
