//! The URL scheme registry: which backend a URL connects to.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, RwLock};

use async_trait::async_trait;
use url::Url;

use crate::backend::Backend;
use crate::error::{Error, Result};
use crate::memory::MemoryConnector;

/// Builds a backend from a URL; one per backend crate.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use distlock_core::{async_trait, Backend, Connector, MemoryBackend, Result};
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
/// distlock_core::register(Arc::new(Scratch));
/// ```
#[async_trait]
pub trait Connector: Send + Sync + std::fmt::Debug + 'static {
    /// The URL schemes this connector serves.
    fn schemes(&self) -> &'static [&'static str];
    /// Connects (and prepares the store, e.g. creates tables) for `url`.
    async fn connect(&self, url: &Url) -> Result<Arc<dyn Backend>>;
}

static CONNECTORS: LazyLock<RwLock<HashMap<&'static str, Arc<dyn Connector>>>> =
    LazyLock::new(|| {
        let memory: Arc<dyn Connector> = Arc::new(MemoryConnector);
        let map = memory
            .schemes()
            .iter()
            .map(|s| (*s, memory.clone()))
            .collect();
        RwLock::new(map)
    });

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

/// The URL with any password replaced by `***`, for messages and logs.
///
/// # Examples
///
/// ```
/// assert_eq!(
///     distlock_core::redact_url("postgres://app:hunter2@db/locks"),
///     "postgres://app:***@db/locks"
/// );
/// ```
pub fn redact_url(url: &str) -> String {
    match Url::parse(url) {
        Ok(mut parsed) if parsed.password().is_some() => {
            let _ = parsed.set_password(Some("***"));
            parsed.to_string()
        }
        Ok(_) => url.to_owned(),
        Err(_) => match url.find('@') {
            Some(at) => format!("<redacted>{}", &url[at..]),
            None => url.to_owned(),
        },
    }
}

pub(crate) async fn connect(url: &str) -> Result<Arc<dyn Backend>> {
    let parsed = Url::parse(url)
        .map_err(|e| Error::invalid(format!("malformed lock URL `{}`: {e}", redact_url(url))))?;
    let connector = {
        let map = CONNECTORS.read().unwrap_or_else(|p| p.into_inner());
        map.get(parsed.scheme()).cloned()
    };
    match connector {
        Some(connector) => connector.connect(&parsed).await,
        None => {
            let mut known: Vec<&str> = CONNECTORS
                .read()
                .unwrap_or_else(|p| p.into_inner())
                .keys()
                .copied()
                .collect();
            known.sort_unstable();
            Err(Error::invalid(format!(
                "no backend for URL scheme `{}` (installed: {}); enable the matching feature of the distlock crate",
                parsed.scheme(),
                known.join(", ")
            )))
        }
    }
}
