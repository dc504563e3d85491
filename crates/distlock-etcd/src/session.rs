//! The client's etcd session, kept and reported to the core: one lease at a time, kept
//! alive by one keep-alive stream, a new one granted when it expires.
//!
//! etcd expires a lease when its TTL passes without a keep-alive reaching the leader. So a
//! lease is surely alive until the sending of the last keep-alive that was answered plus
//! the TTL the answer gave, less drift and margin: that is the `valid_until` reported while
//! connected, moved forward by a keep-alive every quarter of the TTL. A keep-alive that
//! gets no answer within that quarter suspends the session (every guard `AtRisk`) with the
//! same deadline; at the deadline the session is ended here, its lease revoked where the
//! cluster can be reached, so its keys cannot go on holding locks for guards the core
//! turned `Lost`. An answer saying the lease is gone ends it at once. Either way a new
//! lease serves later requests.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex as StdMutex, Weak};
use std::time::Duration;

use distlock_core::backend::{Session, SessionState, safe_deadline};
use distlock_core::{Error, ErrorKind, Result};
use etcd_client::{Client, ConnectOptions, LeaseKeepAliveStream, LeaseKeeper};
use tokio::sync::watch;
use tokio::time::Instant;

use crate::config::EtcdConfig;
use crate::error::{etcd_error, lease_gone};

/// One session: the lease its keys live on, and its number for the core.
#[derive(Clone)]
pub(crate) struct Live {
    pub(crate) client: Client,
    pub(crate) lease: i64,
    pub(crate) id: u64,
}

impl std::fmt::Debug for Live {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Live")
            .field("lease", &format_args!("{:x}", self.lease))
            .field("id", &self.id)
            .finish()
    }
}

/// A contender key to delete once the session answers again: its session, and its note's
/// number.
#[derive(Debug)]
struct Doomed {
    number: u64,
    session: u64,
    key: String,
}

/// The sessions of one distlock client.
pub(crate) struct Sessions {
    config: EtcdConfig,
    client: Client,
    /// The session requests are made in; none between an ended session and the next.
    current: StdMutex<Option<Live>>,
    /// The contender keys requests of this client have taken, with their sessions: each
    /// request has a key of its own, even several for one name.
    keys: StdMutex<HashSet<(u64, String)>>,
    /// Deletes not known to be done, made again once the session answers.
    doomed: StdMutex<Vec<Doomed>>,
    sender: watch::Sender<Session>,
}

impl std::fmt::Debug for Sessions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sessions")
            .field("config", &self.config)
            .field("session", &*self.sender.borrow())
            .finish()
    }
}

/// The poison-proof lock of a mutex.
fn locked<T>(mutex: &StdMutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

impl Sessions {
    /// Connects and grants the first lease (failing at once when no member answers), and
    /// starts keeping it, on the sessions' own runtime.
    pub(crate) async fn open(config: EtcdConfig) -> Result<Arc<Sessions>> {
        crate::runtime::SESSIONS.run(Sessions::start(config)).await
    }

    async fn start(config: EtcdConfig) -> Result<Arc<Sessions>> {
        let client = connect(&config).await?;
        let mut tries = 1;
        let (lease, ttl, asked) = loop {
            match grant(&client, &config).await {
                Err(err) if err.kind() == ErrorKind::Unavailable && tries < FIRST_TRIES => {
                    tries += 1;
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                answer => break answer?,
            }
        };
        let (sender, _) = watch::channel(Session {
            id: 1,
            state: SessionState::Connected {
                valid_until: safe_deadline(asked, ttl),
            },
        });
        let live = Live {
            client: client.clone(),
            lease,
            id: 1,
        };
        let sessions = Arc::new(Sessions {
            config,
            client,
            current: StdMutex::new(Some(live.clone())),
            keys: StdMutex::default(),
            doomed: StdMutex::default(),
            sender,
        });
        tokio::spawn(keep(Arc::downgrade(&sessions), live, ttl));
        Ok(sessions)
    }

    /// The session requests are made in now; an error between an ended session and the
    /// next.
    pub(crate) fn current(&self) -> Result<Live> {
        self.live().ok_or_else(|| {
            Error::new(
                ErrorKind::Unavailable,
                "the etcd session's lease ended and a new one is not granted yet",
            )
            .with_backend("etcd")
            .temporary()
        })
    }

    /// The session requests are made in now, if one is open.
    pub(crate) fn live(&self) -> Option<Live> {
        locked(&self.current).clone()
    }

    /// The client every session speaks through.
    pub(crate) fn client(&self) -> &Client {
        &self.client
    }

    /// The configuration the client was made with.
    pub(crate) fn config(&self) -> &EtcdConfig {
        &self.config
    }

    /// A contender key of its own for a request on the lock whose keys start with `pfx`,
    /// in session `live`: etcd's `<pfx><lease in hex>` for the first, `…_<n>` for more
    /// requests of this client on the same lock at once. It stays taken until
    /// [`Sessions::give_back`], once the key is known to be gone.
    pub(crate) fn take_key(&self, live: &Live, pfx: &str) -> String {
        let mut keys = locked(&self.keys);
        (0u32..)
            .map(|n| match n {
                0 => format!("{pfx}{:x}", live.lease),
                n => format!("{pfx}{:x}_{n}", live.lease),
            })
            .find(|key| keys.insert((live.id, key.clone())))
            .unwrap_or_else(|| unreachable!("some key number is free"))
    }

    /// Gives back a key taken in session `session`.
    pub(crate) fn give_back(&self, session: u64, key: &str) {
        locked(&self.keys).remove(&(session, key.to_owned()));
    }

    /// Notes `key` (of session `session`) as to be deleted, before the delete is sent: a
    /// release or cancel whose delete gets no answer, or is dropped halfway, must not leave
    /// a key holding a lock, or a place in its queue, for nobody while the lease lives.
    /// Returns the note's number, for [`Sessions::done`].
    pub(crate) fn delete_later(&self, session: u64, key: &str) -> u64 {
        static NUMBERS: AtomicU64 = AtomicU64::new(0);
        let number = NUMBERS.fetch_add(1, Ordering::Relaxed);
        locked(&self.doomed).push(Doomed {
            number,
            session,
            key: key.to_owned(),
        });
        number
    }

    /// Forgets note `number`: its delete was answered, and its key is given back.
    pub(crate) fn done(&self, number: u64) {
        let mut doomed = locked(&self.doomed);
        if let Some(at) = doomed.iter().position(|d| d.number == number) {
            let note = doomed.swap_remove(at);
            self.give_back(note.session, &note.key);
        }
    }

    /// Makes the deletes noted for session `live` again; keeps those that still get no
    /// answer.
    async fn retry_deletes(&self, live: &Live) {
        let doomed: Vec<Doomed> = std::mem::take(&mut *locked(&self.doomed));
        for note in doomed {
            if note.session != live.id {
                continue;
            }
            let deleted = live
                .client
                .kv_client()
                .delete(note.key.as_str(), None)
                .await;
            match deleted {
                Ok(_) => self.give_back(note.session, &note.key),
                Err(_) => locked(&self.doomed).push(note),
            }
        }
    }

    /// The session's state, as the core follows it.
    pub(crate) fn subscribe(&self) -> watch::Receiver<Session> {
        self.sender.subscribe()
    }

    /// Tells the core that a grant of the session may be gone though the session lives:
    /// it then asks [`grant_lost`](distlock_core::backend::Backend::grant_lost) of each.
    pub(crate) fn announce_loss(&self) {
        self.sender.send_modify(|_| {});
    }

    fn set(&self, id: u64, state: SessionState) {
        self.sender.send_if_modified(|session| {
            let changed = session.id != id || session.state != state;
            *session = Session { id, state };
            changed
        });
    }

    /// The last deadline reported for session `id`, if it is not over.
    pub(crate) fn valid_until(&self, id: u64) -> Option<Instant> {
        let session = *self.sender.borrow();
        (session.id == id).then(|| session.valid_until()).flatten()
    }

    /// Whether session `id` is the current one and surely valid now.
    pub(crate) fn is_valid(&self, id: u64) -> bool {
        self.valid_until(id)
            .is_some_and(|until| Instant::now() < until)
    }

    /// Ends the session `ended` here: no request is made in it any more, its keys are
    /// forgotten, and its lease is revoked in the background (if the cluster answers; else
    /// etcd expires it, having heard nothing from it).
    fn end(&self, ended: &Live) {
        self.set(ended.id, SessionState::Expired);
        *locked(&self.current) = None;
        locked(&self.keys).retain(|(session, _)| *session != ended.id);
        locked(&self.doomed).retain(|note| note.session != ended.id);
        let (mut lease_client, lease) = (ended.client.lease_client(), ended.lease);
        let bound = self.config.session_ttl;
        tokio::spawn(async move {
            let _ = tokio::time::timeout(bound, lease_client.revoke(lease)).await;
        });
    }
}

/// How often the first lease is asked for before the client gives up: a member that
/// refused once (busy starting, say) gets another chance, and a wrong address still fails
/// within a second.
const FIRST_TRIES: u32 = 3;

/// The client of `config`'s cluster: credentials, TLS, and requests that fail on a member
/// without a leader (which could not keep a lease alive either).
async fn connect(config: &EtcdConfig) -> Result<Client> {
    let mut options = ConnectOptions::new()
        .with_connect_timeout(Duration::from_secs(2))
        .with_keep_alive(Duration::from_secs(1), Duration::from_secs(2))
        .with_keep_alive_while_idle(true)
        .with_require_leader(true);
    if let Some((user, password)) = &config.credentials {
        options = options
            .with_user(user.clone(), password.clone())
            .with_auto_token_refresh(true);
    }
    if let Some(ca) = &config.tls_ca {
        // Several rustls providers are built in; use the one every distlock backend uses.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let pem = std::fs::read(ca).map_err(|e| {
            Error::invalid(format!("cannot read tls_ca {}: {e}", ca.display())).with_backend("etcd")
        })?;
        options = options.with_tls(
            etcd_client::TlsOptions::new().ca_certificate(etcd_client::Certificate::from_pem(pem)),
        );
    }
    let over = match config.tls_ca {
        Some(_) => " over TLS (is tls_ca the authority of the members' certificates?)",
        None => "",
    };
    let bound = config.session_ttl + Duration::from_secs(5);
    let unreachable = || {
        Error::new(
            ErrorKind::Unavailable,
            format!("no etcd member answered at {}{over}", config.members()),
        )
        .with_backend("etcd")
        .temporary()
    };
    match tokio::time::timeout(bound, Client::connect(&config.endpoints, Some(options))).await {
        Ok(Ok(client)) => Ok(client),
        Ok(Err(err)) => {
            let err = etcd_error("connect")(err);
            match err.kind() {
                ErrorKind::Unavailable => Err(unreachable().with_source(err)),
                _ => Err(err),
            }
        }
        Err(_) => Err(unreachable()),
    }
}

/// Grants a lease of the configured TTL: its id, the TTL granted, and when it was asked
/// for (its validity counts from then).
async fn grant(client: &Client, config: &EtcdConfig) -> Result<(i64, Duration, Instant)> {
    let asked = Instant::now();
    let ttl = config.session_ttl.as_secs() as i64;
    let answer = tokio::time::timeout(
        config.session_ttl + Duration::from_secs(5),
        client.lease_client().grant(ttl, None),
    )
    .await
    .map_err(|_| {
        Error::new(
            ErrorKind::Unavailable,
            format!("no etcd member granted a lease at {}", config.members()),
        )
        .with_backend("etcd")
        .temporary()
    })?
    .map_err(|err| {
        let err = etcd_error("lease grant")(err);
        match err.kind() {
            ErrorKind::Unavailable => Error::new(
                ErrorKind::Unavailable,
                format!("no etcd member answered at {}", config.members()),
            )
            .with_backend("etcd")
            .temporary()
            .with_source(err),
            _ => err,
        }
    })?;
    if !answer.error().is_empty() || answer.ttl() <= 0 {
        return Err(Error::new(
            ErrorKind::Backend,
            format!("etcd refused a lease: {}", answer.error()),
        )
        .with_backend("etcd"));
    }
    Ok((answer.id(), Duration::from_secs(answer.ttl() as u64), asked))
}

/// Keeps the sessions of `sessions` until the backend is dropped: keep-alives, state
/// changes, and a new lease after each ended one.
async fn keep(sessions: Weak<Sessions>, mut live: Live, mut ttl: Duration) {
    loop {
        follow(&sessions, &live, ttl).await;
        let Some(this) = sessions.upgrade() else {
            return;
        };
        this.end(&live);
        let (client, config) = (this.client.clone(), this.config.clone());
        drop(this);
        tracing::warn!(members = %config.members(), "the etcd session's lease ended; every lock held in it is lost");
        let ended = live.id;
        let mut backoff = Duration::from_millis(50);
        let (lease, granted, asked) = loop {
            match grant(&client, &config).await {
                Ok(answer) => break answer,
                Err(err) => {
                    tracing::warn!(error = %err, "cannot grant a new etcd session lease yet");
                    if sessions.strong_count() == 0 {
                        return;
                    }
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_secs(2));
                }
            }
        };
        let Some(this) = sessions.upgrade() else {
            return;
        };
        ttl = granted;
        live = Live {
            client,
            lease,
            id: ended + 1,
        };
        *locked(&this.current) = Some(live.clone());
        this.set(
            live.id,
            SessionState::Connected {
                valid_until: safe_deadline(asked, ttl),
            },
        );
    }
}

/// The answer to one keep-alive: the lease's TTL from then, or `None` when the lease is
/// gone.
async fn beat(
    live: &Live,
    stream: &mut Option<(LeaseKeeper, LeaseKeepAliveStream)>,
    ttl: Duration,
) -> std::result::Result<Option<Duration>, etcd_client::Error> {
    let Some((keeper, answers)) = stream else {
        // A new stream sends its first keep-alive itself.
        return match live.client.lease_client().keep_alive(live.lease).await {
            Ok(opened) => {
                *stream = Some(opened);
                Ok(Some(ttl))
            }
            Err(etcd_client::Error::LeaseKeepAliveError(why)) if why.contains("not found") => {
                Ok(None)
            }
            Err(err) if lease_gone(&err) => Ok(None),
            Err(err) => Err(err),
        };
    };
    keeper.keep_alive().await?;
    match answers.message().await? {
        Some(answer) if answer.ttl() > 0 => Ok(Some(Duration::from_secs(answer.ttl() as u64))),
        Some(_) => Ok(None),
        None => Err(etcd_client::Error::LeaseKeepAliveError(
            "the keep-alive stream ended".into(),
        )),
    }
}

/// Follows session `live` until its lease is gone, its deadline passed without an answer,
/// or the backend is dropped: a keep-alive every quarter of the TTL moves its deadline on;
/// one unanswered within that quarter suspends it.
async fn follow(sessions: &Weak<Sessions>, live: &Live, ttl: Duration) {
    let period = ttl / 4;
    let mut stream = None;
    let mut suspended_since = None;
    let mut next_beat = Instant::now() + period;
    loop {
        let Some(this) = sessions.upgrade() else {
            return;
        };
        let Some(valid_until) = this.valid_until(live.id) else {
            return;
        };
        if Instant::now() >= valid_until {
            tracing::warn!(
                members = %this.config.members(),
                "no keep-alive answered by etcd within the session's validity; ending the session, whose locks are lost"
            );
            return;
        }
        drop(this);
        tokio::select! {
            () = tokio::time::sleep_until(valid_until) => {}
            () = tokio::time::sleep_until(next_beat) => {
                next_beat = Instant::now() + period;
                let sent = Instant::now();
                let answered = tokio::time::timeout(period, beat(live, &mut stream, ttl)).await;
                let Some(this) = sessions.upgrade() else {
                    return;
                };
                match answered {
                    Ok(Ok(None)) => return,
                    // An answer after the deadline does not revive the session.
                    Ok(Ok(Some(ttl))) if Instant::now() < valid_until => {
                        suspended_since = None;
                        this.set(live.id, SessionState::Connected {
                            valid_until: safe_deadline(sent, ttl),
                        });
                        this.retry_deletes(live).await;
                    }
                    _ => {
                        // The next keep-alive goes on a new stream: an answer late on this
                        // one must not be taken for the next keep-alive's.
                        stream = None;
                        let since = *suspended_since.get_or_insert(sent);
                        this.set(live.id, SessionState::Suspended { since, valid_until });
                    }
                }
            }
        }
    }
}
