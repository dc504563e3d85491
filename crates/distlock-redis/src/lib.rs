//! The Redis backend for distlock: `redis://host:port/db`, `rediss://` for TLS,
//! `redis+cluster://` for a Redis Cluster, and RedLock over independent masters
//! (`redlock://`, see [`redlock`]).
//!
//! # Mutex
//!
//! The lock's key is set with `SET key value NX PX ttl` — the layout redis-py, redsync and
//! node-redlock use, so they and distlock exclude each other on the same key. Where they
//! store an opaque token, distlock stores its holder record, a JSON object that starts with
//! its own token (`{"t":"<token>",…,"f":"<fencing token>"}`), so that a grant writes one key
//! and `distlock status` reads who holds it from the key itself. By default the key is the
//! lock's name; `?prefix=locks:` puts a prefix before it. The other keys of a lock share its
//! hash tag, `{key}:…`, so a cluster keeps them in one slot: `{key}:fence` (fencing
//! counter), `{key}:queue`, `{key}:waiters` and `{key}:seq` (the wait queue),
//! `{key}:leases` and `{key}:lease-info` (shared grants, below).
//! Lock names may therefore not contain `{` or `}`.
//!
//! Every change is one Lua script (sent with EVALSHA, reloaded on NOSCRIPT): acquire sets the
//! key and increments the fencing counter together; release deletes only our own grant;
//! renewal extends only our own grant.
//!
//! A client sends its commands over [`DEFAULT_CONNECTIONS`] multiplexed, reconnecting
//! connections (`?connections=N`); all operations on one lock go through the same one, so
//! a cancellation never overtakes the request it cancels (batched renewals take either;
//! a renewal that arrives after its release finds the grant gone). A cluster uses the cluster
//! client's own connections.
//!
//! # Waiting without polling, without herds
//!
//! Each client subscribes once to a channel of its own. A waiter takes a place in the lock's
//! queue (refreshed while it waits, dropped within seconds if its process dies); a release
//! publishes to exactly one waiter, the head of the queue, on its client's channel. A
//! waiter that misses its wake-up polls again within the holder's remaining lease and at
//! most every two seconds. A lock a foreign client holds (redis-py, redsync, rslock), whose
//! release publishes nothing, is polled with jittered backoff instead: from 1 ms, doubling
//! to 50 ms while one holder keeps it, from 1 ms again once it changed hands. Non-fair waiters may be overtaken by a newcomer, but not once
//! they have waited longer than [`distlock_core::backend::STARVATION`]; fair waiters never.
//!
//! A release looks at the head of the queue only, and a poll reads only as much of the
//! queue as its decision needs: the head alone for a mutex or write lock, or while the
//! holders leave no room; for a read or semaphore request with room, the waiters ahead of
//! it (only the starving ones, which come first, when not fair), and for a reader that is
//! not fair, on until a waiting writer. Dead waiters met on the way are dropped once. A
//! hand-off thus costs the server the same with one waiter or thousands.
//!
//! # Fencing tokens and restarts
//!
//! Tokens come from `INCR` in the acquire script. A counter that starts afresh — the first
//! grant of a name, after a Redis without persistence restarted and lost it, or at the end
//! of its lifetime (`fence_ttl`, a day by default, counted from when it started; counters
//! older versions made have none) — starts at the server's clock in microseconds. Tokens therefore keep increasing across such a
//! restart as long as the server's clock does not go back and the lock was granted less
//! than once per microsecond. Such a restart also loses the lock itself: a second client can then be
//! granted the lock while the first still believes it holds it. Check fencing tokens at
//! the resource to reject the stale holder's writes.
//!
//! # Read/write locks and semaphores
//!
//! Shared grants (readers, semaphore permits) are entries of `{key}:leases`, a sorted set
//! scored by each grant's expiry on the Redis server's clock (`TIME`), with their details in
//! `{key}:lease-info`. Each grant is its own lease: a crashed reader or permit holder stops
//! counting when its own lease ends, and clock skew between clients does not matter. A
//! writer or mutex holder is the exclusive `SET NX` key above, so a mutex and an `RwLock` on
//! one name exclude each other. A waiting writer blocks new readers. All kinds are decided by
//! one script that follows the same rules as every other backend.
//!
//! # Replica-acknowledged grants
//!
//! With `?min_replicas=N` (and `replica_timeout`, default 1 s) an acquire runs on a
//! connection of its own and is followed by `WAIT N`: a grant that fewer replicas have in
//! time is given back, and the acquire fails with `QuorumNotReached`. A failover then cannot
//! promote a replica that never saw a lock handed out. Renewals are not waited for, so a
//! promoted replica may hold an older expiry; the guard's `safe_until` still bounds it.
//!
//! # Redis Cluster
//!
//! `redis+cluster://h1:7000,h2:7001,…` (or `rediss+cluster://`) uses the cluster client,
//! learning the layout from any node listed; a `redis://` URL naming a node of a cluster is
//! used the same way. Every key of a lock shares its hash tag, so one script touches one
//! slot; MOVED, ASK and failovers are followed by the client, each command bounded to about
//! two seconds. Wake-ups are published cluster-wide (`PUBLISH` reaches every node) and each
//! client subscribes on the first node that answers, moving on when it goes away; a wake-up
//! lost meanwhile is covered by the waiters' bounded re-check. When a primary fails under a
//! held lock, renewals fail and the guard is `AtRisk`; if a replica that had the lock is
//! promoted before `safe_until`, renewals resume, otherwise the guard is `Lost`.
//!
//! # TLS
//!
//! `rediss://host:port/db` connects over TLS (rustls), trusting the system's certificate
//! authorities, or only the one in `?tls_ca=/path/ca.pem`.
//!
//! # Examples
//!
//! ```no_run
//! # async fn f() -> distlock_core::Result<()> {
//! distlock_redis::install();
//! let client = distlock_core::Client::connect("redis://127.0.0.1:6379/0").await?;
//! let guard = client.mutex("orders/42").lock().await?;
//! # Ok(()) }
//! ```

mod error;
mod foreign;
mod keys;
mod record;
mod redis;
pub mod redlock;
mod scripts;

use std::sync::Arc;

use distlock_core::backend::{Backend, Connector, async_trait};
use distlock_core::{Result, Url};

pub use self::redis::RedisBackend;
pub use self::redis::config::{
    DEFAULT_CONNECT_TIMEOUT, DEFAULT_CONNECTIONS, MAX_CONNECTIONS, RedisConfig,
};
pub use distlock_core::backend::DEFAULT_FENCE_TTL;
pub use error::connect_error;
pub use redlock::{RedlockBackend, RedlockConfig};

/// Decodes `reply` (RESP bytes) as every reply distlock reads from Redis, for the fuzz
/// target `redis_reply` in `fuzz/`: built only by `cargo fuzz`.
#[cfg(fuzzing)]
pub fn fuzz_reply(reply: &[u8]) {
    record::decode_any(reply);
}

/// Registers the `redis://`, `rediss://` and `redlock://` connectors with the core's URL registry.
///
/// # Examples
///
/// ```
/// distlock_redis::install();
/// ```
pub fn install() {
    distlock_core::backend::register(Arc::new(RedisConnector));
    distlock_core::backend::register(Arc::new(RedlockConnector));
}

/// Connects `redlock://` URLs.
#[derive(Debug)]
struct RedlockConnector;

#[async_trait]
impl Connector for RedlockConnector {
    fn schemes(&self) -> &'static [&'static str] {
        &["redlock", "redlocks"]
    }

    async fn connect(&self, url: &Url) -> Result<Arc<dyn Backend>> {
        Ok(Arc::new(
            RedlockBackend::open(RedlockConfig::from_url(url)?).await?,
        ))
    }
}

/// Connects `redis://` and `rediss://` URLs.
#[derive(Debug)]
struct RedisConnector;

#[async_trait]
impl Connector for RedisConnector {
    fn schemes(&self) -> &'static [&'static str] {
        &["redis", "rediss", "redis+cluster", "rediss+cluster"]
    }

    async fn connect(&self, url: &Url) -> Result<Arc<dyn Backend>> {
        Ok(Arc::new(
            RedisBackend::open(RedisConfig::from_url(url)?).await?,
        ))
    }
}
