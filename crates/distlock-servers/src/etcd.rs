//! etcd for tests: members from Debian's `etcd-server` package, alone, over TLS or as a
//! cluster, and `etcdctl` beside them.

use std::time::Duration;

use crate::launchers::TestCertificates;
use crate::server::{Server, failed, spare_port};
use crate::spec::{LaunchError, Ready, ServerSpec};

/// What an etcd member logs (with the `zap` logger) once it serves clients, over TLS or
/// not.
const READY: &str = "serving client traffic";

/// One member's command line: `name` in `cluster` (`name=http://127.0.0.1:port,…`), peers
/// on `peer_port`, clients on the launch's port over `client_scheme`, a 50 ms heartbeat and
/// a 500 ms election timeout (so leases from 1 s up are granted as asked, and a lost
/// leader is replaced within a second), its data in the launch's directory, written without
/// waiting for the disk; `extra` adds to them.
fn member(
    name: &str,
    peer_port: u16,
    cluster: &str,
    client_scheme: &str,
    extra: &[&str],
) -> ServerSpec {
    let client_url = format!("{client_scheme}://127.0.0.1:{{port}}");
    let peer_url = format!("http://127.0.0.1:{peer_port}");
    let args = [
        "--name",
        name,
        "--data-dir",
        "{dir}/data",
        "--listen-client-urls",
        &client_url,
        "--advertise-client-urls",
        &client_url,
        "--listen-peer-urls",
        &peer_url,
        "--initial-advertise-peer-urls",
        &peer_url,
        "--initial-cluster",
        cluster,
        "--initial-cluster-token",
        "distlock-tests",
        "--heartbeat-interval",
        "50",
        "--election-timeout",
        "500",
        "--logger",
        "zap",
    ];
    ServerSpec::new("etcd", args.iter().chain(extra).copied())
        .ready(Ready::LogLine(READY.into()))
        .install_hint("apt-get install etcd-server")
}

/// A fresh single-member etcd (Debian's `etcd-server`) on a free loopback port, its data in
/// a temporary directory.
///
/// # Examples
///
/// ```no_run
/// let etcd = distlock_servers::etcd_server()?;
/// let url = format!("etcd://{}/locks", etcd.addr());
/// # Ok::<(), distlock_servers::LaunchError>(())
/// ```
pub fn etcd_server() -> Result<Server, LaunchError> {
    etcd_server_with(&[])
}

/// A single-member etcd as [`etcd_server`], started with the `extra` flags as well.
///
/// # Examples
///
/// ```no_run
/// let etcd = distlock_servers::etcd_server_with(&["--auth-token-ttl", "1"])?;
/// # Ok::<(), distlock_servers::LaunchError>(())
/// ```
pub fn etcd_server_with(extra: &[&str]) -> Result<Server, LaunchError> {
    let peer = spare_port()?;
    Server::start(member(
        "solo",
        peer,
        &format!("solo=http://127.0.0.1:{peer}"),
        "http",
        extra,
    ))
}

/// A single-member etcd (as [`etcd_server`]) that serves clients only over TLS, with
/// `certs`' server certificate.
///
/// # Examples
///
/// ```no_run
/// let dir = tempfile::tempdir().unwrap();
/// let certs = distlock_servers::TestCertificates::make(dir.path())?;
/// let etcd = distlock_servers::etcd_tls_server(&certs)?;
/// let url = format!("etcds://{}/locks?tls_ca={}", etcd.addr(), certs.ca.display());
/// # Ok::<(), distlock_servers::LaunchError>(())
/// ```
pub fn etcd_tls_server(certs: &TestCertificates) -> Result<Server, LaunchError> {
    let peer = spare_port()?;
    let cert = certs.cert.display().to_string();
    let key = certs.key.display().to_string();
    Server::start(member(
        "secure",
        peer,
        &format!("secure=http://127.0.0.1:{peer}"),
        "https",
        &["--cert-file", &cert, "--key-file", &key],
    ))
}

/// An etcd cluster for tests: its members, each a [`Server`] that can be killed, paused
/// and restarted.
#[derive(Debug)]
pub struct EtcdCluster {
    /// The members, in the order they were named (`m1`, `m2`, …).
    pub members: Vec<Server>,
}

impl EtcdCluster {
    /// The members' client addresses, `host:port` separated by commas, for an `etcd://`
    /// URL.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// let cluster = distlock_servers::etcd_cluster(3)?;
    /// let url = format!("etcd://{}/locks?session_ttl=2s", cluster.hosts());
    /// # Ok::<(), distlock_servers::LaunchError>(())
    /// ```
    pub fn hosts(&self) -> String {
        self.members
            .iter()
            .map(|m| m.addr().to_string())
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The index of the member that leads now, as `etcdctl endpoint status` reports it.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// let cluster = distlock_servers::etcd_cluster(3)?;
    /// let leader = cluster.leader();
    /// # Ok::<(), distlock_servers::LaunchError>(())
    /// ```
    pub fn leader(&self) -> Option<usize> {
        self.members.iter().position(|member| {
            member_status(member)
                .and_then(|status| {
                    Some(status["leader"].as_u64()? == status["header"]["member_id"].as_u64()?)
                })
                .unwrap_or(false)
        })
    }

    /// Waits at most `within` until every running member reports a leader (a member cut
    /// from its quorum reports none); true if they all did.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// let cluster = distlock_servers::etcd_cluster(3)?;
    /// assert!(cluster.wait_serving(std::time::Duration::from_secs(10)));
    /// # Ok::<(), distlock_servers::LaunchError>(())
    /// ```
    pub fn wait_serving(&self, within: Duration) -> bool {
        crate::server::wait_until(within, || {
            self.members
                .iter()
                .filter(|m| m.pid().is_some())
                .all(|m| member_status(m).is_some_and(|s| s["leader"].as_u64() > Some(0)))
        })
    }
}

/// What `member` says of itself to `etcdctl endpoint status` (its `Status` object), if it
/// answers.
fn member_status(member: &Server) -> Option<serde_json::Value> {
    let out = etcdctl(
        &member.addr().to_string(),
        &["endpoint", "status", "-w", "json"],
    )?;
    let mut statuses: serde_json::Value = serde_json::from_str(&out).ok()?;
    Some(statuses[0]["Status"].take())
}

/// Runs Debian's `etcdctl` (API v3) against `endpoints` with `args`: its output, if it
/// succeeded.
///
/// # Examples
///
/// ```no_run
/// let etcd = distlock_servers::etcd_server()?;
/// let keys = distlock_servers::etcdctl(&etcd.addr().to_string(), &["get", "--prefix", "a/"]);
/// # Ok::<(), distlock_servers::LaunchError>(())
/// ```
pub fn etcdctl(endpoints: &str, args: &[&str]) -> Option<String> {
    let out = std::process::Command::new("etcdctl")
        .env("ETCDCTL_API", "3")
        .args([
            "--endpoints",
            endpoints,
            "--dial-timeout",
            "2s",
            "--command-timeout",
            "5s",
        ])
        .args(args)
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// An etcd cluster of `size` members on free loopback ports, started together, returned
/// once every member serves clients.
///
/// # Examples
///
/// ```no_run
/// let cluster = distlock_servers::etcd_cluster(3)?;
/// # Ok::<(), distlock_servers::LaunchError>(())
/// ```
pub fn etcd_cluster(size: usize) -> Result<EtcdCluster, LaunchError> {
    let peers = (1..=size)
        .map(|id| Ok((format!("m{id}"), spare_port()?)))
        .collect::<Result<Vec<_>, LaunchError>>()?;
    let cluster = peers
        .iter()
        .map(|(name, port)| format!("{name}=http://127.0.0.1:{port}"))
        .collect::<Vec<_>>()
        .join(",");
    // Members start in the background: each one is ready only once a quorum formed.
    let launches: Vec<_> = peers
        .iter()
        .map(|(name, port)| {
            let spec = member(name, *port, &cluster, "http", &[]);
            std::thread::spawn(move || Server::start(spec))
        })
        .collect();
    let mut members = Vec::new();
    for launch in launches {
        let started = launch
            .join()
            .map_err(|_| failed("an etcd member's launch panicked".into(), ""))?;
        members.push(started?);
    }
    Ok(EtcdCluster { members })
}

/// What an etcd member at `endpoint` counts of its watches (from its `/metrics`): the
/// watch streams open on it, and the watchers on them. `None` if it does not answer within
/// two seconds.
///
/// # Examples
///
/// ```no_run
/// let etcd = distlock_servers::etcd_server()?;
/// let (streams, watchers) = distlock_servers::etcd_watch_counts(etcd.addr()).expect("etcd answers");
/// assert_eq!((streams, watchers), (0, 0));
/// # Ok::<(), distlock_servers::LaunchError>(())
/// ```
pub fn etcd_watch_counts(endpoint: std::net::SocketAddr) -> Option<(u64, u64)> {
    use std::io::{Read, Write};
    let within = Duration::from_secs(2);
    let mut http = std::net::TcpStream::connect_timeout(&endpoint, within).ok()?;
    http.set_read_timeout(Some(within)).ok()?;
    write!(http, "GET /metrics HTTP/1.0\r\nHost: {endpoint}\r\n\r\n").ok()?;
    let mut page = String::new();
    http.read_to_string(&mut page).ok()?;
    let gauge = |name: &str| {
        page.lines().find_map(|line| {
            let value = line.strip_prefix(name)?.strip_prefix(' ')?;
            value.parse::<f64>().ok().map(|v| v as u64)
        })
    };
    Some((
        gauge("etcd_debugging_mvcc_watch_stream_total")?,
        gauge("etcd_debugging_mvcc_watcher_total")?,
    ))
}
