//! Launchers for the servers backends are tested against, from the installed binaries.

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
