#![doc = include_str!("../docs.md")]

mod error;
mod foreign;
mod keys;
mod record;
mod redis;
mod redisson;
pub mod redlock;
mod scripts;
mod slots;

use std::sync::Arc;

use distlock_core::backend::{Backend, Connector, async_trait};
use distlock_core::{Result, Url};

pub use self::redis::RedisBackend;
pub use self::redis::config::{
    DEFAULT_CONNECT_TIMEOUT, DEFAULT_CONNECTIONS, DEFAULT_HANDOFF_CLAIM, Layout, MAX_CONNECTIONS,
    PubSub, RedisConfig,
};
pub use self::redisson::RedissonBackend;
pub use distlock_core::backend::DEFAULT_FENCE_TTL;
pub use error::connect_error;
pub use redlock::{RedlockBackend, RedlockConfig};

/// The key of the fencing counter that lock `name` counts on, under `prefix` (the URL's
/// `?prefix=`): the names of one cluster slot share one (on a single server and a RedLock
/// master too), so a name leaves no key of its own behind once released. For an operator
/// who reads or resets it: a counter deleted by hand is seeded again from the server's
/// clock, above every token it gave. Names and prefixes are checked as a Redis URL checks
/// them.
///
/// # Examples
///
/// ```
/// use distlock_redis::fencing_counter_key;
/// let key = fencing_counter_key("locks:", "orders/42")?;
/// assert!(key.starts_with("{locks:") && key.ends_with("}:slot-fence"));
/// assert!(fencing_counter_key("", "a{b}").is_err());
/// assert!(fencing_counter_key("{", "a").is_err());
/// # Ok::<(), distlock_core::Error>(())
/// ```
pub fn fencing_counter_key(prefix: &str, name: &str) -> Result<String> {
    distlock_core::validate_name(name)?;
    redis::config::check_prefix(prefix)?;
    let tags = slots::SlotTags::for_prefix(prefix);
    let keys = keys::LockKeys::new(prefix, name, &tags)?;
    Ok(keys.text(keys::Key::Fence))
}

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

/// Connects `redis://` and `rediss://` URLs, in the layout they ask for.
#[derive(Debug)]
struct RedisConnector;

#[async_trait]
impl Connector for RedisConnector {
    fn schemes(&self) -> &'static [&'static str] {
        &["redis", "rediss", "redis+cluster", "rediss+cluster"]
    }

    async fn connect(&self, url: &Url) -> Result<Arc<dyn Backend>> {
        redisson::open(RedisConfig::from_url(url)?).await
    }
}
