//! Session targets for the suites: etcd and ZooKeeper behind fault proxies, whose clients'
//! sessions can be cut off and expired.

use std::any::Any;
use std::sync::Arc;
use std::time::Duration;

use distlock::Client;
use distlock::backend::Backend;
use distlock::etcd::EtcdBackend;
use distlock::zookeeper::ZkBackend;
use distlock_servers::{FaultProxy, ProxyMode, etcd_server, etcdctl, zookeeper_server};

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
    let proxy = Arc::new(
        FaultProxy::start(etcd.addr())
            .await
            .expect("a fault proxy starts"),
    );
    let url = format!("etcd://{}/distlock-tests?session_ttl=2s", proxy.addr());
    let faults_proxy = proxy.clone();
    let server = etcd.addr().to_string();
    Target::new(url)
        .with_session_faults(move |client: &Client| {
            let backend = distlock::backend::backend_of(client).clone();
            let etcd: &dyn Any = backend.as_ref();
            etcd.downcast_ref::<EtcdBackend>()?;
            Some(Box::new(EtcdFaults {
                proxy: faults_proxy.clone(),
                server: server.clone(),
                backend,
            }) as Box<dyn SessionFaults>)
        })
        .keep(proxy)
        .keep(etcd)
}

/// The session faults of one client of an [`etcd_target`].
struct EtcdFaults {
    proxy: Arc<FaultProxy>,
    /// The member's own address, behind the proxy.
    server: String,
    backend: Arc<dyn Backend>,
}

#[distlock::backend::async_trait]
impl SessionFaults for EtcdFaults {
    async fn suspend(&self) {
        self.proxy.set(ProxyMode::Cut);
    }

    async fn resume(&self) {
        self.proxy.set(ProxyMode::Pass);
    }

    /// Waits for the client's live session (one that ended may still be granting the next
    /// lease), revokes its lease with `etcdctl` while the client cannot reach the member,
    /// then lets it reach the member again and waits (at most 10 s) until it has noticed.
    async fn expire(&self) {
        let backend: &dyn Any = self.backend.as_ref();
        let etcd = backend
            .downcast_ref::<EtcdBackend>()
            .expect("an etcd backend");
        let mut session = self.backend.session().expect("a session backend");
        // A client whose last session ended may still be granting the next one's lease.
        let granted = session.wait_for(|s| s.is_alive());
        tokio::time::timeout(Duration::from_secs(10), granted)
            .await
            .expect("the client has a live session within 10 s")
            .expect("the session channel stays open");
        let ended = session.borrow().id;
        let lease = etcd.lease().expect("a session lease");
        self.proxy.set(ProxyMode::Cut);
        let server = self.server.clone();
        let revoked = tokio::task::spawn_blocking(move || {
            etcdctl(&server, &["lease", "revoke", &format!("{lease:x}")])
        })
        .await
        .expect("etcdctl runs");
        self.proxy.set(ProxyMode::Pass);
        revoked.expect("etcdctl revokes the session's lease");
        let noticed = session.wait_for(|s| s.id != ended || !s.is_alive());
        tokio::time::timeout(Duration::from_secs(10), noticed)
            .await
            .expect("the client notices the end of its session within 10 s")
            .expect("the session channel stays open");
    }
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
    let proxy = Arc::new(
        FaultProxy::start(zk.addr())
            .await
            .expect("a fault proxy starts"),
    );
    let url = format!(
        "zk://{}/distlock-tests?session_timeout=1500ms",
        proxy.addr()
    );
    let faults_proxy = proxy.clone();
    let server = zk.addr().to_string();
    Target::new(url)
        .with_session_faults(move |client: &Client| {
            let backend = distlock::backend::backend_of(client).clone();
            let zk: &dyn Any = backend.as_ref();
            zk.downcast_ref::<ZkBackend>()?;
            Some(Box::new(ZkFaults {
                proxy: faults_proxy.clone(),
                server: server.clone(),
                backend,
            }) as Box<dyn SessionFaults>)
        })
        .keep(proxy)
        .keep(zk)
}

/// The session faults of one client of a [`zookeeper_target`].
struct ZkFaults {
    proxy: Arc<FaultProxy>,
    /// The server's own address, behind the proxy.
    server: String,
    backend: Arc<dyn Backend>,
}

#[distlock::backend::async_trait]
impl SessionFaults for ZkFaults {
    async fn suspend(&self) {
        self.proxy.set(ProxyMode::Cut);
    }

    async fn resume(&self) {
        self.proxy.set(ProxyMode::Pass);
    }

    /// Closes the session on the server while the client cannot reach it, then lets it
    /// reach the server again and waits (at most 10 s) until it has noticed.
    async fn expire(&self) {
        let backend: &dyn Any = self.backend.as_ref();
        let zk = backend
            .downcast_ref::<ZkBackend>()
            .expect("a ZooKeeper backend");
        let mut session = self.backend.session().expect("a session backend");
        let ended = session.borrow().id;
        self.proxy.set(ProxyMode::Cut);
        let closed = zk.close_session_from(&self.server).await;
        self.proxy.set(ProxyMode::Pass);
        closed.unwrap_or_else(|e| panic!("cannot close the session: {e}"));
        let noticed = session.wait_for(|s| s.id != ended || !s.is_alive());
        tokio::time::timeout(Duration::from_secs(10), noticed)
            .await
            .expect("the client notices the end of its session within 10 s")
            .expect("the session channel stays open");
    }
}
