//! ZooKeeper for tests: a standalone server from Debian's `zookeeper` package, over TLS or
//! as an ensemble.

use std::time::Duration;

use crate::launchers::TestCertificates;
use crate::server::{Server, failed, spare_port};
use crate::spec::{LaunchError, Ready, ServerSpec};

/// Where Debian installs ZooKeeper's jar (most of its dependencies are named in its
/// manifest; not Netty's codec, which its Netty connection factory needs) and a logger for
/// its log.
const CLASSPATH: &str = "/usr/share/java/zookeeper.jar:/usr/share/java/netty-codec.jar:/usr/share/java/slf4j-simple.jar";

/// A fresh standalone ZooKeeper (`ZooKeeperServerMain` from Debian's `zookeeper` package)
/// on a free loopback port, its data in a temporary directory (written without waiting for
/// the disk), with a 100 ms tick, so session timeouts from 200 ms up are granted as asked,
/// and the admin server off.
///
/// # Examples
///
/// ```no_run
/// let zk = distlock_servers::zookeeper_server()?;
/// let url = format!("zk://{}/locks", zk.addr());
/// # Ok::<(), distlock_servers::LaunchError>(())
/// ```
pub fn zookeeper_server() -> Result<Server, LaunchError> {
    require_installed()?;
    Server::start(
        spec("org.apache.zookeeper.server.ZooKeeperServerMain", "")
            .ready(Ready::LogLine("ZooKeeper audit is".into())),
    )
}

/// The settings every test server shares: a 100 ms tick, sessions from 200 ms, no admin
/// server, data not synced to disk, Netty serving clients; `extra` adds to them.
fn spec(main_class: &str, extra: &str) -> ServerSpec {
    ServerSpec::new(
        "java",
        [
            "-Xmx256m",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            "-Dzookeeper.admin.enableServer=false",
            "-Dzookeeper.4lw.commands.whitelist=*",
            // Netty serves TLS (and plain connections as well as the default does).
            "-Dzookeeper.serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory",
            "-cp",
            CLASSPATH,
            main_class,
            "{dir}/zoo.cfg",
        ],
    )
    .file(
        "zoo.cfg",
        &format!(
            "tickTime=100\ndataDir={{dir}}/data\nclientPort={{port}}\nclientPortAddress=127.0.0.1\n\
             forceSync=no\nminSessionTimeout=200\nmaxSessionTimeout=60000\n\
             admin.enableServer=false\n{extra}"
        ),
    )
    .install_hint("apt-get install zookeeper default-jre-headless")
}

/// A standalone ZooKeeper (as [`zookeeper_server`]) that also serves TLS on a second
/// loopback port with `certs`' server certificate (PEM key store), returned with that
/// port's address.
///
/// # Examples
///
/// ```no_run
/// let dir = tempfile::tempdir().unwrap();
/// let certs = distlock_servers::TestCertificates::make(dir.path())?;
/// let (zk, secure) = distlock_servers::zookeeper_tls_server(&certs)?;
/// let url = format!("zks://{secure}/locks?tls_ca={}", certs.ca.display());
/// # Ok::<(), distlock_servers::LaunchError>(())
/// ```
pub fn zookeeper_tls_server(
    certs: &TestCertificates,
) -> Result<(Server, std::net::SocketAddr), LaunchError> {
    require_installed()?;
    let read = |path: &std::path::Path| {
        std::fs::read_to_string(path)
            .map_err(|e| failed(format!("cannot read {}: {e}", path.display()), ""))
    };
    let key_store = format!("{}{}", read(&certs.key)?, read(&certs.cert)?);
    let secure = spare_port()?;
    let settings = format!(
        "secureClientPort={secure}\nsecureClientPortAddress=127.0.0.1\n\
         ssl.keyStore.location={{dir}}/keystore.pem\nssl.keyStore.type=PEM\n\
         ssl.trustStore.location={ca}\nssl.trustStore.type=PEM\nssl.clientAuth=none\n",
        ca = certs.ca.display()
    );
    let server = Server::start(
        spec("org.apache.zookeeper.server.ZooKeeperServerMain", &settings)
            .file("keystore.pem", &key_store)
            .ready(Ready::LogLine("ZooKeeper audit is".into())),
    )?;
    Ok((server, std::net::SocketAddr::from(([127, 0, 0, 1], secure))))
}

/// A ZooKeeper ensemble for tests: its members, each a [`Server`] that can be killed,
/// paused and restarted.
#[derive(Debug)]
pub struct ZkEnsemble {
    /// The members, in the order of their ids (1, 2, …).
    pub members: Vec<Server>,
}

impl ZkEnsemble {
    /// The members' client addresses, `host:port` separated by commas, for a `zk://` URL.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// let ensemble = distlock_servers::zookeeper_ensemble(3)?;
    /// let url = format!("zk://{}/locks", ensemble.hosts());
    /// # Ok::<(), distlock_servers::LaunchError>(())
    /// ```
    pub fn hosts(&self) -> String {
        let addrs: Vec<String> = self.members.iter().map(|m| m.addr().to_string()).collect();
        addrs.join(",")
    }

    /// Which member leads now, if any answers that it does (the `srvr` command).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// let ensemble = distlock_servers::zookeeper_ensemble(3)?;
    /// assert!(ensemble.leader().is_some());
    /// # Ok::<(), distlock_servers::LaunchError>(())
    /// ```
    pub fn leader(&self) -> Option<usize> {
        self.members
            .iter()
            .position(|m| four_letter_word(m, "srvr").contains("Mode: leader"))
    }

    /// Waits (at most `within`) until the members that run serve requests again (a
    /// quorum formed); true if they do.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// let ensemble = distlock_servers::zookeeper_ensemble(3)?;
    /// assert!(ensemble.wait_serving(std::time::Duration::from_secs(30)));
    /// # Ok::<(), distlock_servers::LaunchError>(())
    /// ```
    pub fn wait_serving(&self, within: Duration) -> bool {
        crate::server::wait_until(within, || {
            self.members
                .iter()
                .filter(|m| m.pid().is_some())
                .all(|m| four_letter_word(m, "srvr").contains("Mode: "))
        })
    }
}

/// What `member` answers to the four-letter command `word` (empty if it does not).
fn four_letter_word(member: &Server, word: &str) -> String {
    use std::io::{Read, Write};
    let Ok(mut stream) =
        std::net::TcpStream::connect_timeout(&member.addr(), Duration::from_millis(500))
    else {
        return String::new();
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    let mut answer = String::new();
    if stream.write_all(word.as_bytes()).is_ok() {
        let _ = stream.read_to_string(&mut answer);
    }
    answer
}

/// A ZooKeeper ensemble of `size` members (`QuorumPeerMain` from Debian's package) on
/// free loopback ports, started together, returned once a quorum serves requests.
///
/// # Examples
///
/// ```no_run
/// let ensemble = distlock_servers::zookeeper_ensemble(3)?;
/// let url = format!("zk://{}/locks?session_timeout=4s", ensemble.hosts());
/// # Ok::<(), distlock_servers::LaunchError>(())
/// ```
pub fn zookeeper_ensemble(size: usize) -> Result<ZkEnsemble, LaunchError> {
    require_installed()?;
    let mut peers = String::new();
    for id in 1..=size {
        peers.push_str(&format!(
            "server.{id}=127.0.0.1:{}:{}\n",
            spare_port()?,
            spare_port()?
        ));
    }
    let settings = format!("initLimit=50\nsyncLimit=20\n4lw.commands.whitelist=*\n{peers}");
    let mut members = Vec::new();
    for id in 1..=size {
        members.push(Server::start(
            spec(
                "org.apache.zookeeper.server.quorum.QuorumPeerMain",
                &settings,
            )
            .file("data/myid", &id.to_string())
            .ready(Ready::TcpConnect),
        )?);
    }
    let ensemble = ZkEnsemble { members };
    if !ensemble.wait_serving(Duration::from_secs(60)) {
        return Err(LaunchError::Failed {
            reason: "the ensemble formed no quorum within 60 s".into(),
            log_tail: ensemble
                .members
                .iter()
                .map(Server::log)
                .collect::<Vec<_>>()
                .join("\n"),
        });
    }
    Ok(ensemble)
}

/// Fails clearly when Debian's `zookeeper` package is not installed.
fn require_installed() -> Result<(), LaunchError> {
    if std::path::Path::new("/usr/share/java/zookeeper.jar").is_file() {
        return Ok(());
    }
    Err(LaunchError::Missing {
        program: "/usr/share/java/zookeeper.jar".into(),
        hint: "apt-get install zookeeper".into(),
    })
}
