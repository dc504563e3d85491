//! News of a lock for its observers: ZooKeeper watches on the lock's node (its children
//! are the contenders) and on its note, each set again once it fired, each event a change
//! of the channel's count, kept while a receiver lives.

use std::sync::Weak;

use tokio::sync::watch;
use zookeeper_client as zk;

use crate::nodes::Live;
use crate::session::Sessions;

/// How many times a lock node that appears or goes while its watch is set is looked at
/// again before the watch counts as broken (and is set again half a second later).
const SET_TRIES: usize = 3;

/// Starts watching the children of `dir` (the lock's node) and the node `note`: the
/// receiver of the count of events seen.
pub(crate) fn start(sessions: Weak<Sessions>, dir: String, note: String) -> watch::Receiver<u64> {
    crate::runtime::SESSIONS.follow_news(move |count| {
        let (sessions, dir, note) = (sessions.clone(), dir.clone(), note.clone());
        async move { follow(&sessions, &dir, &note, &count).await }
    })
}

/// Sets both watches, counts one, and waits for either to fire; again, until the session
/// is gone or a watch cannot be set. Each watch set tells of a change, as one may have
/// gone unseen since the last fired. A client closed, it waits for the receivers to go.
async fn follow(sessions: &Weak<Sessions>, dir: &str, note: &str, count: &watch::Sender<u64>) {
    loop {
        let Some(live) = sessions.upgrade().map(|this| this.slot.live()) else {
            return std::future::pending().await;
        };
        let Some(live) = live else {
            return;
        };
        let (Ok(contenders), Ok((_, noted))) = (
            watch_contenders(&live, dir).await,
            live.client.check_and_watch_stat(note).await,
        ) else {
            return;
        };
        // The watches do not keep the session open: a session this client ends must close.
        drop(live);
        count.send_modify(|count| *count += 1);
        let fired = tokio::select! {
            fired = contenders.changed() => fired,
            fired = noted.changed() => fired,
        };
        if fired.event_type == zk::EventType::Session {
            return;
        }
    }
}

/// A watch on the children of `dir`, or on its creation while it does not exist.
async fn watch_contenders(live: &Live, dir: &str) -> Result<zk::OneshotWatcher, zk::Error> {
    for _ in 0..SET_TRIES {
        match live.client.list_and_watch_children(dir).await {
            Ok((_, watcher)) => return Ok(watcher),
            Err(zk::Error::NoNode) => match live.client.check_and_watch_stat(dir).await? {
                (None, watcher) => return Ok(watcher),
                // Made since: its children are what to watch.
                (Some(_), _) => continue,
            },
            Err(err) => return Err(err),
        }
    }
    Err(zk::Error::NoNode)
}
