//! Session targets for the suites: etcd and ZooKeeper behind fault proxies, whose clients'
//! sessions can be cut off and expired.

use std::any::Any;
use std::sync::Arc;
use std::time::Duration;

use distlock::Client;
use distlock::backend::{Backend, async_trait};
use distlock::etcd::EtcdBackend;
use distlock::zookeeper::ZkBackend;
use distlock_servers::{FaultProxy, ProxyMode, Server, etcd_server, etcdctl, zookeeper_server};

use crate::conformance::{SessionFaults, Target};

/// An etcd target: a fresh member behind a fault proxy, clients with 2 s session leases
/// under the prefix `distlock-tests`. Its session faults cut the proxy (every client of the
/// target loses contact) and expire one client's session (revoking its lease from a direct
/// connection while the proxy is cut).
///
/// # Examples
///
/// ```no_run
/// # distlock_testkit::block_on(async {
/// let target = distlock_testkit::etcd_target().await;
/// let client = target.client().await;
/// # });
/// ```
pub async fn etcd_target() -> Target {
    let etcd = etcd_server().unwrap_or_else(|e| panic!("{e}"));
    proxied_target::<EtcdBackend>(etcd, |proxy| {
        format!("etcd://{proxy}/distlock-tests?session_ttl=2s")
    })
    .await
}

/// A ZooKeeper target: a fresh server behind a fault proxy, clients with 1.5 s sessions
/// under base `/distlock-tests`. Its session faults cut the proxy (every client of the
/// target loses contact) and expire one client's session on the server (closing it from
/// a direct connection while the proxy is cut).
///
/// # Examples
///
/// ```no_run
/// # distlock_testkit::block_on(async {
/// let target = distlock_testkit::zookeeper_target().await;
/// let client = target.client().await;
/// # });
/// ```
pub async fn zookeeper_target() -> Target {
    let zk = zookeeper_server().unwrap_or_else(|e| panic!("{e}"));
    proxied_target::<ZkBackend>(zk, |proxy| {
        format!("zk://{proxy}/distlock-tests?session_timeout=1500ms")
    })
    .await
}

/// A session store's backend whose session a test can end from the server's side.
#[async_trait]
trait EndsSessions: Send + Sync + 'static {
    /// Whether a client whose last session ended makes the next one at once (and may be
    /// making it still), so a test waits for it before it ends it.
    const MAKES_THE_NEXT_AT_ONCE: bool;

    /// Ends this client's live session through a connection of the test's own to
    /// `server`, while the client's own connection is cut off.
    async fn end_session_from(&self, server: &str) -> Result<(), String>;
}

#[async_trait]
impl EndsSessions for EtcdBackend {
    /// It grants the next session's lease as the last one ends.
    const MAKES_THE_NEXT_AT_ONCE: bool = true;

    /// Revokes the session's lease with `etcdctl`.
    async fn end_session_from(&self, server: &str) -> Result<(), String> {
        let lease = self.lease().ok_or("the client has no session lease")?;
        let server = server.to_owned();
        let revoked = tokio::task::spawn_blocking(move || {
            etcdctl(&server, &["lease", "revoke", &format!("{lease:x}")])
        });
        match revoked.await {
            Ok(Some(_)) => Ok(()),
            Ok(None) => Err("etcdctl did not revoke the session's lease".into()),
            Err(e) => Err(format!("etcdctl did not run: {e}")),
        }
    }
}

#[async_trait]
impl EndsSessions for ZkBackend {
    const MAKES_THE_NEXT_AT_ONCE: bool = false;

    /// Closes the session on the server.
    async fn end_session_from(&self, server: &str) -> Result<(), String> {
        let closed = self.close_session_from(server).await;
        closed.map_err(|e| format!("cannot close the session: {e}"))
    }
}

/// A target on `server` behind a fault proxy, its URL made by `url` from the proxy's
/// address, with the session faults of [`ProxiedFaults`] for clients whose backend is a
/// `B`.
async fn proxied_target<B: EndsSessions>(
    server: Server,
    url: impl FnOnce(std::net::SocketAddr) -> String,
) -> Target {
    let proxy = Arc::new(
        FaultProxy::start(server.addr())
            .await
            .expect("a fault proxy starts"),
    );
    let faults_proxy = proxy.clone();
    let direct = server.addr().to_string();
    Target::new(url(proxy.addr()))
        .with_session_faults(move |client: &Client| {
            let backend = distlock::backend::backend_of(client).clone();
            let store: &dyn Any = backend.as_ref();
            store.downcast_ref::<B>()?;
            Some(Box::new(ProxiedFaults::<B> {
                proxy: faults_proxy.clone(),
                server: direct.clone(),
                backend,
                store: std::marker::PhantomData,
            }) as Box<dyn SessionFaults>)
        })
        .keep(proxy)
        .keep(server)
}

/// The session faults of one client of a proxied target, whose backend is a `B`.
struct ProxiedFaults<B> {
    proxy: Arc<FaultProxy>,
    /// The server's own address, behind the proxy.
    server: String,
    backend: Arc<dyn Backend>,
    store: std::marker::PhantomData<fn() -> B>,
}

#[async_trait]
impl<B: EndsSessions> SessionFaults for ProxiedFaults<B> {
    async fn suspend(&self) {
        self.proxy.set(ProxyMode::Cut);
    }

    async fn resume(&self) {
        self.proxy.set(ProxyMode::Pass);
    }

    /// Waits for the client's live session where the client makes the next one at once
    /// (see [`EndsSessions::MAKES_THE_NEXT_AT_ONCE`]), ends it from the server's side while
    /// the client cannot reach the server, then lets it reach the server again and waits
    /// (at most 10 s) until it has noticed.
    async fn expire(&self) {
        let backend: &dyn Any = self.backend.as_ref();
        let store = backend.downcast_ref::<B>().expect("the target's backend");
        let mut session = self.backend.session().expect("a session backend");
        if B::MAKES_THE_NEXT_AT_ONCE {
            let live = session.wait_for(|s| s.is_alive());
            tokio::time::timeout(Duration::from_secs(10), live)
                .await
                .expect("the client has a live session within 10 s")
                .expect("the session channel stays open");
        }
        let ended = session.borrow().id;
        self.proxy.set(ProxyMode::Cut);
        let ending = store.end_session_from(&self.server).await;
        self.proxy.set(ProxyMode::Pass);
        ending.unwrap_or_else(|e| panic!("{e}"));
        let noticed = session.wait_for(|s| s.id != ended || !s.is_alive());
        tokio::time::timeout(Duration::from_secs(10), noticed)
            .await
            .expect("the client notices the end of its session within 10 s")
            .expect("the session channel stays open");
    }
}
