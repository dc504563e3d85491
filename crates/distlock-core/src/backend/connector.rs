//! The URL scheme registry: which backend a URL connects to, and the [`Connector`] each
//! backend crate registers for its schemes.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, RwLock};

use async_trait::async_trait;
use url::Url;

use super::Backend;
use crate::error::{Error, Result};
use crate::lock_url::parse_lock_url;

/// Builds a backend from a URL; one per backend crate.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use distlock_core::{MemoryBackend, Result};
/// use distlock_core::backend::{async_trait, Backend, Connector};
///
/// #[derive(Debug)]
/// struct Scratch;
///
/// #[async_trait]
/// impl Connector for Scratch {
///     fn schemes(&self) -> &'static [&'static str] { &["scratch"] }
///     async fn connect(&self, _url: &url::Url) -> Result<Arc<dyn Backend>> {
///         Ok(Arc::new(MemoryBackend::new()))
///     }
/// }
///
/// distlock_core::backend::register(Arc::new(Scratch));
/// ```
#[async_trait]
pub trait Connector: Send + Sync + std::fmt::Debug + 'static {
    /// The URL schemes this connector serves.
    fn schemes(&self) -> &'static [&'static str];
    /// Connects (and prepares the store, e.g. creates tables) for `url`.
    async fn connect(&self, url: &Url) -> Result<Arc<dyn Backend>>;
}

static CONNECTORS: LazyLock<RwLock<HashMap<&'static str, Arc<dyn Connector>>>> =
    LazyLock::new(|| RwLock::new(HashMap::new()));

/// Installs a connector for its schemes, replacing any earlier one for the same scheme.
///
/// # Examples
///
/// See [`Connector`].
pub fn register(connector: Arc<dyn Connector>) {
    let mut map = CONNECTORS.write().unwrap_or_else(|p| p.into_inner());
    for scheme in connector.schemes() {
        map.insert(scheme, connector.clone());
    }
}

/// Connects to `url` through the connector registered for its scheme, or else the one among
/// `builtin` (the connectors every build has) that serves it.
pub(crate) async fn connect(url: &str, builtin: &[&dyn Connector]) -> Result<Arc<dyn Backend>> {
    // Every backend's connections, renewals and background releases run on Tokio: polled
    // by another executor (futures' block_on, async-std, smol), a driver would panic inside.
    if tokio::runtime::Handle::try_current().is_err() {
        return Err(Error::invalid(
            "distlock needs a Tokio runtime: connect from inside one (#[tokio::main], \
             #[tokio::test], or Runtime::block_on)",
        ));
    }
    let parsed = parse_lock_url(url)?;
    let registered = {
        let map = CONNECTORS.read().unwrap_or_else(|p| p.into_inner());
        map.get(parsed.scheme()).cloned()
    };
    if let Some(connector) = registered {
        return connector.connect(&parsed).await;
    }
    if let Some(connector) = builtin
        .iter()
        .find(|connector| connector.schemes().contains(&parsed.scheme()))
    {
        return connector.connect(&parsed).await;
    }
    let mut known: Vec<&str> = CONNECTORS
        .read()
        .unwrap_or_else(|p| p.into_inner())
        .keys()
        .copied()
        .chain(
            builtin
                .iter()
                .flat_map(|connector| connector.schemes().iter().copied()),
        )
        .collect();
    known.sort_unstable();
    known.dedup();
    Err(Error::invalid(format!(
        "no backend for URL scheme `{}` (installed: {}); enable the matching feature of the distlock crate",
        parsed.scheme(),
        known.join(", ")
    )))
}
