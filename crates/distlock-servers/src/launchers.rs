//! Launchers for the servers backends are tested against, from the installed binaries.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::server::{Server, failed, spare_port};
use crate::spec::{LaunchError, Ready, ServerSpec};

/// A fresh `redis-server` on a free loopback port in a temporary directory, keeping
/// nothing on disk.
///
/// # Examples
///
/// ```no_run
/// let redis = distlock_servers::redis_server()?;
/// let url = format!("redis://{}/0", redis.addr());
/// # Ok::<(), distlock_servers::LaunchError>(())
/// ```
pub fn redis_server() -> Result<Server, LaunchError> {
    redis_server_with(&[])
}

/// [`redis_server`] with extra command-line settings, e.g. `["--requirepass", "secret"]`.
///
/// # Examples
///
/// ```no_run
/// let redis = distlock_servers::redis_server_with(&["--requirepass", "s3cret"])?;
/// # Ok::<(), distlock_servers::LaunchError>(())
/// ```
pub fn redis_server_with(extra: &[&str]) -> Result<Server, LaunchError> {
    Server::start(redis_spec(extra))
}

/// What [`redis_server_with`] starts, to add to before it starts: an environment, files.
///
/// # Examples
///
/// ```no_run
/// use distlock_servers::{Server, redis_spec};
/// let redis = Server::start(redis_spec(&[]).env("MALLOC_ARENA_MAX", "2"))?;
/// # Ok::<(), distlock_servers::LaunchError>(())
/// ```
pub fn redis_spec(extra: &[&str]) -> ServerSpec {
    let base = [
        "--port",
        "{port}",
        "--bind",
        "127.0.0.1",
        "--save",
        "",
        "--appendonly",
        "no",
        "--dir",
        "{dir}",
    ];
    ServerSpec::new("redis-server", base.iter().chain(extra).copied())
        .ready(Ready::LogLine("Ready to accept connections".into()))
        .install_hint("apt-get install redis-server")
}

/// A certificate authority and a server certificate for 127.0.0.1, made with the installed
/// `openssl` in `dir`, for servers started with TLS.
#[derive(Debug, Clone)]
pub struct TestCertificates {
    /// The authority clients trust (PEM).
    pub ca: PathBuf,
    /// The server's certificate (PEM), for 127.0.0.1.
    pub cert: PathBuf,
    /// The server's private key (PEM).
    pub key: PathBuf,
}

impl TestCertificates {
    /// Makes a fresh authority and server certificate in `dir`.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// let dir = tempfile::tempdir().unwrap();
    /// let certs = distlock_servers::TestCertificates::make(dir.path())?;
    /// # Ok::<(), distlock_servers::LaunchError>(())
    /// ```
    pub fn make(dir: &Path) -> Result<TestCertificates, LaunchError> {
        let path = |name: &str| dir.join(name).display().to_string();
        std::fs::write(dir.join("san.cnf"), "subjectAltName=IP:127.0.0.1\n").map_err(|e| {
            failed(
                format!("cannot write the certificate extension file: {e}"),
                "",
            )
        })?;
        let steps: [Vec<String>; 3] = [
            [
                "req",
                "-x509",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-days",
                "2",
                "-subj",
                "/CN=distlock test CA",
                "-keyout",
            ]
            .iter()
            .map(|s| s.to_string())
            .chain([path("ca.key"), "-out".into(), path("ca.crt")])
            .collect(),
            [
                "req",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-subj",
                "/CN=127.0.0.1",
                "-keyout",
            ]
            .iter()
            .map(|s| s.to_string())
            .chain([path("server.key"), "-out".into(), path("server.csr")])
            .collect(),
            ["x509", "-req", "-days", "2", "-CAcreateserial", "-in"]
                .iter()
                .map(|s| s.to_string())
                .chain([
                    path("server.csr"),
                    "-CA".into(),
                    path("ca.crt"),
                    "-CAkey".into(),
                    path("ca.key"),
                ])
                .chain([
                    "-extfile".into(),
                    path("san.cnf"),
                    "-out".into(),
                    path("server.crt"),
                ])
                .collect(),
        ];
        for args in steps {
            let out =
                Command::new("openssl")
                    .args(&args)
                    .output()
                    .map_err(|e| LaunchError::Missing {
                        program: "openssl".into(),
                        hint: format!("apt-get install openssl ({e})"),
                    })?;
            if !out.status.success() {
                return Err(failed(
                    format!(
                        "openssl {} failed: {}",
                        args[0],
                        String::from_utf8_lossy(&out.stderr)
                    ),
                    "",
                ));
            }
        }
        Ok(TestCertificates {
            ca: dir.join("ca.crt"),
            cert: dir.join("server.crt"),
            key: dir.join("server.key"),
        })
    }
}

impl TestCertificates {
    /// `spec` with copies of the authority, the server's certificate and its private key in
    /// the server's directory (`ca.crt`, `server.crt`, `server.key`), readable by the
    /// server's user alone, as database servers want their key.
    fn give_server(&self, spec: ServerSpec) -> Result<ServerSpec, LaunchError> {
        let read = |path: &Path| {
            std::fs::read_to_string(path)
                .map_err(|e| failed(format!("cannot read {}: {e}", path.display()), ""))
        };
        Ok(spec
            .file("ca.crt", &read(&self.ca)?)
            .file("server.crt", &read(&self.cert)?)
            .file("server.key", &read(&self.key)?))
    }
}

fn redis_cli_program() -> Result<PathBuf, LaunchError> {
    crate::find_program("redis-cli").ok_or_else(|| LaunchError::Missing {
        program: "redis-cli".into(),
        hint: "apt-get install redis-tools".into(),
    })
}

/// A `redis-server` that speaks only TLS, with `certs`, on a free loopback port.
///
/// # Examples
///
/// ```no_run
/// let dir = tempfile::tempdir().unwrap();
/// let certs = distlock_servers::TestCertificates::make(dir.path())?;
/// let redis = distlock_servers::redis_tls_server(&certs)?;
/// let url = format!("rediss://{}/0?tls_ca={}", redis.addr(), certs.ca.display());
/// # Ok::<(), distlock_servers::LaunchError>(())
/// ```
pub fn redis_tls_server(certs: &TestCertificates) -> Result<Server, LaunchError> {
    let (cert, key, ca) = (
        certs.cert.display().to_string(),
        certs.key.display().to_string(),
        certs.ca.display().to_string(),
    );
    // Later settings win: the plain port is turned off and the chosen port speaks TLS.
    redis_server_with(&[
        "--port",
        "0",
        "--tls-port",
        "{port}",
        "--tls-auth-clients",
        "no",
        "--tls-cert-file",
        &cert,
        "--tls-key-file",
        &key,
        "--tls-ca-cert-file",
        &ca,
    ])
}

/// The password of the database user the PostgreSQL and MariaDB launchers create.
pub const DATABASE_PASSWORD: &str = "distlock-test-pw";

/// A fresh PostgreSQL server (`initdb`, then `postgres`) from the installed binaries, on a
/// free loopback port in a temporary directory. As root, it runs as the `postgres` user.
/// Connections over TCP need the password: use [`postgres_url`].
///
/// # Examples
///
/// ```no_run
/// let pg = distlock_servers::postgres_server()?;
/// let url = distlock_servers::postgres_url(&pg);
/// # Ok::<(), distlock_servers::LaunchError>(())
/// ```
pub fn postgres_server() -> Result<Server, LaunchError> {
    Server::start(postgres_spec(&[]))
}

/// A [`postgres_server`] that takes connections over TCP only with TLS, with `certs`.
///
/// # Examples
///
/// ```no_run
/// let dir = tempfile::tempdir().unwrap();
/// let certs = distlock_servers::TestCertificates::make(dir.path())?;
/// let pg = distlock_servers::postgres_tls_server(&certs)?;
/// let url = format!(
///     "{}?sslmode=verify-full&sslrootcert={}",
///     distlock_servers::postgres_url(&pg),
///     certs.ca.display()
/// );
/// # Ok::<(), distlock_servers::LaunchError>(())
/// ```
pub fn postgres_tls_server(certs: &TestCertificates) -> Result<Server, LaunchError> {
    let spec = postgres_spec(&[
        "-c",
        "ssl=on",
        "-c",
        "ssl_cert_file={dir}/server.crt",
        "-c",
        "ssl_key_file={dir}/server.key",
        "-c",
        "hba_file={dir}/pg_hba.conf",
    ])
    .file(
        "pg_hba.conf",
        "local all all trust\nhostssl all all 127.0.0.1/32 scram-sha-256\n",
    );
    Server::start(certs.give_server(spec)?)
}

/// PostgreSQL's server with `extra` arguments.
fn postgres_spec(extra: &[&str]) -> ServerSpec {
    let base = [
        "-D",
        "{dir}/data",
        "-p",
        "{port}",
        "-k",
        "{dir}",
        "-c",
        "listen_addresses=127.0.0.1",
        "-c",
        "fsync=off",
        "-c",
        "max_connections=300",
        "-c",
        "shared_buffers=16MB",
    ];
    ServerSpec::new("postgres", base.iter().chain(extra).copied())
        .search(postgres_bin_dirs())
        .file("password", DATABASE_PASSWORD)
        .prepare(
            "initdb",
            [
                "-D",
                "{dir}/data",
                "-U",
                "postgres",
                "--pwfile={dir}/password",
                "--auth-local=trust",
                "--auth-host=scram-sha-256",
                "--no-sync",
                "-E",
                "UTF8",
                "--locale=C",
            ],
        )
        .run_as("postgres")
        .ready(Ready::LogLine(
            "database system is ready to accept connections".into(),
        ))
        .install_hint("apt-get install postgresql")
}

/// The URL of [`postgres_server`]'s `postgres` database, as its `postgres` user.
///
/// # Examples
///
/// ```no_run
/// let pg = distlock_servers::postgres_server()?;
/// assert!(distlock_servers::postgres_url(&pg).starts_with("postgres://"));
/// # Ok::<(), distlock_servers::LaunchError>(())
/// ```
pub fn postgres_url(server: &Server) -> String {
    format!(
        "postgres://postgres:{DATABASE_PASSWORD}@{}/postgres",
        server.addr()
    )
}

/// Debian keeps PostgreSQL's server programs in `/usr/lib/postgresql/<version>/bin`, off
/// `PATH`; the newest version first.
fn postgres_bin_dirs() -> Vec<PathBuf> {
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let version = entry.file_name().to_str()?.parse().ok()?;
            Some((version, entry.path().join("bin")))
        })
        .collect();
    versions.sort_by_key(|v| std::cmp::Reverse(v.0));
    versions.into_iter().map(|(_, dir)| dir).collect()
}

/// A fresh MariaDB server (`mariadb-install-db`, then `mariadbd`) on a free loopback port
/// in a temporary directory, with a database `distlock` and a user `distlock` who may do
/// anything. As root, it runs as the `mysql` user. Use [`mariadb_url`].
///
/// # Examples
///
/// ```no_run
/// let db = distlock_servers::mariadb_server()?;
/// let url = distlock_servers::mariadb_url(&db);
/// # Ok::<(), distlock_servers::LaunchError>(())
/// ```
pub fn mariadb_server() -> Result<Server, LaunchError> {
    Server::start(mariadb_spec(&[]))
}

/// A [`mariadb_server`] that takes connections over TCP only with TLS, with `certs`.
///
/// # Examples
///
/// ```no_run
/// let dir = tempfile::tempdir().unwrap();
/// let certs = distlock_servers::TestCertificates::make(dir.path())?;
/// let db = distlock_servers::mariadb_tls_server(&certs)?;
/// let url = format!(
///     "{}?ssl-mode=verify_identity&ssl-ca={}",
///     distlock_servers::mariadb_url(&db),
///     certs.ca.display()
/// );
/// # Ok::<(), distlock_servers::LaunchError>(())
/// ```
pub fn mariadb_tls_server(certs: &TestCertificates) -> Result<Server, LaunchError> {
    let spec = mariadb_spec(&[
        "--ssl-cert={dir}/server.crt",
        "--ssl-key={dir}/server.key",
        "--ssl-ca={dir}/ca.crt",
        "--require-secure-transport=ON",
    ]);
    Server::start(certs.give_server(spec)?)
}

/// MariaDB's server with `extra` arguments.
fn mariadb_spec(extra: &[&str]) -> ServerSpec {
    let init = format!(
        "CREATE USER IF NOT EXISTS 'distlock'@'127.0.0.1' IDENTIFIED BY '{DATABASE_PASSWORD}';\n\
         GRANT ALL ON *.* TO 'distlock'@'127.0.0.1';\n\
         CREATE DATABASE IF NOT EXISTS distlock;\n"
    );
    let base = [
        "--no-defaults",
        "--datadir={dir}/data",
        "--port={port}",
        "--bind-address=127.0.0.1",
        "--socket={dir}/mysqld.sock",
        "--pid-file={dir}/mysqld.pid",
        "--init-file={dir}/init.sql",
        "--skip-log-bin",
        "--innodb-buffer-pool-size=16M",
        "--innodb-flush-log-at-trx-commit=2",
        "--innodb-use-native-aio=0",
        "--tmpdir={dir}",
        "--max-connections=300",
    ];
    ServerSpec::new("mariadbd", base.iter().chain(extra).copied())
        .search(["/usr/sbin"])
        .file("init.sql", &init)
        .prepare(
            "mariadb-install-db",
            [
                "--no-defaults",
                "--datadir={dir}/data",
                "--skip-test-db",
                "--innodb-log-file-size=8M",
                // Servers set up at once clashed over temporary tables in the shared
                // /tmp, and over the machine's fixed number of kernel AIO contexts.
                "--tmpdir={dir}",
                "--innodb-use-native-aio=0",
            ],
        )
        .run_as("mysql")
        .ready(Ready::LogLine("ready for connections".into()))
        .install_hint("apt-get install mariadb-server")
}

/// The URL of [`mariadb_server`]'s `distlock` database, as its `distlock` user.
///
/// # Examples
///
/// ```no_run
/// let db = distlock_servers::mariadb_server()?;
/// assert!(distlock_servers::mariadb_url(&db).starts_with("mysql://"));
/// # Ok::<(), distlock_servers::LaunchError>(())
/// ```
pub fn mariadb_url(server: &Server) -> String {
    format!(
        "mysql://distlock:{DATABASE_PASSWORD}@{}/distlock",
        server.addr()
    )
}

/// A Redis Cluster of real `redis-server` nodes on free loopback ports: primaries holding
/// every slot, each with its replicas, made with `redis-cli --cluster create`.
#[derive(Debug)]
pub struct RedisCluster {
    /// The primaries, then the replicas (as `redis-cli` was given them; it assigns each
    /// replica a primary of its choice).
    pub nodes: Vec<Server>,
}

impl RedisCluster {
    /// `redis+cluster://` naming every node.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// let cluster = distlock_servers::redis_cluster(3, 0)?;
    /// assert!(cluster.url().starts_with("redis+cluster://127.0.0.1:"));
    /// # Ok::<(), distlock_servers::LaunchError>(())
    /// ```
    pub fn url(&self) -> String {
        let hosts: Vec<String> = self.nodes.iter().map(|n| n.addr().to_string()).collect();
        format!("redis+cluster://{}", hosts.join(","))
    }

    /// The node serving slot-holding key `key` (as a primary), by asking a node with
    /// `redis-cli`.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// let cluster = distlock_servers::redis_cluster(3, 1)?;
    /// let primary = cluster.primary_of("orders");
    /// # Ok::<(), distlock_servers::LaunchError>(())
    /// ```
    pub fn primary_of(&self, key: &str) -> Option<usize> {
        let slot = redis_cli(&self.nodes[0], &["CLUSTER", "KEYSLOT", key]).ok()?;
        let slots = redis_cli(&self.nodes[0], &["CLUSTER", "NODES"]).ok()?;
        let slot: u32 = slot.trim().parse().ok()?;
        let address = slots.lines().find_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let serves = fields.iter().skip(8).any(|range| {
                let (low, high) = range.split_once('-').unwrap_or((range, range));
                matches!((low.parse::<u32>(), high.parse::<u32>()), (Ok(l), Ok(h)) if l <= slot && slot <= h)
            });
            let primary = fields.get(2)?.split(',').any(|f| f == "master");
            (serves && primary).then(|| fields.get(1)?.split('@').next().map(str::to_owned))?
        })?;
        self.nodes
            .iter()
            .position(|n| n.addr().to_string() == address)
    }
}

/// Starts a Redis Cluster of `primaries` primaries with `replicas` replicas each, and waits
/// until every node reports the cluster healthy (bounded by 30 s). Nodes give up on a silent
/// node after one second, so a failover takes a few.
///
/// # Examples
///
/// ```no_run
/// let cluster = distlock_servers::redis_cluster(3, 0)?;
/// # Ok::<(), distlock_servers::LaunchError>(())
/// ```
pub fn redis_cluster(primaries: usize, replicas: usize) -> Result<RedisCluster, LaunchError> {
    let settings = [
        "--cluster-enabled",
        "yes",
        "--cluster-config-file",
        "nodes.conf",
        "--cluster-node-timeout",
        "1000",
    ];
    // The cluster bus gets a free port of its own: by default it is the node's port plus
    // 10000, which nobody checked was free.
    let nodes = (0..primaries * (1 + replicas))
        .map(|_| {
            let bus = spare_port()?.to_string();
            let with_bus: Vec<&str> = settings
                .iter()
                .copied()
                .chain(["--cluster-port", &bus])
                .collect();
            redis_server_with(&with_bus)
        })
        .collect::<Result<Vec<_>, _>>()?;
    let mut create = vec!["--cluster".to_owned(), "create".to_owned()];
    create.extend(nodes.iter().map(|n| n.addr().to_string()));
    create.extend([
        "--cluster-replicas".into(),
        replicas.to_string(),
        "--cluster-yes".into(),
    ]);
    let made = Command::new(redis_cli_program()?)
        .args(&create)
        .output()
        .map_err(|e| failed(format!("cannot run redis-cli: {e}"), ""))?;
    if !made.status.success() {
        return Err(failed(
            format!(
                "redis-cli --cluster create failed: {}{}",
                String::from_utf8_lossy(&made.stdout),
                String::from_utf8_lossy(&made.stderr)
            ),
            "",
        ));
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    for node in &nodes {
        loop {
            let info = redis_cli(node, &["CLUSTER", "INFO"]).unwrap_or_default();
            let known = redis_cli(node, &["CLUSTER", "NODES"]).unwrap_or_default();
            // A replica can be promoted only once it has synced with its primary.
            let replication = redis_cli(node, &["INFO", "replication"]).unwrap_or_default();
            let synced = !replication.contains("role:slave")
                || replication.contains("master_link_status:up");
            if info.contains("cluster_state:ok") && known.lines().count() == nodes.len() && synced {
                break;
            }
            if std::time::Instant::now() > deadline {
                return Err(failed(
                    format!("the cluster never became healthy: {info}"),
                    "",
                ));
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    }
    Ok(RedisCluster { nodes })
}

/// What `redis-cli` prints for `args` sent to `node`.
fn redis_cli(node: &Server, args: &[&str]) -> Result<String, LaunchError> {
    let out = Command::new(redis_cli_program()?)
        .args(["-h", "127.0.0.1", "-p", &node.addr().port().to_string()])
        .args(args)
        .output()
        .map_err(|e| failed(format!("cannot run redis-cli: {e}"), ""))?;
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}
