//! Connecting to a RedLock's masters: done once a majority has connected, and a majority's
//! refusal of the URL told as the bad input it is.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use distlock_core::{Error, ErrorKind, Result};
use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;

use tokio::sync::OnceCell;

use crate::redis::RedisBackend;
use crate::redis::config::RedisConfig;

/// One master, connected at the start or else on a task of its own once an operation
/// finds it unconnected (and again after a failed connection), so a client starts while a
/// minority of masters is down.
pub(super) struct Master {
    pub(super) config: RedisConfig,
    pub(super) backend: OnceCell<RedisBackend>,
    /// Whether a connect runs on a task of its own.
    connecting: AtomicBool,
}

/// How long a connect that failed keeps the next one back.
const RECONNECT_AFTER: Duration = Duration::from_millis(100);

impl Master {
    /// A master of `config`, not connected yet.
    pub(super) fn new(config: RedisConfig) -> Arc<Master> {
        Arc::new(Master {
            config,
            backend: OnceCell::new(),
            connecting: AtomicBool::new(false),
        })
    }

    /// The master's address as logs name it, `host:port` (no user, no password).
    pub(super) fn label(&self) -> String {
        let server = &self.config.server;
        format!(
            "{}:{}",
            server.host_str().unwrap_or_default(),
            server.port().unwrap_or(6379)
        )
    }

    /// The master's backend, if it is connected; else it takes no part in this operation,
    /// and is connected on a task of its own. No call waits for a connect: calls queued
    /// behind one could reach the master in another order than they were made (a release
    /// before its acquire, which would leave a grant nobody holds until its TTL).
    pub(super) fn ready(self: &Arc<Self>) -> Result<&RedisBackend> {
        if let Some(backend) = self.backend.get() {
            return Ok(backend);
        }
        self.connect_in_background();
        Err(Error::new(
            ErrorKind::Unavailable,
            "this RedLock master is not connected yet",
        )
        .temporary())
    }

    /// Connects on a task of its own, unless a connect already runs.
    pub(super) fn connect_in_background(self: &Arc<Self>) {
        if self.backend.initialized() || self.connecting.swap(true, Ordering::SeqCst) {
            return;
        }
        let master = self.clone();
        tokio::spawn(async move {
            let connected = tokio::time::timeout(CONNECT_WITHIN, master.get()).await;
            if !matches!(connected, Ok(Ok(_))) {
                tokio::time::sleep(RECONNECT_AFTER).await;
            }
            master.connecting.store(false, Ordering::SeqCst);
        });
    }

    /// The master's backend, connected first if need be. The connect is boxed: a future
    /// holds room for the largest thing it may await, and every call on a master awaits
    /// this one, so an unboxed connect (tens of kilobytes of state) was copied along with
    /// each call, most of what a RedLock cycle cost the client.
    pub(super) async fn get(&self) -> Result<&RedisBackend> {
        self.backend
            .get_or_try_init(|| {
                Box::pin(async {
                    let backend = RedisBackend::open(self.config.clone()).await?;
                    Ok(backend.into_redlock_master())
                })
            })
            .await
    }
}

/// How long each master gets to answer the connect.
const CONNECT_WITHIN: Duration = Duration::from_secs(5);

/// One master's connect: done, refused or failed (its error), or unanswered in time.
pub(super) type Opened = std::result::Result<(), Option<Error>>;

/// Connects to `masters` at once, until `quorum` of them have connected or every one has
/// answered: a master that hangs is left to connect at its first use, as one that is down
/// is. The outcomes so far, in the order they came.
pub(super) async fn until_a_quorum(masters: &[Arc<Master>], quorum: usize) -> Vec<Opened> {
    let mut connecting: FuturesUnordered<_> = masters
        .iter()
        .map(|master| async move {
            match tokio::time::timeout(CONNECT_WITHIN, master.get()).await {
                Ok(connected) => connected.map(drop).map_err(Some),
                Err(_) => Err(None),
            }
        })
        .collect();
    let mut opened = Vec::new();
    while let Some(outcome) = connecting.next().await {
        opened.push(outcome);
        if opened.iter().filter(|o| o.is_ok()).count() >= quorum {
            break;
        }
    }
    opened
}

/// The masters' refusal of the URL (a wrong password, a user without the rights) as the
/// bad input it is, when refusals are what keep `quorum` from answering: they answered,
/// and asking again will not help.
pub(super) fn refused(opened: &[Opened], quorum: usize) -> Result<()> {
    let answered = opened.iter().filter(|o| o.is_ok()).count();
    let refusals: Vec<&Error> = opened
        .iter()
        .filter_map(|o| o.as_ref().err().and_then(Option::as_ref))
        .filter(|err| err.kind() == ErrorKind::InvalidInput)
        .collect();
    let Some(first) = refusals.first() else {
        return Ok(());
    };
    if answered >= quorum || answered + refusals.len() < quorum {
        return Ok(());
    }
    Err(Error::invalid(format!(
        "{} of the RedLock masters that answered refused the URL: {}",
        refusals.len(),
        first.message()
    ))
    .with_backend("redlock")
    .with_operation("connect"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_master_is_named_by_host_and_port_without_its_credentials() {
        let label = |url: &str| {
            let url = distlock_core::Url::parse(url).unwrap();
            Master::new(RedisConfig::from_url(&url).unwrap()).label()
        };
        assert_eq!(
            label("redis://app:s3cret@127.0.0.1:7001/0"),
            "127.0.0.1:7001"
        );
        assert_eq!(label("redis://:s3cret@localhost/0"), "localhost:6379");
        assert_eq!(label("redis://[::1]:7002"), "[::1]:7002");
    }
}
