//! A store torture starts itself (`--server`), through distlock-servers' launchers, on a free
//! loopback port in a temporary directory, so that it can pause the server (SIGSTOP, past
//! the holders' validity) and restart it (SIGKILL, then started again on its port and
//! data). It is stopped, and its directory removed, when the run ends.

use std::sync::{Arc, Mutex};

use distlock::{Error, ErrorKind, Result};
use distlock_servers::Server;

use super::masters::Masters;
use crate::args::ServerKind;

/// The server of a run, shared with the fault schedule.
#[derive(Clone)]
pub struct OwnServer {
    own: Arc<Own>,
}

/// What a run started: one server, or a RedLock's masters.
enum Own {
    One(Box<Mutex<Server>>),
    Masters(Masters),
}

/// Starts a server of `kind` (a RedLock's masters under clocks of their own if
/// `faked_clock`, for clock jumps): it, and the lock URL that reaches it.
pub async fn start(kind: ServerKind, faked_clock: bool) -> Result<(OwnServer, String)> {
    // Ctrl-C in the terminal reaches the run's process group: the run stops its workers
    // on a healthy store, and then the server.
    distlock_servers::servers_in_own_process_groups();
    let (own, url) = match kind {
        ServerKind::Redlock => {
            let (masters, url) = Masters::start(faked_clock).await?;
            (Own::Masters(masters), url)
        }
        _ => {
            let (server, url) = tokio::task::spawn_blocking(move || launch(kind))
                .await
                .map_err(|e| {
                    Error::new(ErrorKind::Backend, format!("cannot start the server: {e}"))
                })??;
            (Own::One(Box::new(Mutex::new(server))), url)
        }
    };
    Ok((OwnServer { own: Arc::new(own) }, url))
}

/// Launches a server of `kind` (blocking until it serves).
fn launch(kind: ServerKind) -> Result<(Server, String)> {
    let failed = |e: distlock_servers::LaunchError| {
        Error::new(
            ErrorKind::Unavailable,
            format!("cannot start a {} server for torture: {e}", kind.as_str()),
        )
    };
    let (server, url) = match kind {
        // With every write on disk before it is answered, as a Redis that is restarted
        // must keep its locks: without, a restart forgets them all.
        ServerKind::Redis => {
            let server = distlock_servers::redis_server_with(&[
                "--appendonly",
                "yes",
                "--appendfsync",
                "always",
            ])
            .map_err(failed)?;
            let url = format!("redis://{}/0", server.addr());
            (server, url)
        }
        ServerKind::Postgres | ServerKind::PostgresLease => {
            let server = distlock_servers::postgres_server().map_err(failed)?;
            let url = distlock_servers::postgres_url(&server);
            (server, url)
        }
        ServerKind::Mariadb | ServerKind::MariadbLease => {
            let server = distlock_servers::mariadb_server().map_err(failed)?;
            let url = distlock_servers::mariadb_url(&server);
            (server, url)
        }
        // Sessions of 2 s: a killed holder's lock is freed within them.
        ServerKind::Zookeeper => {
            let server = distlock_servers::zookeeper_server().map_err(failed)?;
            let url = format!("zk://{}/torture?session_timeout=2s", server.addr());
            (server, url)
        }
        ServerKind::Etcd => {
            let server = distlock_servers::etcd_server().map_err(failed)?;
            let url = format!("etcd://{}/torture?session_ttl=2s", server.addr());
            (server, url)
        }
        // Several servers: `Masters::start`.
        ServerKind::Redlock => {
            return Err(Error::invalid("a RedLock's masters are no one server"));
        }
    };
    // The database servers' lease mode: the same server, another URL.
    Ok(match kind {
        ServerKind::PostgresLease | ServerKind::MariadbLease => {
            (server, format!("{url}?mode=lease"))
        }
        _ => (server, url),
    })
}

impl OwnServer {
    /// The one server, if the run started one (not a RedLock's masters).
    fn one(&self) -> Option<&Mutex<Server>> {
        match &*self.own {
            Own::One(server) => Some(server),
            Own::Masters(_) => None,
        }
    }

    /// The RedLock's masters, if the run started them.
    pub fn masters(&self) -> Option<&Masters> {
        match &*self.own {
            Own::Masters(masters) => Some(masters),
            Own::One(_) => None,
        }
    }

    /// Freezes the server (SIGSTOP): connections stay open, nothing answers.
    pub fn pause(&self) {
        if let Some(server) = self.one() {
            server.lock().unwrap_or_else(|p| p.into_inner()).pause();
        }
    }

    /// Thaws it.
    pub fn resume(&self) {
        if let Some(server) = self.one() {
            server.lock().unwrap_or_else(|p| p.into_inner()).resume();
        }
    }

    /// Kills it and starts it again on its port and data, waiting until it serves.
    pub async fn restart(&self) -> Result<()> {
        if self.one().is_none() {
            return Ok(());
        }
        let own = self.own.clone();
        tokio::task::spawn_blocking(move || {
            let Own::One(server) = &*own else {
                return Ok(());
            };
            server
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .restart()
                .map_err(|e| {
                    Error::new(
                        ErrorKind::Unavailable,
                        format!("the server did not come back: {e}"),
                    )
                })
        })
        .await
        .map_err(|e| {
            Error::new(
                ErrorKind::Backend,
                format!("cannot restart the server: {e}"),
            )
        })?
    }
}
