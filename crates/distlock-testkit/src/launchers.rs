//! Launchers for the servers backends are tested against, from the installed binaries.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::server::{LaunchError, Ready, Server, ServerSpec};

/// A fresh `redis-server` on a free loopback port in a temporary directory, keeping
/// nothing on disk.
///
/// # Examples
///
/// ```no_run
/// let redis = distlock_testkit::redis_server()?;
/// let url = format!("redis://{}/0", redis.addr());
/// # Ok::<(), distlock_testkit::LaunchError>(())
/// ```
pub fn redis_server() -> Result<Server, LaunchError> {
    redis_server_with(&[])
}

/// [`redis_server`] with extra command-line settings, e.g. `["--requirepass", "secret"]`.
///
/// # Examples
///
/// ```no_run
/// let redis = distlock_testkit::redis_server_with(&["--requirepass", "s3cret"])?;
/// # Ok::<(), distlock_testkit::LaunchError>(())
/// ```
pub fn redis_server_with(extra: &[&str]) -> Result<Server, LaunchError> {
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
    Server::start(
        ServerSpec::new("redis-server", base.iter().chain(extra).copied())
            .ready(Ready::LogLine("Ready to accept connections".into()))
            .install_hint("apt-get install redis-server"),
    )
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
    /// let certs = distlock_testkit::TestCertificates::make(dir.path())?;
    /// # Ok::<(), distlock_testkit::LaunchError>(())
    /// ```
    pub fn make(dir: &Path) -> Result<TestCertificates, LaunchError> {
        let path = |name: &str| dir.join(name).display().to_string();
        std::fs::write(dir.join("san.cnf"), "subjectAltName=IP:127.0.0.1\n")
            .map_err(|e| failed(format!("cannot write the certificate extension file: {e}")))?;
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
                return Err(failed(format!(
                    "openssl {} failed: {}",
                    args[0],
                    String::from_utf8_lossy(&out.stderr)
                )));
            }
        }
        Ok(TestCertificates {
            ca: dir.join("ca.crt"),
            cert: dir.join("server.crt"),
            key: dir.join("server.key"),
        })
    }
}

fn failed(reason: String) -> LaunchError {
    LaunchError::Failed {
        reason,
        log_tail: String::new(),
    }
}

/// A `redis-server` that speaks only TLS, with `certs`, on a free loopback port.
///
/// # Examples
///
/// ```no_run
/// let dir = tempfile::tempdir().unwrap();
/// let certs = distlock_testkit::TestCertificates::make(dir.path())?;
/// let redis = distlock_testkit::redis_tls_server(&certs)?;
/// let url = format!("rediss://{}/0?tls_ca={}", redis.addr(), certs.ca.display());
/// # Ok::<(), distlock_testkit::LaunchError>(())
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
