//! ZooKeeper for tests: a standalone server from Debian's `zookeeper` package, and a lock
//! target whose clients' sessions can be cut off and expired.

use std::any::Any;
use std::sync::Arc;
use std::time::Duration;

use distlock::Client;
use distlock::backend::Backend;
use distlock::zookeeper::ZkBackend;

use crate::conformance::{SessionFaults, Target};
use crate::proxy::{FaultProxy, ProxyMode};
use crate::server::{LaunchError, Ready, Server, ServerSpec};

/// Where Debian installs ZooKeeper's jar (its dependencies are named in its manifest) and
/// a logger for its log.
const CLASSPATH: &str = "/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-simple.jar";

/// A fresh standalone ZooKeeper (`ZooKeeperServerMain` from Debian's `zookeeper` package)
/// on a free loopback port, its data in a temporary directory (written without waiting for
/// the disk), with a 100 ms tick, so session timeouts from 200 ms up are granted as asked,
/// and the admin server off.
///
/// # Examples
///
/// ```no_run
/// let zk = distlock_testkit::zookeeper_server()?;
/// let url = format!("zk://{}/locks", zk.addr());
/// # Ok::<(), distlock_testkit::LaunchError>(())
/// ```
pub fn zookeeper_server() -> Result<Server, LaunchError> {
    if !std::path::Path::new("/usr/share/java/zookeeper.jar").is_file() {
        return Err(LaunchError::Missing {
            program: "/usr/share/java/zookeeper.jar".into(),
            hint: "apt-get install zookeeper".into(),
        });
    }
    Server::start(
        ServerSpec::new(
            "java",
            [
                "-Xmx256m",
                "-XX:+UseSerialGC",
                "-XX:TieredStopAtLevel=1",
                "-Dzookeeper.admin.enableServer=false",
                "-Dzookeeper.4lw.commands.whitelist=*",
                "-cp",
                CLASSPATH,
                "org.apache.zookeeper.server.ZooKeeperServerMain",
                "{dir}/zoo.cfg",
            ],
        )
        .file(
            "zoo.cfg",
            "tickTime=100\ndataDir={dir}/data\nclientPort={port}\nclientPortAddress=127.0.0.1\nforceSync=no\n\
             minSessionTimeout=200\nmaxSessionTimeout=60000\nadmin.enableServer=false\n",
        )
        .ready(Ready::LogLine("ZooKeeper audit is".into()))
        .install_hint("apt-get install zookeeper default-jre-headless"),
    )
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
            let backend = client.backend().clone();
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
