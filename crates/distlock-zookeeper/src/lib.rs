#![doc = include_str!("../docs.md")]

mod backend;
mod config;
mod error;
mod inspect;
mod names;
mod news;
mod nodes;
mod notes;
mod queue;
mod record;
mod request;
mod runtime;
mod semaphore;
mod session;

use std::sync::Arc;

use distlock_core::backend::{Backend, Connector, async_trait};
use distlock_core::{Result, Url};

pub use backend::ZkBackend;
pub use config::{DEFAULT_BASE, DEFAULT_SESSION_TIMEOUT, ZkConfig};

/// Checks that lock `name` (a valid one) has a ZooKeeper node of its own, for the fuzz
/// target `name` in `fuzz/`: built only by `cargo fuzz`.
#[cfg(fuzzing)]
pub fn fuzz_name(name: &str) {
    names::check_name(name);
}

/// Registers the `zk://` and `zks://` connector with the core's URL registry.
///
/// # Examples
///
/// ```
/// distlock_zookeeper::install();
/// ```
pub fn install() {
    distlock_core::backend::register(Arc::new(ZkConnector));
}

/// Connects `zk://` URLs.
#[derive(Debug)]
struct ZkConnector;

#[async_trait]
impl Connector for ZkConnector {
    fn schemes(&self) -> &'static [&'static str] {
        &["zk", "zks"]
    }

    async fn connect(&self, url: &Url) -> Result<Arc<dyn Backend>> {
        Ok(Arc::new(ZkBackend::open(ZkConfig::from_url(url)?).await?))
    }
}
