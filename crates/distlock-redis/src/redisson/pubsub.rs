//! How releases are published and heard in Redisson's layout (`pubsub=`, the Java clients'
//! `shardedSubscriptionMode`): with `PUBLISH` on one server or on a cluster with plain
//! pub/sub, heard on the client's one wake-up connection; or, on a cluster with sharded
//! pub/sub, with `SPUBLISH` on the lock's shard, heard with `SSUBSCRIBE` on the node that
//! serves the lock's slot over a cluster connection of its own.

use std::sync::Arc;
use std::time::Duration;

use distlock_core::{Error, ErrorKind, Result, Url};
use redis::Script;

use crate::redis::RedisBackend;
use crate::redis::channels::{Channels, Sink};
use crate::redis::config::{PubSub, RedisConfig};
use crate::redis::connection;

/// A script of this layout that publishes, as the Java clients publish: with `PUBLISH`,
/// or with `SPUBLISH` on a cluster where they use sharded pub/sub. The channels it
/// publishes on are in its lock's slot.
pub(super) struct LayoutScript {
    plain: Script,
    sharded: Script,
}

impl LayoutScript {
    /// The script `source`, whose publishing calls are `redis.call('PUBLISH', …)`, in both
    /// of its forms.
    pub(super) fn new(source: &str) -> LayoutScript {
        LayoutScript {
            plain: Script::new(source),
            sharded: Script::new(&sharded_source(source)),
        }
    }

    /// The form that publishes with `SPUBLISH` when `sharded`, else with `PUBLISH`.
    pub(super) fn publishing(&self, sharded: bool) -> &Script {
        match sharded {
            true => &self.sharded,
            false => &self.plain,
        }
    }
}

/// `source` publishing with `SPUBLISH`.
fn sharded_source(source: &str) -> String {
    source.replace("redis.call('PUBLISH',", "redis.call('SPUBLISH',")
}

/// What a client needs to listen on its locks' shards: where the cluster is.
pub(super) struct Sharded {
    seeds: Vec<Url>,
    tls_ca: Option<std::path::PathBuf>,
    connect_timeout: Duration,
}

impl Sharded {
    /// Where the cluster `config` names is.
    pub(super) fn of(config: &RedisConfig) -> Sharded {
        Sharded {
            seeds: match config.cluster_seeds.is_empty() {
                true => vec![config.server.clone()],
                false => config.cluster_seeds.clone(),
            },
            tls_ca: config.tls_ca.clone(),
            connect_timeout: config.connect_timeout,
        }
    }

    /// With `pubsub` as the Java clients publish, on `redis`'s server or cluster: the
    /// channels waiters watch on their shards where releases are published with
    /// `SPUBLISH`, `None` where they are published with `PUBLISH`. `sharded` is refused
    /// on one server and on a cluster without sharded pub/sub; `auto` chooses as
    /// Redisson's clients do.
    pub(super) async fn channels(
        &self,
        redis: &RedisBackend,
        pubsub: PubSub,
    ) -> Result<Option<Arc<Channels>>> {
        // A `redis://` URL may name a node of a cluster.
        let sharded = match (redis.is_cluster(), pubsub) {
            (false, PubSub::Sharded) => {
                return Err(Error::new(
                    ErrorKind::Unsupported,
                    "pubsub=sharded is for a Redis Cluster: on one server Redisson's clients publish releases with PUBLISH (pubsub=auto or plain)",
                ));
            }
            (false, _) | (true, PubSub::Plain) => false,
            (true, PubSub::Sharded) => {
                if !connection::has_sharded_pubsub(&mut redis.any_conn()).await? {
                    return Err(Error::new(
                        ErrorKind::Unsupported,
                        "pubsub=sharded: this cluster has no sharded pub/sub (SPUBLISH, Redis 7.0 and later), so its Redisson clients publish with PUBLISH: use pubsub=auto or plain",
                    ));
                }
                true
            }
            (true, PubSub::Auto) => connection::has_sharded_pubsub(&mut redis.any_conn()).await?,
        };
        tracing::debug!(sharded, "Redisson layout: how releases are published");
        match sharded {
            true => Ok(Some(self.listen(redis).await?)),
            false => Ok(None),
        }
    }

    /// Channels subscribed on their shards, whose messages wake `redis`'s waiters.
    async fn listen(&self, redis: &RedisBackend) -> Result<Arc<Channels>> {
        let channels = Channels::new();
        let (heard_on, wakers) = (Arc::downgrade(&channels), redis.wakers().clone());
        let heard = move |channel: &str, payload: &str| {
            if let Some(channels) = heard_on.upgrade() {
                channels.deliver(channel, payload, &wakers);
            }
        };
        let ended_on = Arc::downgrade(&channels);
        let ended = move |ended: connection::Ended| {
            let channels = ended_on.upgrade();
            let runtime = tokio::runtime::Handle::try_current();
            if let (Some(channels), Ok(runtime)) = (channels, runtime) {
                runtime.spawn(async move {
                    match ended {
                        connection::Ended::Channel(channel) => channels.ended(channel).await,
                        connection::Ended::Connection => channels.subscribe_again().await,
                    }
                });
            }
        };
        let tls_ca = self.tls_ca.as_deref();
        let listener =
            connection::sharded_listener(&self.seeds, tls_ca, self.connect_timeout, heard, ended);
        channels.connected(Sink::Sharded(listener.await?)).await;
        Ok(channels)
    }
}

#[cfg(test)]
mod tests {
    use super::sharded_source;

    #[test]
    fn a_sharded_script_publishes_only_with_spublish() {
        let sources = [
            include_str!("../scripts/redisson_queue.lua"),
            include_str!("../scripts/redisson_release.lua"),
            include_str!("../scripts/redisson_rw_acquire.lua"),
            include_str!("../scripts/redisson_rw_release.lua"),
            include_str!("../scripts/redisson_rw_forget_writer.lua"),
            include_str!("../scripts/redisson_sem_acquire.lua"),
            include_str!("../scripts/redisson_sem_release.lua"),
        ];
        for source in sources {
            let publishes = source.matches("'PUBLISH'").count();
            assert!(publishes > 0);
            let sharded = sharded_source(source);
            assert_eq!(sharded.matches("'PUBLISH'").count(), 0);
            assert_eq!(sharded.matches("redis.call('SPUBLISH',").count(), publishes);
        }
    }
}
