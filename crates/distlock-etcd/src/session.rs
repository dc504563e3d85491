//! The client's etcd session, kept and reported to the core: one lease at a time, kept
//! alive by one keep-alive stream, a new one granted when it expires. The first lease is
//! granted when a request first needs one, so a client that only looks (`status`) or
//! breaks locks holds none.
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

use std::collections::VecDeque;
use std::sync::{Arc, Mutex as StdMutex, Weak};
use std::time::Duration;

use distlock_core::backend::{
    PendingDeletes, SessionSlot, SessionState, safe_deadline, until_done,
};
use distlock_core::{Error, ErrorKind, Result};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tonic::{Status, Streaming};

use crate::config::EtcdConfig;
use crate::error::{etcd_error, lease_gone};
use crate::grpc::{Answer, Client, ConnectError, Options, ops, pb};
use crate::members::Members;
use crate::watches::Watches;

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

/// The sessions of one distlock client.
pub(crate) struct Sessions {
    config: EtcdConfig,
    client: Client,
    /// The session requests are made in, and its state as the core follows it.
    pub(crate) slot: SessionSlot<Live>,
    /// How many contender keys requests have taken in the session (its id, the count):
    /// a key's name is never taken twice in a session, so a delete of an old request that
    /// lands late can never remove a newer request's key.
    taken: StdMutex<(u64, u64)>,
    /// Deletes of keys not known to be done, made again once the session answers.
    pub(crate) pending: PendingDeletes<Doomed>,
    /// The client's one watch stream, which every wait and held key's watch shares.
    pub(crate) watches: Watches,
    /// Whether the first lease was granted; held while it is asked for, so it is asked for
    /// once (by a task of its own, which a caller that gives up does not stop halfway).
    opened: tokio::sync::Mutex<bool>,
}

/// A contender key to delete once the session answers.
#[derive(Debug, Clone)]
pub(crate) struct Doomed {
    pub(crate) key: String,
    /// Its create revision; 0 if its create was not answered.
    pub(crate) created: i64,
    /// The revision of the write that granted it; 0 if it was not granted.
    pub(crate) granted: i64,
    /// The fencing token of the grant an adoption took over (0: none): the delete then
    /// applies only to a key written since, by the adoption (a key still the sender's,
    /// on this very lease when it adopts through its own client, is left to it).
    pub(crate) adopted_from: i64,
    /// Until when the delete is made again even after it was answered: a key whose create
    /// was sent without an answer may still be written by that create after a first delete
    /// (etcd may apply a request after its caller gave up on it).
    pub(crate) linger_until: Option<Instant>,
}

impl Drop for Sessions {
    /// Revokes the current lease in the background, so the locks of a client dropped
    /// without releasing them (a program that ends) are free at once, not a TTL later.
    fn drop(&mut self) {
        if let Some(live) = self.slot.live() {
            crate::runtime::SESSIONS.spawn(async move {
                let _ =
                    tokio::time::timeout(CALL_BOUND, live.client.lease_revoke(live.lease)).await;
            });
        }
    }
}

impl std::fmt::Debug for Sessions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sessions")
            .field("config", &self.config)
            .field("session", &*self.slot.subscribe().borrow())
            .finish()
    }
}

/// The poison-proof lock of a mutex.
fn locked<T>(mutex: &StdMutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

impl Sessions {
    /// Connects (failing at once when no member answers, or the credentials are refused)
    /// on the sessions' own runtime; the first lease is granted by [`Sessions::current`].
    pub(crate) async fn open(config: EtcdConfig) -> Result<Arc<Sessions>> {
        crate::runtime::SESSIONS.run(Sessions::start(config)).await
    }

    async fn start(config: EtcdConfig) -> Result<Arc<Sessions>> {
        let (client, members) = connect(&config).await?;
        let sessions = Arc::new(Sessions {
            config,
            client: client.clone(),
            slot: SessionSlot::unopened("etcd"),
            taken: StdMutex::new((1, 0)),
            pending: PendingDeletes::default(),
            watches: Watches::start(client.clone()),
            opened: tokio::sync::Mutex::new(false),
        });
        if let Some(members) = members {
            let weak = Arc::downgrade(&sessions);
            let client = move || {
                let sessions = weak.upgrade()?;
                Some((sessions.client().clone(), sessions.watches.clone()))
            };
            tokio::spawn(crate::members::follow(members, client));
        }
        Ok(sessions)
    }

    /// The session requests are made in, the first one granted now if none was yet; an
    /// error (temporary) while a later one is granted after one ended.
    pub(crate) async fn current(self: &Arc<Self>) -> Result<Live> {
        if let Some(live) = self.slot.live() {
            return Ok(live);
        }
        match self.opened.try_lock() {
            // Another request is granting the first lease: wait for it, not beside it.
            Err(_) => drop(self.opened.lock().await),
            Ok(opened) if *opened => {}
            Ok(opened) => {
                drop(opened);
                let opening = Arc::clone(self);
                crate::runtime::SESSIONS.run(opening.open_first()).await?;
            }
        }
        self.slot.current()
    }

    /// Grants the first lease (a member that refused gets [`FIRST_TRIES`] chances) and
    /// starts keeping it, unless that was done.
    async fn open_first(self: Arc<Self>) -> Result<()> {
        let mut opened = self.opened.lock().await;
        if *opened {
            return Ok(());
        }
        let mut tries = 1;
        let (lease, ttl, asked) = loop {
            match grant(&self.client, &self.config).await {
                Err(err) if err.kind() == ErrorKind::Unavailable && tries < FIRST_TRIES => {
                    tries += 1;
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                answer => break answer?,
            }
        };
        let live = Live {
            client: self.client.clone(),
            lease,
            id: 1,
        };
        self.slot.open(1, live.clone(), safe_deadline(asked, ttl));
        *opened = true;
        tokio::spawn(keep(Arc::downgrade(&self), live, ttl));
        Ok(())
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
    /// in session `live`: etcd's `<pfx><lease in hex>` for the session's first request,
    /// `…_<n>` for the n-th after it. No name is taken twice in a session.
    pub(crate) fn take_key(&self, live: &Live, pfx: &str) -> String {
        let mut taken = locked(&self.taken);
        if taken.0 != live.id {
            *taken = (live.id, 0);
        }
        let n = taken.1;
        taken.1 += 1;
        match n {
            0 => format!("{pfx}{:x}", live.lease),
            n => format!("{pfx}{:x}_{n}", live.lease),
        }
    }

    /// Makes the deletes pending in session `live` again, each bounded by `within`: keys
    /// whose create was never answered a hundred to a transaction, any other alone and
    /// only while it is still its request's (not adopted since: [`ops::still_of`]);
    /// forgets those answered, unless they linger.
    async fn retry_deletes(&self, live: &Live, within: Duration) {
        let (unanswered, answered): (Vec<_>, Vec<_>) = self
            .pending
            .due(live.id)
            .into_iter()
            .partition(|(_, doomed)| doomed.created == 0);
        let batches = unanswered
            .chunks(100)
            .map(|batch| {
                let deletes = batch.iter().map(|(_, d)| ops::delete(&d.key)).collect();
                (batch, ops::txn(Vec::new(), deletes, Vec::new()))
            })
            .chain(answered.chunks(1).map(|one| {
                let doomed = &one[0].1;
                let mut when =
                    ops::still_of(&doomed.key, doomed.created, doomed.granted, live.lease);
                if doomed.adopted_from > 0 {
                    when.push(ops::modified_after(&doomed.key, doomed.adopted_from));
                }
                (
                    one,
                    ops::txn(when, vec![ops::delete(&doomed.key)], Vec::new()),
                )
            }));
        for (batch, txn) in batches {
            let answered = tokio::time::timeout(within, live.client.txn(txn)).await;
            if !matches!(answered, Ok(Ok(_))) {
                return;
            }
            let now = Instant::now();
            for (number, doomed) in batch {
                if doomed.linger_until.is_none_or(|until| now >= until) {
                    self.pending.done(*number);
                }
            }
        }
    }

    /// Ends the session `ended` here: no request is made in it any more, its keys are
    /// forgotten, and its lease is revoked in the background (if the cluster answers; else
    /// etcd expires it, having heard nothing from it).
    fn end(&self, ended: &Live) {
        self.slot.end(ended.id);
        self.pending.forget(ended.id);
        let (client, lease) = (ended.client.clone(), ended.lease);
        tokio::spawn(async move {
            let _ = tokio::time::timeout(CALL_BOUND, client.lease_revoke(lease)).await;
        });
    }
}

/// How often a member's status (at connect) or the first lease is asked for before giving
/// up: a member that refused once (busy starting, say) gets another chance.
const FIRST_TRIES: u32 = 3;

/// How long a connect, a lease grant or a revoke may take.
const CALL_BOUND: Duration = Duration::from_secs(10);

/// The client of `config`'s cluster: credentials, TLS, and requests that fail on a member
/// without a leader (which could not keep a lease alive either), sent to the members that
/// serve; with several members, the members it steers among.
async fn connect(config: &EtcdConfig) -> Result<(Client, Option<Members>)> {
    let mut options = Options {
        require_leader: true,
        ..Options::default()
    };
    if let Some(ca) = &config.tls_ca {
        // Several rustls providers are built in; use the one every distlock backend uses.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let pem = std::fs::read(ca).map_err(|e| {
            Error::invalid(format!("cannot read tls_ca {}: {e}", ca.display())).with_backend("etcd")
        })?;
        if !pem.windows(27).any(|w| w == b"-----BEGIN CERTIFICATE-----") {
            return Err(Error::invalid(format!(
                "tls_ca {} holds no PEM certificate",
                ca.display()
            ))
            .with_backend("etcd"));
        }
        options.tls_ca = Some(pem);
    }
    let mut members = Members::of(config, &options).await?;
    let endpoints = match members.as_mut() {
        Some(members) => members.choose().await,
        None => config.endpoints.clone(),
    };
    options.credentials = config.credentials.clone();
    let over = match config.tls_ca {
        Some(_) => " over TLS (is tls_ca the authority of the members' certificates?)",
        None => "",
    };
    let unreachable = || {
        Error::new(
            ErrorKind::Unavailable,
            format!("no etcd member answered at {}{over}", config.members()),
        )
        .with_backend("etcd")
        .temporary()
    };
    let connected = async {
        let client = Client::connect(&endpoints, &options).await?;
        // With credentials, connecting asked etcd for a token; without, its status is asked,
        // so that an unreachable cluster fails here, not at the first lock. A member that
        // refused once (busy starting, say) gets another chance.
        let mut tries = 1;
        while options.credentials.is_none() {
            match client.status().await {
                Ok(_) => break,
                Err(_) if tries < FIRST_TRIES => {
                    tries += 1;
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(refused) => return Err(ConnectError::Refused(refused)),
            }
        }
        Ok(client)
    };
    match tokio::time::timeout(CALL_BOUND, connected).await {
        Ok(Ok(client)) => Ok((client, members)),
        Ok(Err(ConnectError::Endpoint(err))) => Err(err.with_backend("etcd")),
        Ok(Err(ConnectError::Refused(status))) => {
            let err = etcd_error("connect")(status);
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
    let answer = tokio::time::timeout(CALL_BOUND, client.lease_grant(ttl))
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
    if !answer.error.is_empty() || answer.ttl <= 0 {
        return Err(Error::new(
            ErrorKind::Backend,
            format!("etcd refused a lease: {}", answer.error),
        )
        .with_backend("etcd"));
    }
    Ok((answer.id, Duration::from_secs(answer.ttl as u64), asked))
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
        let granted = until_done(
            "grant a new etcd session lease",
            || sessions.strong_count() > 0,
            || grant(&client, &config),
        );
        let Some((lease, granted, asked)) = granted.await else {
            return;
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
        this.slot
            .open(live.id, live.clone(), safe_deadline(asked, ttl));
    }
}

/// One keep-alive stream of a lease: its sending half, its answers, and the sending times
/// of the keep-alives not yet answered. Answers come in the order of the keep-alives, so
/// each is paired with the oldest unanswered one: a late answer never counts for a later
/// keep-alive.
struct Stream {
    lease: i64,
    keeper: mpsc::UnboundedSender<pb::LeaseKeepAliveRequest>,
    answers: Streaming<pb::LeaseKeepAliveResponse>,
    unanswered: VecDeque<Instant>,
}

/// What one answer on a keep-alive stream says.
enum Answered {
    /// The lease lives for this TTL from the keep-alive sent at `sent`.
    Alive { sent: Instant, ttl: Duration },
    /// The lease is gone.
    Gone,
}

/// The error of a keep-alive stream that ended.
fn stream_ended(why: &str) -> Status {
    Status::unavailable(why)
}

impl Stream {
    /// Opens a stream for `live`'s lease with a first keep-alive, answered before this
    /// returns: `None` when the lease is gone.
    async fn open(live: &Live) -> Answer<Option<Stream>> {
        let (keeper, mut answers) = match live.client.lease_keep_alive(live.lease).await {
            Ok(opened) => opened,
            Err(status) if lease_gone(&status) => return Ok(None),
            Err(status) => return Err(status),
        };
        match answers.message().await {
            Ok(Some(first)) if first.ttl > 0 => Ok(Some(Stream {
                lease: live.lease,
                keeper,
                answers,
                unanswered: VecDeque::new(),
            })),
            Ok(Some(_)) => Ok(None),
            Err(status) if lease_gone(&status) => Ok(None),
            Err(status) => Err(status),
            Ok(None) => Err(stream_ended("the keep-alive stream ended")),
        }
    }

    fn send(&mut self) -> Answer<()> {
        self.unanswered.push_back(Instant::now());
        let keep_alive = pb::LeaseKeepAliveRequest { id: self.lease };
        self.keeper
            .send(keep_alive)
            .map_err(|_| stream_ended("the keep-alive stream ended"))
    }

    /// The next answer, paired with its keep-alive; an error when the stream broke.
    async fn answer(&mut self) -> Answer<Answered> {
        let answer = self
            .answers
            .message()
            .await?
            .ok_or_else(|| stream_ended("the keep-alive stream ended"))?;
        let sent = self
            .unanswered
            .pop_front()
            .ok_or_else(|| stream_ended("an answer to no keep-alive"))?;
        Ok(match answer.ttl {
            ttl if ttl > 0 => Answered::Alive {
                sent,
                ttl: Duration::from_secs(ttl as u64),
            },
            _ => Answered::Gone,
        })
    }

    /// When the oldest unanswered keep-alive was sent.
    fn waiting_since(&self) -> Option<Instant> {
        self.unanswered.front().copied()
    }
}

/// Follows session `live` until its lease is gone, its deadline passed without an answer,
/// or the backend is dropped. A keep-alive goes every quarter of the TTL on one stream;
/// each answer moves the deadline on to its keep-alive's sending plus the TTL. A
/// keep-alive left unanswered for a quarter of the TTL suspends the session; a stream
/// that breaks is opened again at the next beat.
async fn follow(sessions: &Weak<Sessions>, live: &Live, ttl: Duration) {
    let period = ttl / 4;
    let mut stream: Option<Stream> = None;
    // When the last stream broke (or could not be opened), while there is none.
    let mut broken: Option<Instant> = None;
    let mut suspended_since: Option<Instant> = None;
    let mut next_beat = Instant::now() + period;
    loop {
        let Some(this) = sessions.upgrade() else {
            return;
        };
        let Some(valid_until) = this.slot.valid_until(live.id) else {
            return;
        };
        let now = Instant::now();
        if now >= valid_until {
            tracing::warn!(
                members = %this.config.members(),
                "no keep-alive answered by etcd within the session's validity; ending the session, whose locks are lost"
            );
            return;
        }
        // Since when contact is in doubt, and from when that suspends the session: a
        // keep-alive unanswered for a quarter of the TTL, or a broken stream at once.
        let doubt = match &stream {
            Some(open) => open.waiting_since().map(|since| (since, since + period)),
            None => broken.map(|since| (since, since)),
        };
        if let Some((since, _)) = doubt.filter(|(_, from)| now >= *from) {
            let since = *suspended_since.get_or_insert(since);
            this.slot
                .set(live.id, SessionState::suspended(since, valid_until));
        }
        drop(this);
        let wake = doubt
            .map(|(_, from)| from)
            .filter(|from| *from > now)
            .map_or(next_beat, |from| from.min(next_beat));
        let answered = async {
            match stream.as_mut() {
                Some(stream) => stream.answer().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            () = tokio::time::sleep_until(valid_until.min(wake)) => {}
            answer = answered => match answer {
                Ok(Answered::Gone) => return,
                // An answer after the deadline does not revive the session.
                Ok(Answered::Alive { sent, ttl }) if Instant::now() < valid_until => {
                    let Some(this) = sessions.upgrade() else {
                        return;
                    };
                    suspended_since = None;
                    this.slot.set(live.id, SessionState::connected(safe_deadline(sent, ttl)));
                    // Apart from the keep-alives, which must go on meanwhile.
                    let live = live.clone();
                    tokio::spawn(async move { this.retry_deletes(&live, period).await });
                }
                Ok(Answered::Alive { .. }) => {}
                // Opened again at the next beat.
                Err(_) => {
                    broken = stream.take().and_then(|s| s.waiting_since()).or(Some(Instant::now()));
                }
            },
        }
        if Instant::now() < next_beat {
            continue;
        }
        next_beat = Instant::now() + period;
        match stream.as_mut() {
            Some(open) => {
                if open.send().is_err() {
                    broken = open.waiting_since();
                    stream = None;
                }
            }
            None => {
                let sent = Instant::now();
                match tokio::time::timeout(period, Stream::open(live)).await {
                    Ok(Ok(None)) => return,
                    Ok(Ok(Some(opened))) if Instant::now() < valid_until => {
                        stream = Some(opened);
                        broken = None;
                        let Some(this) = sessions.upgrade() else {
                            return;
                        };
                        suspended_since = None;
                        this.slot
                            .set(live.id, SessionState::connected(safe_deadline(sent, ttl)));
                    }
                    _ => {
                        broken.get_or_insert(sent);
                    }
                }
            }
        }
    }
}
