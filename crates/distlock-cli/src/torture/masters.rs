//! The masters of a RedLock that torture starts itself (`--server redlock`): three
//! `redis-server`s that keep nothing on disk, each with a replica, each reached through a
//! proxy of the run's so that a failover can move it, and each under a wall clock of its
//! own (libfaketime) so that the clock can jump. The faults the documents name strike
//! them: a master restarted empty, a replica promoted before it had the grant, a master's
//! clock stepped past the lease.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use distlock::{Error, ErrorKind, Result};
use distlock_servers::{FaultProxy, LaunchError, ProxyMode, Server, ServerSpec, redis_spec};

use super::clock::faked_server_clock;

/// How many masters the RedLock has.
const MASTERS: usize = 3;

/// A master and its replica.
struct Pair {
    primary: Server,
    replica: Server,
    /// How far the primary's wall clock is ahead, in seconds.
    ahead: u64,
    /// Whether the primary started as a replica (promoted by a failover): started again,
    /// it comes back as one, and is promoted again.
    promoted: bool,
    /// Whether the servers run under a clock of their own.
    faked_clock: bool,
}

/// One master's place in the RedLock: the proxy its clients reach it through, and what
/// serves behind it.
struct Place {
    proxy: FaultProxy,
    pair: Arc<Mutex<Pair>>,
}

/// The RedLock's masters.
pub struct Masters {
    places: Vec<Place>,
}

/// A `redis-server` keeping nothing on disk, a replica of `primary` if given, under a
/// clock of its own if `faked_clock`.
fn spec(primary: Option<SocketAddr>, faked_clock: bool) -> Result<ServerSpec> {
    let replica_of = primary.map(|addr| (addr.ip().to_string(), addr.port().to_string()));
    // A replica copies its master over the socket (no file a restarted master could load)
    // from the start, not after Redis's default 5 s.
    let mut extra = vec![
        "--repl-diskless-sync",
        "yes",
        "--repl-diskless-sync-delay",
        "0",
    ];
    if let Some((host, port)) = &replica_of {
        extra.extend(["--replicaof", host, port]);
    }
    if !faked_clock {
        return Ok(redis_spec(&extra));
    }
    let spec = faked_server_clock()?
        .iter()
        .fold(redis_spec(&extra), |spec, (key, value)| {
            spec.env(key, value)
        });
    Ok(spec.file("clock", "+0\n"))
}

/// Starts a server of `spec` (blocking until it serves).
fn launch(spec: ServerSpec) -> Result<Server> {
    Server::start(spec).map_err(|e: LaunchError| {
        Error::new(
            ErrorKind::Unavailable,
            format!("cannot start a RedLock master for torture: {e}"),
        )
    })
}

/// A master and a replica of it, under clocks of their own if `faked_clock`.
fn launch_pair(faked_clock: bool) -> Result<Pair> {
    let primary = launch(spec(None, faked_clock)?)?;
    let replica = launch(spec(Some(primary.addr()), faked_clock)?)?;
    Ok(Pair {
        primary,
        replica,
        ahead: 0,
        promoted: false,
        faked_clock,
    })
}

/// Runs blocking `work` on `pair` off the runtime.
async fn on_pair<T: Send + 'static>(
    pair: &Arc<Mutex<Pair>>,
    work: impl FnOnce(&mut Pair) -> Result<T> + Send + 'static,
) -> Result<T> {
    let pair = pair.clone();
    tokio::task::spawn_blocking(move || work(&mut pair.lock().unwrap_or_else(|p| p.into_inner())))
        .await
        .map_err(|e| Error::new(ErrorKind::Backend, format!("a master fault failed: {e}")))?
}

impl Masters {
    /// Starts the masters and their replicas, under clocks of their own if `faked_clock`
    /// (for clock jumps): them, and the `redlock://` URL that reaches them.
    pub async fn start(faked_clock: bool) -> Result<(Masters, String)> {
        let mut places = Vec::with_capacity(MASTERS);
        for _ in 0..MASTERS {
            let pair = tokio::task::spawn_blocking(move || launch_pair(faked_clock))
                .await
                .map_err(|e| Error::new(ErrorKind::Backend, format!("cannot start: {e}")))??;
            let proxy = FaultProxy::start(pair.primary.addr()).await.map_err(|e| {
                Error::new(ErrorKind::Backend, format!("cannot start a proxy: {e}"))
            })?;
            places.push(Place {
                proxy,
                pair: Arc::new(Mutex::new(pair)),
            });
        }
        let hosts: Vec<String> = places.iter().map(|p| p.proxy.addr().to_string()).collect();
        let url = format!("redlock://{}/0", hosts.join(","));
        Ok((Masters { places }, url))
    }

    /// How many masters there are.
    pub fn len(&self) -> usize {
        self.places.len()
    }

    /// Puts master `at` out of its clients' reach (connections closed, new ones refused),
    /// or brings it back (`reach`).
    pub fn reach(&self, at: usize, reach: bool) {
        let mode = if reach {
            ProxyMode::Pass
        } else {
            ProxyMode::Cut
        };
        self.places[at].proxy.set(mode);
    }

    /// Cuts master `at`'s replica off from it, so that it receives nothing more, as a
    /// replica behind its master's asynchronous stream has not yet (it stops replicating
    /// there and then: a replica frozen instead would still read what its socket holds).
    pub async fn detach_replica(&self, at: usize) -> Result<()> {
        on_pair(&self.places[at].pair, |pair| promote(pair.replica.addr())).await
    }

    /// Kills master `at` and starts it again on its port, empty (its replica copies the
    /// empty data set).
    pub async fn restart_empty(&self, at: usize) -> Result<()> {
        on_pair(&self.places[at].pair, |pair| {
            pair.primary.restart().map_err(|e| {
                Error::new(
                    ErrorKind::Unavailable,
                    format!("the master did not come back: {e}"),
                )
            })?;
            match pair.promoted {
                true => promote(pair.primary.addr()),
                false => Ok(()),
            }
        })
        .await
    }

    /// Kills master `at` and puts its replica (detached, as it was then) in its place:
    /// its clients' connections are closed and they reconnect to the promoted one, as a
    /// client told by Sentinel does. A new replica is started for it.
    pub async fn fail_over(&self, at: usize) -> Result<()> {
        let place = &self.places[at];
        let promoted = on_pair(&place.pair, |pair| {
            pair.primary.kill();
            Ok(pair.replica.addr())
        })
        .await?;
        place.proxy.redirect(promoted);
        on_pair(&place.pair, move |pair| {
            let replica = launch(spec(Some(promoted), pair.faked_clock)?)?;
            pair.primary = std::mem::replace(&mut pair.replica, replica);
            pair.ahead = 0;
            pair.promoted = true;
            Ok(())
        })
        .await
    }

    /// Steps master `at`'s wall clock `seconds` further ahead (it stays there: a clock
    /// that jumped is not set back).
    pub fn jump_clock(&self, at: usize, seconds: u64) -> Result<()> {
        let mut pair = self.places[at]
            .pair
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if !pair.faked_clock {
            return Ok(());
        }
        pair.ahead += seconds;
        let path = pair.primary.dir().join("clock");
        std::fs::write(&path, format!("+{}\n", pair.ahead)).map_err(|e| {
            Error::new(
                ErrorKind::Backend,
                format!("cannot write the master's clock file: {e}"),
            )
        })
    }
}

/// Makes the replica at `addr` a master of its own (`REPLICAOF NO ONE`).
fn promote(addr: SocketAddr) -> Result<()> {
    let failed = |e: redis::RedisError| {
        Error::new(
            ErrorKind::Unavailable,
            format!("cannot promote the replica: {e}"),
        )
    };
    let client = redis::Client::open(format!("redis://{addr}/")).map_err(failed)?;
    let mut connection = client
        .get_connection_with_timeout(std::time::Duration::from_secs(5))
        .map_err(failed)?;
    redis::cmd("REPLICAOF")
        .arg("NO")
        .arg("ONE")
        .query::<()>(&mut connection)
        .map_err(failed)
}
