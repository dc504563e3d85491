#![doc = include_str!("../docs.md")]

mod backend;
mod config;
mod error;
mod fenced;
mod grpc;
mod inspect;
mod members;
mod news;
mod notes;
mod queue;
mod record;
mod request;
mod runtime;
mod session;
mod txns;
mod watch;
mod watches;

use std::sync::Arc;

use distlock_core::backend::{Backend, Connector, async_trait};
use distlock_core::{Result, Url};

pub use backend::EtcdBackend;
pub use config::{DEFAULT_PREFIX, DEFAULT_SESSION_TTL, EtcdConfig};
pub use fenced::{HeldKey, still_holds};

/// Registers the `etcd://` and `etcds://` connector with the core's URL registry.
///
/// # Examples
///
/// ```
/// distlock_etcd::install();
/// ```
pub fn install() {
    distlock_core::backend::register(Arc::new(EtcdConnector));
}

/// Connects `etcd://` URLs.
#[derive(Debug)]
struct EtcdConnector;

#[async_trait]
impl Connector for EtcdConnector {
    fn schemes(&self) -> &'static [&'static str] {
        &["etcd", "etcds"]
    }

    async fn connect(&self, url: &Url) -> Result<Arc<dyn Backend>> {
        Ok(Arc::new(
            EtcdBackend::open(EtcdConfig::from_url(url)?).await?,
        ))
    }
}
