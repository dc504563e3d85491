//! The client's ZooKeeper session, kept and reported to the core: one session at a time,
//! its health measured by our own heartbeats, a new one opened when it expires.
//!
//! ZooKeeper expires a session when it has heard nothing from the client for the session
//! timeout. So a session is surely alive until the start of the last request the server
//! answered plus the (negotiated) timeout, less drift and margin: that is the
//! `valid_until` reported while connected, moved forward by a heartbeat every quarter of
//! the timeout: a `sync`, which the leader answers, so a member cut off from the leader
//! (which may go on answering reads for a while) cannot extend it. When the client notices
//! the connection is gone the session is reported suspended with the same deadline, so
//! every guard turns `AtRisk` at once and `Lost` before the server could have expired the
//! session; if the server does expire it, every guard turns `Lost` at once and a new
//! session serves later requests.

use std::sync::{Arc, Weak};
use std::time::Duration;

use distlock_core::backend::{
    PendingDeletes, SessionSlot, SessionState, safe_deadline, until_done,
};
use distlock_core::{Error, ErrorKind, Result};
use tokio::time::Instant;
use zookeeper_client as zk;

use crate::config::ZkConfig;
use crate::error::zk_error;
use crate::nodes::Live;
use crate::record::Unrecorded;

/// The ACLs of the nodes a client creates (see [`Live::acls`](crate::nodes::Live::acls)).
fn acls_for(config: &ZkConfig) -> zk::Acls<'static> {
    match config.digest {
        Some(_) => zk::Acls::creator_all(),
        None => zk::Acls::anyone_all(),
    }
}

/// A node to delete later: by its path, or every one under `dir` whose path starts with
/// `prefix` (a request whose node's name was never learnt).
#[derive(Debug, Clone)]
pub(crate) enum Doomed {
    Node(String),
    Prefix { dir: String, prefix: String },
}

/// The sessions of one distlock client.
pub(crate) struct Sessions {
    config: ZkConfig,
    /// The session requests are made in, and its state as the core follows it.
    pub(crate) slot: SessionSlot<Live>,
    /// Deletes not known to be done, made again once the session answers (as Curator's
    /// guaranteed delete).
    pub(crate) pending: PendingDeletes<Doomed>,
    /// Tokens of this client's grants that their nodes' records do not show yet.
    pub(crate) unrecorded: Unrecorded,
}

impl std::fmt::Debug for Sessions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sessions")
            .field("config", &self.config)
            .field("session", &*self.slot.subscribe().borrow())
            .finish()
    }
}

impl Sessions {
    /// Opens the first session (failing at once when no member answers) and starts keeping
    /// it, on the sessions' own runtime.
    pub(crate) async fn open(config: ZkConfig) -> Result<Arc<Sessions>> {
        crate::runtime::SESSIONS.run(Sessions::start(config)).await
    }

    /// [`Sessions::open`], on the sessions' runtime (see [`crate::runtime`]).
    async fn start(config: ZkConfig) -> Result<Arc<Sessions>> {
        // The session's validity counts from before it was asked for.
        let asked = Instant::now();
        let client = connect_first(&config).await?;
        let valid_until = safe_deadline(asked, client.session_timeout());
        let live = Live {
            client,
            id: 1,
            acls: acls_for(&config),
        };
        let sessions = Arc::new(Sessions {
            config,
            slot: SessionSlot::new("ZooKeeper", 1, live.clone(), valid_until),
            pending: PendingDeletes::default(),
            unrecorded: Unrecorded::default(),
        });
        tokio::spawn(keep(Arc::downgrade(&sessions), live));
        Ok(sessions)
    }

    /// Makes the deletes pending in session `live` again, within `within`; forgets those
    /// answered (a retry cut short loses nothing: its notes stay).
    async fn retry_deletes(&self, live: &Live, within: Duration) {
        let retried = async {
            for (number, doomed) in self.pending.due(live.id) {
                let done = match &doomed {
                    Doomed::Node(path) => crate::nodes::delete(live, path).await.map(drop),
                    Doomed::Prefix { dir, prefix } => {
                        crate::nodes::delete_with_prefix(live, dir, prefix).await
                    }
                };
                if !done.as_ref().is_err_and(Error::is_temporary) {
                    self.pending.done(number);
                }
            }
        };
        let _ = tokio::time::timeout(within, retried).await;
    }

    /// Ends the current session from a second connection to `hosts` that joins it and
    /// closes it (see `ZkBackend::close_session_from`); waits until the close is done.
    pub(crate) async fn close_from(&self, hosts: &str) -> Result<()> {
        // No session open: the last one ended already.
        let Some(live) = self.slot.live() else {
            return Ok(());
        };
        let connector = connector(&self.config)?
            .with_session(live.client.session().clone())
            .with_fail_eagerly();
        let config = ZkConfig {
            hosts: hosts.to_owned(),
            ..self.config.clone()
        };
        let intruder = match crate::runtime::SESSIONS
            .run(async move { Ok(reach(connector, &config).await) })
            .await?
        {
            Ok(intruder) => intruder,
            // Ended already.
            Err(zk::Error::SessionExpired) => return Ok(()),
            Err(err) => return Err(zk_error("close")(err)),
        };
        let mut state = intruder.state_watcher();
        drop(intruder);
        let closed = async { while !state.changed().await.is_terminated() {} };
        let bound = self.config.session_timeout + Duration::from_secs(5);
        tokio::time::timeout(bound, closed).await.map_err(|_| {
            Error::new(
                ErrorKind::Timeout,
                format!("the session was not closed within {bound:?}"),
            )
            .with_backend("zookeeper")
        })
    }

    /// The configuration sessions are opened with.
    pub(crate) fn config(&self) -> &ZkConfig {
        &self.config
    }
}

/// A connector with the configuration's session timeout, credentials and TLS.
fn connector(config: &ZkConfig) -> Result<zk::Connector> {
    let mut connector = zk::Client::connector().with_session_timeout(config.session_timeout);
    if let Some(digest) = &config.digest {
        connector = connector.with_auth("digest", digest.as_bytes());
    }
    if let Some(ca) = &config.tls_ca {
        // Several rustls providers are built in; use the one every distlock backend uses.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let pem = std::fs::read_to_string(ca).map_err(|e| {
            Error::invalid(format!("cannot read tls_ca {}: {e}", ca.display()))
                .with_backend("zookeeper")
        })?;
        let tls = zk::TlsOptions::new().with_pem_ca(&pem).map_err(|e| {
            Error::invalid(format!(
                "tls_ca {} holds no usable certificate: {e}",
                ca.display()
            ))
            .with_backend("zookeeper")
        })?;
        connector = connector.with_tls(tls);
    }
    Ok(connector)
}

/// Connects `connector` to the configuration's ensemble, over TLS where it says so.
async fn reach(
    connector: zk::Connector,
    config: &ZkConfig,
) -> std::result::Result<zk::Client, zk::Error> {
    match config.tls_ca {
        Some(_) => connector.secure_connect(&config.hosts).await,
        None => connector.connect(&config.hosts).await,
    }
}

/// How often the first session is tried, each time over every member, before the client
/// gives up: a member that refused a connection once (busy starting, say) gets another
/// chance, and a wrong address still fails within a second.
const FIRST_TRIES: u32 = 3;

/// Connects the first session (see [`FIRST_TRIES`]).
async fn connect_first(config: &ZkConfig) -> Result<zk::Client> {
    let mut tries = 1;
    loop {
        match connect(config, true).await {
            Err(err) if err.kind() == ErrorKind::Unavailable && tries < FIRST_TRIES => {
                tries += 1;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            answer => return answer,
        }
    }
}

/// Connects a new session. `eager`: give up after one pass over the members (the first
/// session, which the caller waits for), rather than retry until the session timeout.
async fn connect(config: &ZkConfig, eager: bool) -> Result<zk::Client> {
    let mut connector = connector(config)?;
    if eager {
        connector = connector.with_fail_eagerly();
    }
    let bound = config.session_timeout + Duration::from_secs(5);
    let over = match config.tls_ca {
        Some(_) => " over TLS (is tls_ca the authority of the servers' certificates?)",
        None => "",
    };
    match tokio::time::timeout(bound, reach(connector, config)).await {
        Ok(Ok(client)) => Ok(client),
        Ok(Err(err)) => Err(match err {
            zk::Error::AuthFailed => Error::new(
                ErrorKind::InvalidInput,
                format!("ZooKeeper at {} refused the credentials", config.hosts),
            )
            .with_backend("zookeeper"),
            zk::Error::NoHosts | zk::Error::Timeout => Error::new(
                ErrorKind::Unavailable,
                format!("no ZooKeeper server answered at {}{over}", config.hosts),
            )
            .with_backend("zookeeper")
            .temporary(),
            other => zk_error("connect")(other),
        }),
        Err(_) => Err(Error::new(
            ErrorKind::Unavailable,
            format!(
                "no ZooKeeper session could be opened at {}{over} within {bound:?}",
                config.hosts
            ),
        )
        .with_backend("zookeeper")
        .temporary()),
    }
}

/// Keeps the sessions of `sessions` until the backend is dropped: heartbeats, state
/// changes, and a new session after each expiry.
async fn keep(sessions: Weak<Sessions>, mut live: Live) {
    loop {
        follow(&sessions, &live).await;
        let Some(this) = sessions.upgrade() else {
            return;
        };
        // The ended session's client goes now (its last clones with the requests in flight),
        // which closes the session: its nodes must not outlive the guards the core lost.
        drop(this.slot.end(live.id));
        this.pending.forget(live.id);
        let ended = live.id;
        drop(live);
        let config = this.config.clone();
        drop(this);
        tracing::warn!(hosts = %config.hosts, "the ZooKeeper session expired; every lock held in it is lost");
        let opened = until_done(
            "open a new ZooKeeper session",
            || sessions.strong_count() > 0,
            || async {
                let asked = Instant::now();
                Ok((connect(&config, false).await?, asked))
            },
        );
        let Some((client, asked)) = opened.await else {
            return;
        };
        let Some(this) = sessions.upgrade() else {
            return;
        };
        live = Live {
            client,
            id: ended + 1,
            acls: acls_for(&config),
        };
        let valid_until = safe_deadline(asked, live.client.session_timeout());
        this.slot.open(live.id, live.clone(), valid_until);
    }
}

/// Follows session `live` until it ends (or the backend is dropped): a heartbeat every
/// quarter of the timeout moves its deadline on; a lost connection suspends it. A session
/// whose deadline passes without an answer is ended here too, even if the connection comes
/// back later: the core has turned its guards `Lost` at that deadline, and their nodes must
/// not go on holding the locks for nobody. Dropping the session's last client closes it,
/// and the server deletes its nodes.
async fn follow(sessions: &Weak<Sessions>, live: &Live) {
    let timeout = live.client.session_timeout();
    let period = timeout / 4;
    let mut states = live.client.state_watcher();
    let mut next_beat = Instant::now() + period;
    loop {
        let Some(this) = sessions.upgrade() else {
            return;
        };
        let Some(valid_until) = this.slot.valid_until(live.id) else {
            return;
        };
        if Instant::now() >= valid_until {
            tracing::warn!(
                hosts = %this.config.hosts,
                "no answer from ZooKeeper within the session's validity; ending the session, whose locks are lost"
            );
            return;
        }
        drop(this);
        tokio::select! {
            state = states.changed() => match state {
                zk::SessionState::Disconnected => {
                    if let Some(this) = sessions.upgrade() {
                        this.slot.set(live.id, SessionState::suspended(Instant::now(), valid_until));
                    }
                }
                zk::SessionState::SyncConnected | zk::SessionState::ConnectedReadOnly => {
                    next_beat = Instant::now();
                }
                _ => return,
            },
            () = tokio::time::sleep_until(valid_until) => {}
            () = tokio::time::sleep_until(next_beat) => {
                next_beat = Instant::now() + period;
                let sent = Instant::now();
                // `sync` goes through the leader: a member cut off from it, which may still
                // answer reads for a while, cannot extend the session's validity.
                let answered = tokio::time::timeout(period, live.client.sync("/")).await;
                let Some(this) = sessions.upgrade() else {
                    return;
                };
                match answered {
                    // An answer after the deadline does not revive the session.
                    Ok(Ok(_)) if Instant::now() < valid_until => {
                        this.slot.set(live.id, SessionState::connected(safe_deadline(sent, timeout)));
                        // Apart from the heartbeats, which must go on meanwhile.
                        let live = live.clone();
                        tokio::spawn(async move { this.retry_deletes(&live, period).await });
                    }
                    Ok(Err(zk::Error::SessionExpired | zk::Error::ClientClosed | zk::Error::AuthFailed)) => return,
                    _ => {}
                }
            }
        }
    }
}
