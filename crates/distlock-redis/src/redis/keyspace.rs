//! Wake-ups on a foreign client's release, where the server publishes keyspace events.
//!
//! A client other than distlock (redis-py, redsync, rslock, …) releases a lock with a bare
//! `DEL` and tells nobody; distlock's waiters on such a lock poll it with a backoff (see
//! [`ForeignBackoff`](crate::foreign::ForeignBackoff)). Where the server has keyspace
//! notifications on for generic events (`notify-keyspace-events` holding `K` and `g` or
//! `A`, best with `x` for expiries too; Redis's default is off), a waiter that finds a
//! foreign holder also watches the lock's key: the client subscribes, on its one wake-up
//! connection, to the key's keyspace channel while any of its waiters watch it, and a
//! `del`, `expired` or `evicted` there wakes them at once, beside their backoff polls
//! (a woken waiter races the releasing client's own next try, and on a loaded machine the
//! polls find what the wake-ups missed). A key's subscription outlives its last watch by a
//! second, so a key foreign clients keep busy is not subscribed afresh for every wait. The
//! server is asked whether it publishes the events when a waiter first meets a foreign
//! holder, and again at most once a minute while it does not, or while subscribing fails
//! (an ACL that allows only distlock's own channels, say). Every subscription change is
//! bounded by [`SUBSCRIBE_WITHIN`]: a wake-up connection that stops answering costs the
//! waiters their events, never their polls. Only for one server: a cluster publishes
//! keyspace events on the node that holds the key alone.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use distlock_core::backend::LocalWakers;
use redis::aio::PubSubSink;
use tokio::time::Instant;

/// How long a server found not publishing keyspace events is taken at its word.
const ASK_AGAIN: Duration = Duration::from_secs(60);
/// How long a key's subscription outlives its last watch.
const LINGER: Duration = Duration::from_secs(1);
/// How long a subscription change may take before the wake-up connection counts as gone
/// for keyspace events (until it is made again).
const SUBSCRIBE_WITHIN: Duration = Duration::from_secs(1);

/// Events on a lock's key that may have freed it (`UNLINK` publishes `del`).
const FREEING: [&str; 3] = ["del", "expired", "evicted"];

/// The keyspace watches of one client.
pub(crate) struct Keyspace {
    /// The prefix of a key's keyspace channel on this client's database: `__keyspace@0__:`.
    channel_prefix: String,
    state: Mutex<State>,
    /// The subscriptions, changed one at a time: whether a channel is subscribed is decided
    /// with this held, so a subscription and an unsubscription never cross.
    subscriptions: tokio::sync::Mutex<Subscriptions>,
}

#[derive(Default)]
struct State {
    /// Whether the server publishes the events, and when it was last asked.
    published: Option<(bool, Instant)>,
    /// The waiters' tokens watching each key's channel (no entry once none does).
    watched: HashMap<String, HashSet<String>>,
    /// Since when each channel nobody watches has been so, until it is unsubscribed.
    idle_since: HashMap<String, Instant>,
}

#[derive(Default)]
struct Subscriptions {
    /// The wake-up connection's subscribing half, while it is up and answers.
    sink: Option<PubSubSink>,
    /// The channels subscribed on it.
    subscribed: HashSet<String>,
}

impl Subscriptions {
    /// Stops using a wake-up connection whose subscription changes fail or go unanswered,
    /// until it is made again.
    fn give_up(&mut self) {
        self.sink = None;
        self.subscribed.clear();
    }
}

/// A waiter's watch of one key: it stops watching when this is dropped.
pub(crate) struct Watch {
    keyspace: Weak<Keyspace>,
    channel: String,
    token: String,
}

impl Keyspace {
    /// Watches on database `db`.
    pub(crate) fn new(db: i64) -> Arc<Keyspace> {
        Arc::new(Keyspace {
            channel_prefix: format!("__keyspace@{db}__:"),
            state: Mutex::default(),
            subscriptions: tokio::sync::Mutex::default(),
        })
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether the server should be asked (again) whether it publishes keyspace events.
    pub(crate) fn ask_due(&self) -> bool {
        match self.state().published {
            None => true,
            Some((published, at)) => !published && at.elapsed() >= ASK_AGAIN,
        }
    }

    /// Records the server's `notify-keyspace-events` setting.
    pub(crate) fn answered(&self, flags: &str) {
        let published = flags.contains('K') && (flags.contains('g') || flags.contains('A'));
        self.state().published = Some((published, Instant::now()));
    }

    /// Whether the server publishes the events, as far as it was asked.
    pub(crate) fn published(&self) -> bool {
        self.state()
            .published
            .is_some_and(|(published, _)| published)
    }

    /// Makes waiter `token` watch `key`, subscribing to its channel if it is not yet;
    /// `None` if the channel is not subscribed (the wake-up connection is down, or the
    /// subscription failed). Returns once the subscription is in place.
    pub(crate) async fn watch(self: &Arc<Self>, key: &str, token: &str) -> Option<Watch> {
        let channel = format!("{}{key}", self.channel_prefix);
        {
            let mut state = self.state();
            state.idle_since.remove(&channel);
            state
                .watched
                .entry(channel.clone())
                .or_default()
                .insert(token.to_owned());
        }
        let watch = Watch {
            keyspace: Arc::downgrade(self),
            channel,
            token: token.to_owned(),
        };
        let mut guard = tokio::time::timeout(SUBSCRIBE_WITHIN, self.subscriptions.lock())
            .await
            .ok()?;
        let subscriptions = &mut *guard;
        if subscriptions.subscribed.contains(&watch.channel) {
            return Some(watch);
        }
        // With the wake-up connection down, the waiter polls until it is up again.
        let sink = subscriptions.sink.as_mut()?;
        let subscribed = tokio::time::timeout(SUBSCRIBE_WITHIN, sink.subscribe(&watch.channel));
        let failed = match subscribed.await {
            Ok(Ok(())) => {
                subscriptions.subscribed.insert(watch.channel.clone());
                return Some(watch);
            }
            Ok(Err(err)) => err.to_string(),
            Err(_) => {
                subscriptions.give_up();
                format!("no answer within {SUBSCRIBE_WITHIN:?}")
            }
        };
        tracing::debug!(error = %failed, "cannot subscribe to a lock key's keyspace events; polling");
        // Not tried again for a while: each poll would fail the same way.
        self.state().published = Some((false, Instant::now()));
        None
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
    pub(crate) async fn connected(&self, mut sink: PubSubSink) {
        let mut subscriptions = self.subscriptions.lock().await;
        let channels: Vec<String> = self.state().watched.keys().cloned().collect();
        subscriptions.subscribed.clear();
        if !channels.is_empty() {
            match tokio::time::timeout(SUBSCRIBE_WITHIN, sink.subscribe(&channels)).await {
                Ok(Ok(())) => subscriptions.subscribed.extend(channels),
                failed => {
                    tracing::debug!(
                        ?failed,
                        "cannot subscribe to lock keys' keyspace events again"
                    );
                    return;
                }
            }
        }
        subscriptions.sink = Some(sink);
    }

    /// The wake-up connection dropped.
    pub(crate) async fn disconnected(&self) {
        let mut subscriptions = self.subscriptions.lock().await;
        subscriptions.sink = None;
        subscriptions.subscribed.clear();
    }

    /// A message on `channel` with `payload`: wakes the waiters watching the key if it is
    /// one of its keyspace channels and the event may have freed it. Whether it was one.
    pub(crate) fn deliver(&self, channel: &str, payload: &str, wakers: &LocalWakers) -> bool {
        if !channel.starts_with(&self.channel_prefix) {
            return false;
        }
        if FREEING.contains(&payload) {
            let tokens: Vec<String> = match self.state().watched.get(channel) {
                Some(tokens) => tokens.iter().cloned().collect(),
                None => Vec::new(),
            };
            for token in tokens {
                wakers.wake(&token);
            }
        }
        true
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        let Some(keyspace) = self.keyspace.upgrade() else {
            return;
        };
        {
            let mut state = keyspace.state();
            let Some(tokens) = state.watched.get_mut(&self.channel) else {
                return;
            };
            tokens.remove(&self.token);
            if !tokens.is_empty() {
                return;
            }
            state.watched.remove(&self.channel);
            state
                .idle_since
                .insert(self.channel.clone(), Instant::now());
        }
        // The last watch of the key: unsubscribe once nobody watched it for a while, where
        // a runtime runs (else the subscription stays, costing one message per event on
        // the key).
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let channel = std::mem::take(&mut self.channel);
            let keyspace = Arc::downgrade(&keyspace);
            runtime.spawn(async move {
                tokio::time::sleep(LINGER).await;
                if let Some(keyspace) = keyspace.upgrade() {
                    keyspace.unwatched(&channel).await;
                }
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_keyspace_and_generic_events_count() {
        let keyspace = Keyspace::new(0);
        assert!(keyspace.ask_due());
        keyspace.answered("");
        assert!(!keyspace.published() && !keyspace.ask_due());
        keyspace.answered("Kx");
        assert!(!keyspace.published(), "expiry alone misses a DEL");
        keyspace.answered("Egx");
        assert!(!keyspace.published(), "key-event channels are not watched");
        keyspace.answered("Kgx");
        assert!(keyspace.published());
        keyspace.answered("AK");
        assert!(keyspace.published());
    }

    #[tokio::test]
    async fn a_freeing_event_wakes_the_watchers_of_its_key_alone() {
        let keyspace = Keyspace::new(3);
        let wakers = LocalWakers::new();
        // No wake-up connection: no watch, and nothing kept.
        assert!(keyspace.watch("locks:a", "t1").await.is_none());
        assert!(keyspace.state().watched.is_empty());
        keyspace
            .state()
            .watched
            .entry("__keyspace@3__:locks:a".into())
            .or_default()
            .insert("t1".into());
        assert!(keyspace.deliver("__keyspace@3__:locks:a", "del", &wakers));
        assert!(keyspace.deliver("__keyspace@3__:locks:a", "set", &wakers));
        assert!(!keyspace.deliver("distlock:wake:x", "t1", &wakers));
    }
}
