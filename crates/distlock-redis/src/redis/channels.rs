//! Channels subscribed on demand on a client's wake-up connection: a lock key's
//! keyspace events (see [`Keyspace`](super::keyspace::Keyspace)), or the release channel
//! of a lock in Redisson's layout (on a cluster whose Java clients publish with sharded
//! pub/sub, on a connection of its own that subscribes on each channel's shard). A
//! channel is subscribed while any of the client's
//! waiters watch it, shared by them, and outlives its last watch by a second, so a name
//! kept busy is not subscribed afresh for every wait. Every subscription change is bounded
//! by [`SUBSCRIBE_WITHIN`]: a wake-up connection that stops answering costs the waiters
//! their messages, never their polls.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use distlock_core::backend::LocalWakers;
use redis::aio::PubSubSink;
use redis::cluster_async::ClusterConnection;
use tokio::time::Instant;

/// How long a channel's subscription outlives its last watch.
const LINGER: Duration = Duration::from_secs(1);
/// How long a cluster's wake-up connection that lost a node keeps subscribing its
/// channels again, while the cluster fails over.
const SUBSCRIBE_AGAIN_FOR: Duration = Duration::from_secs(30);
/// How long a subscription change may take before the wake-up connection counts as gone
/// for these channels (until it is made again).
pub(crate) const SUBSCRIBE_WITHIN: Duration = Duration::from_secs(1);

/// Whom a message on a watched channel wakes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wakes {
    /// Every watcher, on a message that is one of these payloads (a keyspace event that
    /// may have freed the key).
    AllOn(&'static [&'static str]),
    /// The watcher that has watched longest, on any message (a release: one waiter of
    /// this client tries, not a herd).
    Longest,
    /// Every watcher, on any message (a release of shared holds, which several waiters
    /// may share: readers after a writer, permits given back).
    All,
}

/// The on-demand channels of one client.
#[derive(Default)]
pub(crate) struct Channels {
    state: Mutex<State>,
    /// The subscriptions, changed one at a time: whether a channel is subscribed is decided
    /// with this held, so a subscription and an unsubscription never cross.
    subscriptions: tokio::sync::Mutex<Subscriptions>,
}

#[derive(Default)]
struct State {
    /// Each watched channel's rule and its waiters' tokens, longest watching first (no
    /// entry once none does).
    watched: HashMap<String, (Wakes, Vec<String>)>,
    /// Since when each channel nobody watches has been so, until it is unsubscribed.
    idle_since: HashMap<String, Instant>,
}

#[derive(Default)]
struct Subscriptions {
    /// The wake-up connection's subscribing half, while it is up and answers.
    sink: Option<Sink>,
    /// The channels subscribed on it.
    subscribed: HashSet<String>,
}

impl Subscriptions {
    /// Stops using a wake-up connection to one server whose subscription changes fail or
    /// go unanswered, until it is made again. A cluster's connection stays: it reconnects
    /// to a node by itself and subscribes there again to what it had.
    fn give_up(&mut self) {
        if let Some(Sink::Plain(_)) = self.sink {
            self.sink = None;
            self.subscribed.clear();
        }
    }
}

/// Where subscriptions are made.
pub(crate) enum Sink {
    /// A connection to one server (`SUBSCRIBE`; on a cluster, any node passes every
    /// `PUBLISH` on).
    Plain(PubSubSink),
    /// A cluster connection speaking RESP3, whose messages come as pushes:
    /// `SSUBSCRIBE`, each channel on the node that serves its slot.
    Sharded(ClusterConnection),
}

impl Sink {
    async fn subscribe(&mut self, channels: &[String]) -> redis::RedisResult<()> {
        match self {
            Sink::Plain(sink) => sink.subscribe(channels).await,
            // One command per channel: channels of different slots go to different nodes.
            Sink::Sharded(conn) => {
                for channel in channels {
                    conn.ssubscribe(channel).await?;
                }
                Ok(())
            }
        }
    }

    async fn unsubscribe(&mut self, channel: &str) -> redis::RedisResult<()> {
        match self {
            Sink::Plain(sink) => sink.unsubscribe(channel).await,
            Sink::Sharded(conn) => conn.sunsubscribe(channel).await,
        }
    }
}

/// A waiter's watch of one channel: it stops watching when this is dropped.
pub(crate) struct Watch {
    channels: Weak<Channels>,
    channel: String,
    token: String,
}

/// Why a channel could not be watched.
#[derive(Debug)]
pub(crate) enum Unwatched {
    /// The wake-up connection is down (or stopped answering).
    Down,
    /// The server refused the subscription (an ACL that allows only some channels, say).
    Refused(String),
}

impl Channels {
    pub(crate) fn new() -> Arc<Channels> {
        Arc::new(Channels::default())
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Makes waiter `token` watch `channel`, subscribing to it if it is not yet. Returns
    /// once the subscription is in place.
    pub(crate) async fn watch(
        self: &Arc<Self>,
        channel: String,
        wakes: Wakes,
        token: &str,
    ) -> Result<Watch, Unwatched> {
        {
            let mut state = self.state();
            state.idle_since.remove(&channel);
            let (_, tokens) = state
                .watched
                .entry(channel.clone())
                .or_insert_with(|| (wakes, Vec::new()));
            if !tokens.iter().any(|t| t == token) {
                tokens.push(token.to_owned());
            }
        }
        let watch = Watch {
            channels: Arc::downgrade(self),
            channel,
            token: token.to_owned(),
        };
        let Ok(mut guard) = tokio::time::timeout(SUBSCRIBE_WITHIN, self.subscriptions.lock()).await
        else {
            return Err(Unwatched::Down);
        };
        let subscriptions = &mut *guard;
        if subscriptions.subscribed.contains(&watch.channel) {
            return Ok(watch);
        }
        let sink = subscriptions.sink.as_mut().ok_or(Unwatched::Down)?;
        let channel = std::slice::from_ref(&watch.channel);
        let subscribed = tokio::time::timeout(SUBSCRIBE_WITHIN, sink.subscribe(channel));
        match subscribed.await {
            Ok(Ok(())) => {
                subscriptions.subscribed.insert(watch.channel.clone());
                Ok(watch)
            }
            Ok(Err(err)) => Err(Unwatched::Refused(err.to_string())),
            Err(_) => {
                subscriptions.give_up();
                Err(Unwatched::Down)
            }
        }
    }

    /// Unsubscribes from `channel` if nobody has watched it for [`LINGER`].
    async fn unwatched(&self, channel: &str) {
        let Ok(mut subscriptions) =
            tokio::time::timeout(SUBSCRIBE_WITHIN, self.subscriptions.lock()).await
        else {
            return;
        };
        {
            let mut state = self.state();
            let idle = state
                .idle_since
                .get(channel)
                .is_some_and(|since| since.elapsed() >= LINGER);
            if !idle {
                return;
            }
            state.idle_since.remove(channel);
        }
        if !subscriptions.subscribed.remove(channel) {
            return;
        }
        if let Some(sink) = subscriptions.sink.as_mut() {
            let unsubscribed = tokio::time::timeout(SUBSCRIBE_WITHIN, sink.unsubscribe(channel));
            if !matches!(unsubscribed.await, Ok(Ok(()))) {
                subscriptions.give_up();
            }
        }
    }

    /// The wake-up connection (re)subscribed: keeps its sink and subscribes it to every
    /// channel watched.
    pub(crate) async fn connected(&self, mut sink: Sink) {
        let mut subscriptions = self.subscriptions.lock().await;
        let channels: Vec<String> = self.state().watched.keys().cloned().collect();
        subscriptions.subscribed.clear();
        if !channels.is_empty() {
            match tokio::time::timeout(SUBSCRIBE_WITHIN, sink.subscribe(&channels)).await {
                Ok(Ok(())) => subscriptions.subscribed.extend(channels),
                failed => {
                    tracing::debug!(?failed, "cannot subscribe to the watched channels again");
                    return;
                }
            }
        }
        subscriptions.sink = Some(sink);
    }

    /// `channel`'s subscription ended: subscribes to it again while someone watches it
    /// and it was not unsubscribed on purpose (the server ends a sharded channel's
    /// subscription when its slot moves to another node; subscribed again, it is on the
    /// slot's node now).
    pub(crate) async fn ended(&self, channel: String) {
        let Ok(mut guard) = tokio::time::timeout(SUBSCRIBE_WITHIN, self.subscriptions.lock()).await
        else {
            return;
        };
        let subscriptions = &mut *guard;
        if !subscriptions.subscribed.remove(&channel)
            || !self.state().watched.contains_key(&channel)
        {
            return;
        }
        let Some(sink) = subscriptions.sink.as_mut() else {
            return;
        };
        let again = std::slice::from_ref(&channel);
        match tokio::time::timeout(SUBSCRIBE_WITHIN, sink.subscribe(again)).await {
            Ok(Ok(())) => {
                subscriptions.subscribed.insert(channel);
            }
            // Its waiters poll meanwhile; the next watch of it subscribes again.
            failed => tracing::debug!(?failed, %channel, "cannot subscribe to a channel again"),
        }
    }

    /// The wake-up connection lost a node, whose slots may be served by another soon
    /// (a replica promoted): subscribes again to every channel watched, routed by slot
    /// to the node that serves it now, every half second until each is (for at most
    /// [`SUBSCRIBE_AGAIN_FOR`]). A channel not subscribed again counts as unsubscribed,
    /// so the next watch of it tries once more.
    pub(crate) async fn subscribe_again(&self) {
        let end = Instant::now() + SUBSCRIBE_AGAIN_FOR;
        while !self.subscribed_again().await && Instant::now() < end {
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    /// One round of [`subscribe_again`](Self::subscribe_again): whether every channel
    /// watched is subscribed.
    async fn subscribed_again(&self) -> bool {
        let Ok(mut guard) = tokio::time::timeout(SUBSCRIBE_WITHIN, self.subscriptions.lock()).await
        else {
            return false;
        };
        let subscriptions = &mut *guard;
        let watched: Vec<String> = self.state().watched.keys().cloned().collect();
        let Some(sink) = subscriptions.sink.as_mut() else {
            return true;
        };
        let mut all = true;
        for channel in watched {
            let again = std::slice::from_ref(&channel);
            match tokio::time::timeout(SUBSCRIBE_WITHIN, sink.subscribe(again)).await {
                Ok(Ok(())) => {
                    subscriptions.subscribed.insert(channel);
                }
                _ => {
                    subscriptions.subscribed.remove(&channel);
                    all = false;
                }
            }
        }
        all
    }

    /// The wake-up connection dropped.
    pub(crate) async fn disconnected(&self) {
        let mut subscriptions = self.subscriptions.lock().await;
        subscriptions.sink = None;
        subscriptions.subscribed.clear();
    }

    /// A message on `channel` with `payload`: wakes whom the channel's rule says if it is
    /// watched. Whether it was one of these channels.
    pub(crate) fn deliver(&self, channel: &str, payload: &str, wakers: &LocalWakers) -> bool {
        let Some(woken) = self.woken(channel, payload) else {
            return false;
        };
        for token in woken {
            wakers.wake(&token);
        }
        true
    }

    /// The tokens a message on `channel` with `payload` wakes; `None` if nobody watches it.
    fn woken(&self, channel: &str, payload: &str) -> Option<Vec<String>> {
        Some(match self.state().watched.get(channel)? {
            (Wakes::AllOn(payloads), tokens) if payloads.contains(&payload) => tokens.clone(),
            (Wakes::AllOn(_), _) => Vec::new(),
            (Wakes::Longest, tokens) => tokens.first().cloned().into_iter().collect(),
            (Wakes::All, tokens) => tokens.clone(),
        })
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        let Some(channels) = self.channels.upgrade() else {
            return;
        };
        {
            let mut state = channels.state();
            let Some((_, tokens)) = state.watched.get_mut(&self.channel) else {
                return;
            };
            tokens.retain(|t| *t != self.token);
            if !tokens.is_empty() {
                return;
            }
            state.watched.remove(&self.channel);
            state
                .idle_since
                .insert(self.channel.clone(), Instant::now());
        }
        // The last watch of the channel: unsubscribe once nobody watched it for a while,
        // where a runtime runs (else the subscription stays, costing one message per
        // event on it).
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let channel = std::mem::take(&mut self.channel);
            let channels = Arc::downgrade(&channels);
            runtime.spawn(async move {
                tokio::time::sleep(LINGER).await;
                if let Some(channels) = channels.upgrade() {
                    channels.unwatched(&channel).await;
                }
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn watched(channels: &Channels, channel: &str, wakes: Wakes, tokens: &[&str]) {
        channels.state().watched.insert(
            channel.into(),
            (wakes, tokens.iter().map(|t| t.to_string()).collect()),
        );
    }

    #[tokio::test]
    async fn a_channel_wakes_whom_its_rule_says() {
        let channels = Channels::new();
        // No wake-up connection: no watch, and nothing kept.
        assert!(matches!(
            channels.watch("c".into(), Wakes::Longest, "t1").await,
            Err(Unwatched::Down)
        ));
        assert!(channels.state().watched.is_empty());
        watched(&channels, "k", Wakes::AllOn(&["del"]), &["t1", "t2"]);
        watched(&channels, "r", Wakes::Longest, &["t3", "t4"]);
        watched(&channels, "s", Wakes::All, &["t5", "t6"]);
        assert_eq!(
            channels.woken("s", "2"),
            Some(vec!["t5".into(), "t6".into()])
        );
        assert_eq!(
            channels.woken("k", "del"),
            Some(vec!["t1".into(), "t2".into()])
        );
        assert_eq!(channels.woken("k", "set"), Some(vec![]));
        assert_eq!(channels.woken("r", "0"), Some(vec!["t3".into()]));
        assert_eq!(channels.woken("other", "0"), None);
    }
}
