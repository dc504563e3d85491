//! The node operations requests are made of: protected creates that survive a lost answer,
//! and deletes that accept a node already gone.

use distlock_core::{Error, ErrorKind, Result};
use zookeeper_client as zk;

use crate::error::zk_error;

/// One ZooKeeper session: the client that speaks in it, and its number for the core.
#[derive(Clone)]
pub(crate) struct Live {
    pub(crate) client: zk::Client,
    pub(crate) id: u64,
    /// Who may touch the nodes it creates: with credentials, only their owner (so a client
    /// without them cannot queue under a lock, or delete a holder's node); else anyone.
    pub(crate) acls: zk::Acls<'static>,
}

/// How often a create is tried again when its parent vanished in between (a container
/// node the server deleted) or its outcome was unknown.
const CREATE_TRIES: usize = 5;

/// A request's node.
#[derive(Debug, Clone)]
pub(crate) struct Node {
    pub(crate) path: String,
    /// The session it lives in.
    pub(crate) session: u64,
    /// The transaction that created it: a grant's fencing token.
    pub(crate) czxid: i64,
}

impl Node {
    /// Its name, the last segment of its path.
    pub(crate) fn name(&self) -> &str {
        self.path.rsplit('/').next().unwrap_or_default()
    }
}

/// Creates an ephemeral sequential node `<prefix><seq>` holding `data` in session `live`,
/// creating its parents (as container nodes) when missing. `prefix` is unique to the
/// request (Curator's protected create): when the create's answer is lost, the node is
/// found by it among `dir`'s children (and adopted if this session owns it) instead of
/// being created a second time. `skip` names nodes of the request adopted already.
pub(crate) async fn create_protected(
    live: &Live,
    dir: &str,
    prefix: &str,
    data: &[u8],
    skip: &[Node],
) -> Result<Node> {
    let options = zk::CreateMode::EphemeralSequential.with_acls(live.acls);
    for _ in 0..CREATE_TRIES {
        match live.client.create(prefix, data, &options).await {
            Ok((stat, seq)) => {
                return Ok(Node {
                    path: format!("{prefix}{seq}"),
                    session: live.id,
                    czxid: stat.czxid,
                });
            }
            Err(zk::Error::NoNode) => {
                let parents = zk::CreateMode::Container.with_acls(live.acls);
                live.client
                    .mkdir(dir, &parents)
                    .await
                    .map_err(zk_error("create"))?;
            }
            Err(zk::Error::ConnectionLoss | zk::Error::Custom(_)) => {
                let found = find_all_own(live, dir, prefix).await?;
                if let Some(node) = found
                    .into_iter()
                    .find(|n| skip.iter().all(|s| s.path != n.path))
                {
                    return Ok(node);
                }
            }
            Err(err) => return Err(zk_error("create")(err)),
        }
    }
    Err(Error::new(
        ErrorKind::Unavailable,
        format!("could not create a node under {dir} in {CREATE_TRIES} tries"),
    )
    .with_backend("zookeeper")
    .temporary())
}

/// A directory's children, and the transaction that last changed them (`pzxid`).
#[derive(Debug, Clone, Default)]
pub(crate) struct Listing {
    pub(crate) children: Vec<String>,
    pub(crate) pzxid: i64,
}

/// Lists `dir`'s children; none if it does not exist.
pub(crate) async fn list(live: &Live, dir: &str) -> Result<Listing> {
    listing(live.client.get_children(dir).await)
}

/// The listing a `getChildren2` answered.
fn listing(answer: std::result::Result<(Vec<String>, zk::Stat), zk::Error>) -> Result<Listing> {
    match answer {
        Ok((children, stat)) => Ok(Listing {
            children,
            pzxid: stat.pzxid,
        }),
        Err(zk::Error::NoNode) => Ok(Listing::default()),
        Err(err) => Err(zk_error("poll")(err)),
    }
}

/// [`create_protected`], with `dir`'s children listed in the same round trip: the list is
/// sent right behind the create, and ZooKeeper answers a session's requests in order, so it
/// includes the new node. The listing is `None` when the first create did not simply
/// succeed (the node was then made, or found, the slower way).
pub(crate) async fn create_and_list(
    live: &Live,
    dir: &str,
    prefix: &str,
    data: &[u8],
) -> Result<(Node, Option<Listing>)> {
    let options = zk::CreateMode::EphemeralSequential.with_acls(live.acls);
    // Sent in the order of these calls (see `list_and_stamp`): the create, then the listing.
    let created = live.client.create(prefix, data, &options);
    let listed = live.client.get_children(dir);
    let (created, listed) = tokio::join!(created, listed);
    match created {
        Ok((stat, seq)) => Ok((
            Node {
                path: format!("{prefix}{seq}"),
                session: live.id,
                czxid: stat.czxid,
            },
            listing(listed).ok(),
        )),
        Err(zk::Error::ConnectionLoss | zk::Error::Custom(_)) => {
            match find_own(live, dir, prefix).await? {
                Some(node) => Ok((node, None)),
                None => Ok((create_protected(live, dir, prefix, data, &[]).await?, None)),
            }
        }
        Err(zk::Error::NoNode) => Ok((create_protected(live, dir, prefix, data, &[]).await?, None)),
        Err(err) => Err(zk_error("create")(err)),
    }
}

/// Lists `dir`'s children and, right behind in the same round trip, stamps the node at
/// `path` (see [`stamp`]): the stamp is the zxid of a write made after the listing, so it
/// can be the fencing token of a grant the listing decides. `None` when the stamp failed.
pub(crate) async fn list_and_stamp(
    live: &Live,
    dir: &str,
    path: &str,
    data: &[u8],
) -> Result<(Listing, Option<i64>)> {
    // zookeeper-client sends a request when its method is called, not when its future is
    // first polled: the listing is sent first, so the server answers it first.
    let listed = live.client.get_children(dir);
    let stamped = live.client.set_data(path, data, None);
    let (listed, stamped) = tokio::join!(listed, stamped);
    Ok((listing(listed)?, stamped.ok().map(|stat| stat.mzxid)))
}

/// Writes `data` to the node at `path` again; the transaction's zxid (the node's new
/// `mzxid`), greater than every zxid before it. `None` if the node is gone: deleted by
/// someone else, or gone with the session that made it, so the request lost its place.
pub(crate) async fn stamp(live: &Live, path: &str, data: &[u8]) -> Result<Option<i64>> {
    match live.client.set_data(path, data, None).await {
        Ok(stat) => Ok(Some(stat.mzxid)),
        Err(zk::Error::NoNode) => Ok(None),
        Err(err) => Err(zk_error("grant")(err)),
    }
}

/// Watches the node at `path`, a contender's, until it is deleted: the watcher, or `None`
/// if the node is gone already. A watch on its children: a contender's node is ephemeral
/// and has none, so the watch fires when the node goes and not when its owner writes it
/// (a stamp, a grant's record); and unlike an exists watch, none is left on the server
/// for a node that is gone already.
pub(crate) async fn watch(
    live: &Live,
    path: &str,
) -> std::result::Result<Option<zk::OneshotWatcher>, zk::Error> {
    match live.client.get_and_watch_children(path).await {
        Ok((_, _, watcher)) => Ok(Some(watcher)),
        Err(zk::Error::NoNode) => Ok(None),
        // A node this client may not read (a foreign contender's, made with its creator's
        // ACL): an exists watch needs no permission, and fires on its writes too.
        Err(zk::Error::NoAuth) => match live.client.check_and_watch_stat(path).await? {
            (Some(_), watcher) => Ok(Some(watcher)),
            (None, _) => Ok(None),
        },
        Err(err) => Err(err),
    }
}

/// Our node under `dir` whose path starts with `prefix`, if session `live` made one.
pub(crate) async fn find_own(live: &Live, dir: &str, prefix: &str) -> Result<Option<Node>> {
    Ok(find_all_own(live, dir, prefix).await?.into_iter().next())
}

/// The nodes under `dir` whose path starts with `prefix` that session `live` owns. The
/// server is brought up to date with the leader first (`sync`), so a create made through
/// another member before a lost answer is seen.
async fn find_all_own(live: &Live, dir: &str, prefix: &str) -> Result<Vec<Node>> {
    match live.client.sync(dir).await {
        Ok(()) | Err(zk::Error::NoNode) => {}
        Err(err) => return Err(zk_error("create")(err)),
    }
    let children = match live.client.list_children(dir).await {
        Err(zk::Error::NoNode) => return Ok(Vec::new()),
        other => other.map_err(zk_error("create"))?,
    };
    let mut own = Vec::new();
    for child in children {
        let path = format!("{dir}/{child}");
        if !path.starts_with(prefix) {
            continue;
        }
        let stat = live
            .client
            .check_stat(&path)
            .await
            .map_err(zk_error("create"))?;
        if let Some(stat) = stat.filter(|s| s.ephemeral_owner == live.client.session_id().0) {
            own.push(Node {
                path,
                session: live.id,
                czxid: stat.czxid,
            });
        }
    }
    Ok(own)
}

/// Deletes the node at `path`; true if it was there. Gone already, or gone with its
/// session, is no error.
pub(crate) async fn delete(live: &Live, path: &str) -> Result<bool> {
    match live.client.delete(path, None).await {
        Ok(()) => Ok(true),
        Err(zk::Error::NoNode | zk::Error::SessionExpired | zk::Error::ClientClosed) => Ok(false),
        Err(err) => Err(zk_error("delete")(err)),
    }
}

/// Deletes node `path` if it is still at `version` (not written since it was read): whether
/// it went; a node gone or written again meanwhile stays as it is.
pub(crate) async fn delete_at(live: &Live, path: &str, version: i32) -> Result<bool> {
    match live.client.delete(path, Some(version)).await {
        Ok(()) => Ok(true),
        Err(zk::Error::NoNode | zk::Error::BadVersion) => Ok(false),
        Err(err) => Err(zk_error("force_release")(err)),
    }
}

/// Deletes every node under `dir` whose path starts with `prefix`: the nodes of a request
/// whose creates' answers were lost, or that was dropped halfway.
pub(crate) async fn delete_with_prefix(live: &Live, dir: &str, prefix: &str) -> Result<()> {
    let children = match live.client.list_children(dir).await {
        Err(zk::Error::NoNode | zk::Error::SessionExpired | zk::Error::ClientClosed) => {
            return Ok(());
        }
        other => other.map_err(zk_error("cancel"))?,
    };
    for child in children {
        let path = format!("{dir}/{child}");
        if path.starts_with(prefix) {
            delete(live, &path).await?;
        }
    }
    Ok(())
}
