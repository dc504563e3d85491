//! The Redis lock store.

use std::sync::Arc;
use std::time::Duration;

use distlock_core::backend::{
    Backend, Capabilities, Floor, Grant, LeaseOutcome, LocalWakers, Note, PollOutcome, STARVATION,
    Ticket, async_trait,
};
use distlock_core::{Error, ErrorKind, HolderInfo, LockState, Result, Url, random_id, redact_url};
use tokio::task::AbortHandle;

use crate::error::{connect_error, redis_error, refusal};
use crate::keys::{Key, LockKeys};
use crate::record::{AcquireAnswer, RequestRecord, unwaited_start};
use crate::scripts::{Call, SCRIPTS, load_ours};
use crate::slots::SlotTags;
use channels::Channels;
use config::RedisConfig;
use connection::Conn;
pub(crate) use connection::ServerConn;
use contended::Contended;
use first_try::FirstTry;
use handovers::Handovers;
use keyspace::Keyspace;
pub(crate) use redlock_calls::{LetGo, MasterWake};
use refused::RedisTicket;
pub(crate) use refused::{refused_for_foreign, ticket_for_master};

mod adopt;
pub(crate) mod channels;
pub(crate) mod config;
pub(crate) mod connection;
mod contended;
mod first_try;
mod floor;
mod force_release;
mod handoff;
pub(crate) mod handovers;
mod inspect;
pub(crate) mod keyspace;
mod notes;
mod redlock_calls;
mod refused;
mod renewals;
mod wakeups;

/// How many locks keep a RedLock master's calls in order (see
/// `RedisBackend::into_redlock_master`): names share one by hash.
const IN_ORDER_STRIPES: usize = 64;

/// How long a waiter's queue entry lives without being refreshed. The core polls at least
/// every two seconds, so a live waiter always refreshes it in time; a dead one is gone
/// within this.
const WAITER_LEASE: Duration = Duration::from_secs(5);
/// A starvation limit no waiter reaches (a thousand years, in milliseconds).
const NEVER_STARVING_MS: u64 = 1000 * 365 * 24 * 3600 * 1000;

/// A lock store on one Redis server.
///
/// # Examples
///
/// ```no_run
/// # async fn f() -> distlock_core::Result<()> {
/// use std::sync::Arc;
/// use distlock_redis::{RedisBackend, RedisConfig};
///
/// let url = distlock_core::Url::parse("redis://127.0.0.1:6379/0").unwrap();
/// let backend = RedisBackend::open(RedisConfig::from_url(&url)?).await?;
/// let client = distlock_core::Client::with_backend(Arc::new(backend));
/// # Ok(()) }
/// ```
pub struct RedisBackend {
    /// The command connections; every operation on one lock uses the same one (see
    /// [`conn_for`](Self::conn_for)). A cluster has one, the cluster client.
    commands: Vec<Conn>,
    /// Round-robin position for commands that name no lock (the floor's PING).
    next: std::sync::atomic::AtomicUsize,
    /// For a cluster: a node URL (with the credentials) and the TLS authority, to reach
    /// each primary on its own.
    nodes: Option<(Url, Option<std::path::PathBuf>)>,
    acknowledged: Option<Acknowledged>,
    prefix: String,
    /// The tags of the fencing counters of `prefix`'s slots.
    fence_tags: Arc<SlotTags>,
    /// How long a lock's fencing counter lives after it is seeded, in ms (`fence_ttl`).
    fence_ttl_ms: u64,
    /// Whether a grant's fencing token is raised to this client's clock, in microseconds,
    /// when the counter is behind it: a RedLock master's (see `with_tokens_at_clock`).
    tokens_at_clock: bool,
    /// How long a lock a release hands this client's waiter stays granted unconfirmed
    /// (`handoff_claim`); zero where its waiters take no hand-offs.
    handoff_claim: Duration,
    /// Whether a first try is plain commands (`first_try=commands`; see `first_try`).
    first_try_commands: bool,
    /// The news releases send this client's waiters (see [`Handovers`]).
    handovers: Arc<Handovers>,
    /// The names lately found taken (see [`Contended`]).
    contended: Contended,
    /// On a RedLock master, the locks that keep the calls that take and give back one
    /// lock's grants in order (see `into_redlock_master`); none elsewhere.
    in_order: Vec<tokio::sync::Mutex<()>>,
    channel: String,
    wakers: Arc<LocalWakers>,
    /// The channels this client's waiters watch, on its wake-up connection.
    channels: Arc<Channels>,
    /// Watches of lock keys' keyspace events, on one server (not a cluster).
    keyspace: Option<Keyspace>,
    listener: AbortHandle,
    server: String,
}

/// Grants handed out only once replicas have them: acquires run on a connection of their
/// own, followed by `WAIT`, which counts the replicas that have that connection's writes
/// (and blocks the connection meanwhile, so the other operations stay off it).
struct Acknowledged {
    conn: Conn,
    replicas: u32,
    timeout: Duration,
}

impl std::fmt::Debug for RedisBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisBackend")
            .field("server", &self.server)
            .field("prefix", &self.prefix)
            .finish()
    }
}

impl Drop for RedisBackend {
    fn drop(&mut self) {
        self.listener.abort();
    }
}

impl RedisBackend {
    /// Makes this a RedLock's master:
    /// * every grant's fencing token is raised to this client's wall clock in microseconds
    ///   where the lock's counter is behind it: a master that lost its counter (restarted
    ///   empty, or a replica promoted before it had the last grants) would otherwise give
    ///   a majority a token at or below one already granted. Tokens then increase across
    ///   such a loss as long as the clients' clocks disagree by less than the time between
    ///   two grants, the bound RedLock's leases assume already;
    /// * the calls that take and give back a lock's grants (acquire, adopt, release,
    ///   cancel) run one after another per lock. A RedLock sends its release to every
    ///   master once a majority answered the acquire, while a slower master's acquire may
    ///   still be on its way; sent again (after a dropped connection, or a NOSCRIPT from a
    ///   master that restarted), that acquire could reach the master after the release,
    ///   and leave a grant nobody holds until its lease ends. The release waits for it.
    pub(crate) fn into_redlock_master(mut self) -> Self {
        self.tokens_at_clock = true;
        self.in_order = (0..IN_ORDER_STRIPES)
            .map(|_| tokio::sync::Mutex::new(()))
            .collect();
        self
    }

    /// On a RedLock master, waits until no other call that takes or gives back a grant of
    /// lock `name` runs (of this client; by stripe, so two names may share one), and holds
    /// that off until the guard is dropped.
    async fn in_order(&self, name: &str) -> Option<tokio::sync::MutexGuard<'_, ()>> {
        if self.in_order.is_empty() {
            return None;
        }
        let hash = crate::keys::name_hash(name);
        Some(
            self.in_order[(hash % self.in_order.len() as u64) as usize]
                .lock()
                .await,
        )
    }

    /// How long a waiter may be passed over before newcomers must let it go first
    /// ([`STARVATION`]); never on a RedLock master, whose queue orders hand-offs only: a
    /// lock found free there goes to whoever asks. A master that missed a grant (out of
    /// reach, restarted, or a replica promoted in its place) may keep the queue entry of a
    /// waiter granted on the others, which would hold the next majority back until it
    /// expired; and RedLock's exclusion rests on majorities alone.
    fn starvation_ms(&self) -> u64 {
        match self.tokens_at_clock {
            true => NEVER_STARVING_MS,
            false => STARVATION.as_millis() as u64,
        }
    }

    /// The least fencing token `ticket`'s grant may take, where tokens follow the clock:
    /// the one its RedLock set for every master, or the clock now.
    fn token_floor(&self, ticket: &Ticket) -> Option<u64> {
        self.tokens_at_clock.then(|| {
            let set = ticket.state::<RedisTicket>().and_then(|s| s.token_floor);
            set.unwrap_or_else(clock_floor)
        })
    }

    /// Connects, checks the server answers, and subscribes for wake-ups.
    ///
    /// # Examples
    ///
    /// See [`RedisBackend`].
    pub async fn open(config: RedisConfig) -> Result<RedisBackend> {
        distlock_core::backend::check_fence_ttl(config.fence_ttl)?;
        let server = redact_url(config.server.as_str());
        let tls_ca = config.tls_ca.as_deref();
        let client = connection::single_client(&config.server, tls_ca)?;
        let mut seeds = config.cluster_seeds.clone();
        if seeds.is_empty() && connection::probe(&client, config.connect_timeout).await? {
            seeds.push(config.server.clone());
        }
        let commands = match seeds.is_empty() {
            true => {
                let count = config.connections.max(1);
                let mut commands = Vec::with_capacity(count);
                let managed = redis::aio::ConnectionManagerConfig::new()
                    .set_connection_timeout(Some(config.connect_timeout));
                for _ in 0..count {
                    let conn = client
                        .get_connection_manager_with_config(managed.clone())
                        .await
                        .map_err(connect_error)?;
                    commands.push(Conn::Single(conn));
                }
                commands
            }
            false => vec![connection::cluster(&seeds, tls_ca, config.connect_timeout).await?],
        };
        // Wake-ups are published cluster-wide, so any node can deliver them: subscribe to
        // the first node that answers, and to the next if it goes away.
        let subscribe_to = match seeds.is_empty() {
            true => vec![client.clone()],
            false => seeds
                .iter()
                .map(|seed| connection::single_client(seed, tls_ca))
                .collect::<Result<_>>()?,
        };
        let acknowledged = match config.min_replicas {
            0 => None,
            replicas => {
                let patient = redis::aio::ConnectionManagerConfig::new()
                    .set_connection_timeout(Some(config.connect_timeout))
                    .set_response_timeout(Some(config.replica_timeout + Duration::from_secs(1)));
                let conn = client
                    .get_connection_manager_with_config(patient)
                    .await
                    .map_err(connect_error)?;
                Some(Acknowledged {
                    conn: Conn::Single(conn),
                    replicas,
                    timeout: config.replica_timeout,
                })
            }
        };
        let wakers = Arc::new(LocalWakers::new());
        let channel = format!("distlock:wake:{}", random_id());
        let channels = Channels::new();
        let handovers = Arc::new(Handovers::default());
        let keyspace = seeds.is_empty().then(|| {
            let db = client.get_connection_info().redis_settings().db();
            Keyspace::new(db, channels.clone())
        });
        let listener = wakeups::listen(
            subscribe_to,
            channel.clone(),
            wakers.clone(),
            channels.clone(),
            handovers.clone(),
            commands[0].clone(),
        )
        .await?;
        // Scripts are the server's, not a connection's: given them now, the first calls
        // find them (a RedLock master's calls are never sent twice; see
        // `into_redlock_master`). Loading is retried at any call that finds them missing, so
        // a server that refuses it (an ACL) says so at that call.
        if let Err(err) = load_ours(&mut commands[0].clone()).await {
            tracing::debug!(error = %err, "loading the lock scripts failed");
        }
        let nodes = (!seeds.is_empty()).then(|| (config.server.clone(), config.tls_ca.clone()));
        let fence_tags = SlotTags::for_prefix(&config.prefix);
        Ok(RedisBackend {
            commands,
            next: std::sync::atomic::AtomicUsize::new(0),
            nodes,
            acknowledged,
            fence_tags,
            prefix: config.prefix,
            fence_ttl_ms: config.fence_ttl.as_millis() as u64,
            tokens_at_clock: false,
            // A grant a release hands on is not one whose replicas were waited for; and on
            // a cluster, a release cannot tell whether the waiter's client listens (a
            // PUBLISH counts the receivers of its own node only).
            handoff_claim: match config.min_replicas > 0 || !seeds.is_empty() {
                true => Duration::ZERO,
                false => config.handoff_claim,
            },
            first_try_commands: config.first_try_commands,
            handovers,
            contended: Contended::default(),
            in_order: Vec::new(),
            channel,
            wakers,
            channels,
            keyspace,
            listener,
            server,
        })
    }

    /// Runs a script, once more if the connection dropped under it (the connection manager
    /// reconnects in the background). Every script is safe to repeat on its own: acquire answers the same grant to the
    /// same token, the others compare the token.
    async fn invoke<T: redis::FromRedisValue>(
        &self,
        name: &str,
        operation: &'static str,
        call: &Call<'_>,
    ) -> Result<T> {
        self.invoke_on(self.conn_for(name), operation, call).await
    }

    /// [`invoke`](Self::invoke) on connection `conn`.
    pub(crate) async fn invoke_on<T: redis::FromRedisValue>(
        &self,
        mut conn: Conn,
        operation: &'static str,
        call: &Call<'_>,
    ) -> Result<T> {
        let answer = match call.run(&mut conn).await {
            Err(err) if err.is_connection_dropped() || err.is_io_error() => {
                tracing::debug!(error = %err, operation, "redis connection dropped; trying once more");
                call.run(&mut conn).await
            }
            answer => answer,
        };
        answer.map_err(|err| match refusal(&err) {
            Some(message) => Error::invalid(message)
                .with_backend("redis")
                .with_operation(operation),
            None => redis_error(operation)(err),
        })
    }

    /// Waits until the replicas required have the grant just made for `ticket`; if they do
    /// not in time, gives the grant back and fails.
    async fn await_replicas(&self, acknowledged: &Acknowledged, ticket: &Ticket) -> Result<()> {
        let mut conn = acknowledged.conn.clone();
        let replicated: Result<u32> = redis::cmd("WAIT")
            .arg(acknowledged.replicas)
            .arg(acknowledged.timeout.as_millis() as u64)
            .query_async(&mut conn)
            .await
            .map_err(redis_error("acquire"));
        let short = match replicated {
            Ok(count) if count >= acknowledged.replicas => return Ok(()),
            Ok(count) => Error::new(
                ErrorKind::QuorumNotReached,
                format!(
                    "{count} of the {} replicas required had the grant within {:?}; it was given back",
                    acknowledged.replicas, acknowledged.timeout
                ),
            )
            .with_backend("redis")
            .with_operation("acquire"),
            Err(err) => err,
        };
        let grant = Grant::new(
            &ticket.request.name,
            &ticket.request.token,
            ticket.request.kind,
        );
        if let Err(err) = self.release(&grant).await {
            tracing::warn!(error = %err, "giving back an unreplicated grant failed; it ends with its TTL");
        }
        Err(short)
    }

    /// A grant the acquire script made: gives up the ticket's wake-up slot (registered
    /// before the full script, or made by a wait after a failed poll; one map removal, where
    /// tracking which would cost as much), and waits for the replicas, where the client asks
    /// for them.
    async fn granted(&self, ticket: &mut Ticket, fence: u64) -> Result<PollOutcome> {
        self.wakers.forget(&ticket.request.token);
        self.handovers.take(&ticket.request.token);
        RedisTicket::stop_waiting(ticket);
        if let Some(acknowledged) = &self.acknowledged {
            self.await_replicas(acknowledged, ticket).await?;
        }
        Ok(PollOutcome::granted(fence))
    }

    /// The connection every operation on lock `name` goes through (but batched renewals),
    /// so that they reach the server in the order they were made: a cancellation after
    /// the poll it cancels.
    pub(crate) fn conn_for(&self, name: &str) -> Conn {
        let index = match self.commands.len() {
            1 => 0,
            n => (crate::keys::name_hash(name) % n as u64) as usize,
        };
        self.commands[index].clone()
    }

    /// The connection for a request's polls and its cancellation: with replicas to wait
    /// for, the connection their `WAIT` counts on; otherwise the lock's.
    fn request_conn(&self, name: &str) -> Conn {
        match &self.acknowledged {
            Some(acknowledged) => acknowledged.conn.clone(),
            None => self.conn_for(name),
        }
    }

    /// Whether the server is a Redis Cluster.
    pub(crate) fn is_cluster(&self) -> bool {
        self.nodes.is_some()
    }

    /// A connection to each server that holds keys, for a SCAN (which walks one node):
    /// the one server, or each primary of a cluster.
    pub(crate) async fn key_servers(&self) -> Result<Vec<ServerConn>> {
        let Some((node_url, tls_ca)) = &self.nodes else {
            return Ok(vec![ServerConn::Pooled(self.any_conn())]);
        };
        let mut servers = Vec::new();
        for primary in connection::primaries(&mut self.any_conn()).await? {
            let url = crate::redis::config::seed(node_url, &primary)?;
            let client = connection::single_client(&url, tls_ca.as_deref())?;
            let conn = client
                .get_multiplexed_async_connection()
                .await
                .map_err(redis_error("inspect"))?;
            servers.push(ServerConn::Node(conn));
        }
        Ok(servers)
    }

    /// A connection for commands that name no lock.
    pub(crate) fn any_conn(&self) -> Conn {
        let turn = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.commands[turn % self.commands.len()].clone()
    }

    /// The wake-up slots of this client's waiting requests.
    pub(crate) fn wakers(&self) -> &Arc<LocalWakers> {
        &self.wakers
    }

    /// The channels this client's waiters watch.
    pub(crate) fn channels(&self) -> &Arc<Channels> {
        &self.channels
    }

    fn keys<'a>(&'a self, name: &'a str) -> Result<LockKeys<'a>> {
        LockKeys::new(&self.prefix, name, &self.fence_tags)
    }
}

#[async_trait]
impl Backend for RedisBackend {
    fn scheme(&self) -> &'static str {
        "redis"
    }

    fn capabilities(&self) -> Capabilities {
        let mut capabilities = Capabilities::full(true);
        capabilities.adopt = true;
        capabilities
    }

    async fn enqueue(&self, ticket: &mut Ticket) -> Result<()> {
        self.keys(&ticket.request.name)?;
        Ok(())
    }

    /// A poll of an exclusive request that has not queued itself tries a fast path first
    /// (the common case: a free lock nobody waits for): the fast-path script, or with
    /// `first_try=commands` four plain commands (see `first_try`; not on a RedLock
    /// master, whose tokens follow the clock). A request that has queued itself, a shared
    /// one, or one on a name this client lately found taken (see `Contended`), goes to the
    /// full script at once.
    async fn poll(&self, ticket: &mut Ticket) -> Result<PollOutcome> {
        if let Some(handed) = self.handed_over(ticket) {
            return Ok(handed);
        }
        let _in_order = self.in_order(&ticket.request.name).await;
        let queued = ticket.state::<RedisTicket>().is_some_and(|s| s.queued);
        let conn = self.request_conn(&ticket.request.name);
        let fast = !queued
            && ticket.request.kind.is_exclusive()
            && !self.contended.lately(&ticket.request.name);
        let floor = self.token_floor(ticket);
        let record = if fast && floor.is_none() && self.first_try_commands {
            match self.first_try(conn.clone(), ticket).await? {
                FirstTry::Granted(fence) => {
                    ticket.state_or_default::<RedisTicket>().unrecorded_fence = Some(fence);
                    return self.granted(ticket, fence).await;
                }
                FirstTry::Taken(record) => {
                    self.contended.note(&ticket.request.name);
                    record
                }
                FirstTry::Undecided(record) => record,
            }
        } else if fast {
            let request = &ticket.request;
            let keys = self.keys(&request.name)?;
            let head = match ticket
                .state::<RedisTicket>()
                .and_then(|s| s.grant_head.clone())
            {
                Some(head) => head,
                None => RequestRecord::of(request).to_grant_head()?.into(),
            };
            let mut fast = Call::new(&SCRIPTS.try_exclusive, keys, &Key::TRY);
            fast.arg(request.ttl.as_millis() as u64)
                .arg(&*head)
                .arg(self.fence_ttl_ms)
                .arg(floor);
            let fence: i64 = self.invoke_on(conn.clone(), "acquire", &fast).await?;
            if fence > 0 {
                return self.granted(ticket, fence as u64).await;
            }
            self.contended.note(&request.name);
            RequestRecord::of_grant_head(head.to_string())
        } else {
            RequestRecord::of(&ticket.request).to_json()?
        };
        // The full script may queue the request: its wake-up slot must exist first, so no
        // hand-off can miss it. A grant on the fast path needs none.
        if ticket.request.wait {
            self.wakers.register(ticket);
        }
        let request = &ticket.request;
        let mut full = Call::new(&SCRIPTS.acquire, self.keys(&request.name)?, &Key::ALL);
        full.arg(&request.token)
            .arg(request.ttl.as_millis() as u64)
            .arg(&record)
            .arg(request.kind.as_str())
            .arg(u8::from(request.wait))
            .arg(u8::from(request.fair))
            .arg(WAITER_LEASE.as_millis() as u64)
            .arg(self.starvation_ms())
            .arg(&self.channel)
            .arg(request.permits)
            .arg(request.kind.limit())
            .arg(self.fence_ttl_ms)
            .arg(self.claim_for(request).as_millis() as u64);
        if let Some(floor) = self.token_floor(ticket) {
            full.arg(floor);
            if let Some(order) = ticket.state::<RedisTicket>().and_then(|s| s.queue_order) {
                full.arg(order);
            }
        }
        let sent = tokio::time::Instant::now();
        let answer: Vec<i64> = self.invoke_on(conn, "acquire", &full).await?;
        match AcquireAnswer::decode(&answer)? {
            AcquireAnswer::Granted(fence) => self.granted(ticket, fence).await,
            AcquireAnswer::Refused {
                left,
                foreign,
                server_ms,
            } => {
                ticket.state_or_default::<RedisTicket>().last_refused = Some((sent, server_ms));
                self.contended.note(&ticket.request.name);
                let retry_within = self.refused(ticket, left, foreign).await;
                Ok(PollOutcome::pending(retry_within))
            }
        }
    }

    async fn wait_for_change(&self, ticket: &mut Ticket, backstop: Option<Duration>) -> Result<()> {
        self.wait_for_news(ticket, backstop).await;
        Ok(())
    }

    async fn adopt(
        &self,
        handed: &Grant,
        fencing_token: u64,
        ticket: &mut Ticket,
    ) -> Result<PollOutcome> {
        let _in_order = self.in_order(&handed.name).await;
        let adopted = self.adopt_grant(handed, fencing_token, ticket).await?;
        Ok(PollOutcome::granted(adopted))
    }

    async fn cancel(&self, ticket: &mut Ticket) -> Result<()> {
        self.wakers.forget(&ticket.request.token);
        self.handovers.take(&ticket.request.token);
        RedisTicket::stop_waiting(ticket);
        // A name that makes no key never reached the server: nothing to withdraw.
        let Ok(keys) = self.keys(&ticket.request.name) else {
            return Ok(());
        };
        let _in_order = self.in_order(&ticket.request.name).await;
        let mut cancel = Call::new(&SCRIPTS.cancel, keys, &Key::ALL);
        cancel.arg(&ticket.request.token).arg(self.fence_ttl_ms);
        let conn = self.request_conn(&ticket.request.name);
        let _: i64 = self.invoke_on(conn, "cancel", &cancel).await?;
        Ok(())
    }

    async fn renew_many(&self, grants: &[Grant], ttl: Duration) -> Result<Vec<LeaseOutcome>> {
        if let [grant] = grants {
            // One renewal (one asked for by hand, say) goes on its lock's connection, once
            // more if the connection dropped under it.
            return Ok(vec![self.renew_one(grant, ttl).await?]);
        }
        if self.nodes.is_some() {
            // A pipeline goes to one node; the locks of a cluster live on many. Sent at
            // once, the renewals still share each node's connection.
            let renewals = grants.iter().map(|grant| self.renew_one(grant, ttl));
            return futures_util::future::join_all(renewals)
                .await
                .into_iter()
                .collect();
        }
        // One pipeline: every renewal in one round trip. It may reach the server before or
        // after the lock's other operations, which travel on the lock's own connection:
        // a renewal that comes after the release only finds the grant gone.
        self.renew_pipeline(self.any_conn(), grants.iter(), ttl)
            .await
    }

    /// An exclusive grant is released by the fast-path script while nobody waits for it;
    /// otherwise (or for shared grants) by the full one, which hands the lock on. A grant
    /// its request waited for goes to the full one at once: others likely wait too.
    async fn release(&self, grant: &Grant) -> Result<LeaseOutcome> {
        let keys = self.keys(&grant.name)?;
        let _in_order = self.in_order(&grant.name).await;
        let mut released: i64 = -1;
        let waited = grant.state::<RedisTicket>().is_some_and(|s| s.queued);
        if grant.kind.is_exclusive() && !waited {
            let mut fast = Call::new(&SCRIPTS.release_exclusive, keys, &Key::RELEASE_FAST);
            fast.arg(unwaited_start(&grant.token));
            released = self.invoke(&grant.name, "release", &fast).await?;
        }
        if released == -1 {
            let mut full = Call::new(&SCRIPTS.release, keys, &Key::ALL);
            full.arg(&grant.token).arg(self.fence_ttl_ms);
            released = self.invoke(&grant.name, "release", &full).await?;
        }
        Ok(if released == 1 {
            LeaseOutcome::Done
        } else {
            LeaseOutcome::NotHeld
        })
    }

    fn check_name(&self, name: &str) -> Result<()> {
        self.keys(name).map(drop)
    }

    async fn write_note(
        &self,
        grant: &Grant,
        fencing_token: u64,
        value: &str,
        quiet_for: Option<Duration>,
    ) -> Result<Option<u64>> {
        self.write_note_of(grant, fencing_token, value, quiet_for)
            .await
    }

    async fn read_note(&self, name: &str) -> Result<Option<Note>> {
        self.read_note_of(name).await
    }

    async fn force_release(
        &self,
        name: &str,
        fencing_token: Option<u64>,
    ) -> Result<Vec<HolderInfo>> {
        self.break_grants(name, fencing_token).await
    }

    async fn inspect(&self, name: Option<&str>) -> Result<Vec<LockState>> {
        if let Some(name) = name {
            return Ok(vec![self.state_of(name).await?]);
        }
        let mut names = Vec::new();
        for mut server in self.key_servers().await? {
            names.extend(self.scan_names(&mut server).await?);
        }
        names.sort();
        names.dedup();
        let mut states = Vec::new();
        for name in names {
            let state = self.state_of(&name).await?;
            if !state.holders.is_empty() || !state.waiters.is_empty() {
                states.push(state);
            }
        }
        Ok(states)
    }

    fn floor(&self) -> Option<&dyn Floor> {
        Some(self)
    }
}

/// The least fencing token a grant may take now where tokens follow the clock: this
/// client's clock, in microseconds.
pub(crate) fn clock_floor() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_micros() as u64)
}
