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
//! polls find what the wake-ups missed). The key's channel is one of the client's
//! [`Channels`]. The server is asked whether it publishes the events when a waiter first
//! meets a foreign holder, and again at most once a minute while it does not, or while
//! subscribing fails (an ACL that allows only distlock's own channels, say). Only for one
//! server: a cluster publishes keyspace events on the node that holds the key alone.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::time::Instant;

use super::channels::{Channels, Unwatched, Wakes, Watch};

/// How long a server found not publishing keyspace events is taken at its word.
const ASK_AGAIN: Duration = Duration::from_secs(60);

/// Events on a lock's key that may have freed it (`UNLINK` publishes `del`).
const FREEING: [&str; 3] = ["del", "expired", "evicted"];

/// The keyspace watches of one client.
pub(crate) struct Keyspace {
    /// The prefix of a key's keyspace channel on this client's database: `__keyspace@0__:`.
    channel_prefix: String,
    /// Whether the server publishes the events, and when it was last asked.
    published: Mutex<Option<(bool, Instant)>>,
    channels: Arc<Channels>,
}

impl Keyspace {
    /// Watches on database `db`, through `channels`.
    pub(crate) fn new(db: i64, channels: Arc<Channels>) -> Keyspace {
        Keyspace {
            channel_prefix: format!("__keyspace@{db}__:"),
            published: Mutex::default(),
            channels,
        }
    }

    fn published_state(&self) -> MutexGuard<'_, Option<(bool, Instant)>> {
        self.published.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether the server should be asked (again) whether it publishes keyspace events.
    pub(crate) fn ask_due(&self) -> bool {
        match *self.published_state() {
            None => true,
            Some((published, at)) => !published && at.elapsed() >= ASK_AGAIN,
        }
    }

    /// Records the server's `notify-keyspace-events` setting.
    pub(crate) fn answered(&self, flags: &str) {
        let published = flags.contains('K') && (flags.contains('g') || flags.contains('A'));
        *self.published_state() = Some((published, Instant::now()));
    }

    /// Whether the server publishes the events, as far as it was asked.
    pub(crate) fn published(&self) -> bool {
        self.published_state()
            .is_some_and(|(published, _)| published)
    }

    /// Makes waiter `token` watch `key`, subscribing to its channel if it is not yet;
    /// `None` if the channel is not subscribed (the wake-up connection is down, or the
    /// subscription failed). Returns once the subscription is in place.
    pub(crate) async fn watch(&self, key: &str, token: &str) -> Option<Watch> {
        let channel = format!("{}{key}", self.channel_prefix);
        match self
            .channels
            .watch(channel, Wakes::AllOn(&FREEING), token)
            .await
        {
            Ok(watch) => Some(watch),
            // With the wake-up connection down, the waiter polls until it is up again.
            Err(Unwatched::Down) => None,
            Err(Unwatched::Refused(why)) => {
                tracing::debug!(error = %why, "cannot subscribe to a lock key's keyspace events; polling");
                // Not tried again for a while: each poll would fail the same way.
                *self.published_state() = Some((false, Instant::now()));
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_keyspace_and_generic_events_count() {
        let keyspace = Keyspace::new(0, Channels::new());
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
}
