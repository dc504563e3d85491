//! Locks in Redisson's layout (`redis://…?layout=redisson`), so Rust and Java services
//! share them: the lock is a hash under the lock's name holding its holder's field
//! `<uuid>:<thread id>` and hold count, the lease its TTL; each grant counts one in
//! `redisson_lock_token:{name}` (Redisson's fenced lock), which is its fencing token; a
//! release deletes the hash and publishes `0` on `redisson_lock__channel:{name}`, where
//! waiters — Java's and distlock's — listen. The plain lock keeps no queue: a waiter
//! subscribes to the lock's channel before it tries again, and sleeps at most the lease
//! left, so a release whose message it missed costs it at most one lease. A fair lock
//! (`fair(true)`) keeps Redisson's fair-lock queue beside the hash ([`fair`]); a
//! read-write lock and a semaphore are Redisson's too ([`rwlock`], [`semaphore`]). For
//! `status`, distlock records its own holders (owner, host, process, token) in a field of
//! the lock's hash beside the holder's, which Java clients never read, and its waiters in
//! keys beside the lock that Java clients never touch.

use std::sync::{Arc, LazyLock};
use std::time::Duration;

use distlock_core::backend::{
    Backend, Capabilities, Floor, Grant, LeaseOutcome, LockRequest, PollOutcome, Ticket,
    WAITER_REFRESH, async_trait,
};
use distlock_core::{Error, ErrorKind, LockKind, LockState, Result, random_id};
use redis::Script;

use crate::record::RequestRecord;
use crate::redis::RedisBackend;
use crate::redis::channels::{Channels, Wakes, Watch};
use crate::redis::config::{Layout, RedisConfig};
use crate::scripts::Call;
use grants::{GRANTS, Recorded, acquire_script};
use pubsub::LayoutScript;

mod fair;
mod grants;
mod inspect;
mod layout;
mod pubsub;
mod rwlock;
mod semaphore;

pub(crate) use layout::{process_uuid, valid_uuid};

/// How long an unlock's latch keeps its answer for an unlock asked again: an unlock is
/// asked again at once, on a connection made again, so a few seconds cover it, and the
/// latch is left to expire rather than deleted by a command of its own (Redisson's client
/// sends one: a command per release, about a twentieth of an uncontended cycle here).
const LATCH_KEEP: Duration = Duration::from_secs(5);
/// How often a waiter looks again at a lock hash that has no TTL (written by a client
/// with a bug, or made persistent by hand): never a grant, and no lease to wait out.
const NO_TTL_RECHECK: Duration = Duration::from_secs(1);
/// How long a waiter's record lives without a poll (a waiter polls every
/// [`WAITER_REFRESH`] at least).
const WAITER_LEASE: Duration = Duration::from_secs(5);
/// How often a waiter writes its record again: often enough that it outlives the gaps
/// between polls, seldom enough that a herd of waiters woken by a release (every client
/// listening on the lock's channel hears it) does not write one each time.
const NOTE_AGAIN: Duration = Duration::from_millis(1_500);

/// The time now, in milliseconds since the Unix epoch.
fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// The scripts of this layout.
struct Scripts {
    acquire: LayoutScript,
    release: LayoutScript,
    renew: Script,
}

static SCRIPTS: LazyLock<Scripts> = LazyLock::new(|| Scripts {
    acquire: acquire_script(&[GRANTS], include_str!("../scripts/redisson_acquire.lua")),
    release: fair::with_queue(include_str!("../scripts/redisson_release.lua")),
    renew: Script::new(include_str!("../scripts/redisson_renew.lua")),
});

/// A lock store on one Redis server in Redisson's layout.
///
/// # Examples
///
/// ```no_run
/// # async fn f() -> distlock_core::Result<()> {
/// use std::sync::Arc;
/// use distlock_redis::{RedisConfig, RedissonBackend};
///
/// let url = distlock_core::Url::parse("redis://127.0.0.1:6379/0?layout=redisson").unwrap();
/// let backend = RedissonBackend::open(RedisConfig::from_url(&url)?).await?;
/// let client = distlock_core::Client::with_backend(Arc::new(backend));
/// let guard = client.mutex("orders").lock().await?; // a Java `RLock` on "orders" waits
/// # Ok(()) }
/// ```
pub struct RedissonBackend {
    /// The connections and the wake-up subscription.
    redis: RedisBackend,
    /// This client's id in holders' fields.
    uuid: String,
    /// How long a fair lock's head waiter may take to claim its turn (Redisson's
    /// `fairLockWaitTimeout`).
    fair_turn: Duration,
    /// The Java clients' watchdog timeout (`lease`): the lease a hold left after an unlock
    /// gets, and the longest a read hold may take.
    lease: Duration,
    /// Whether semaphores take Redisson's as it is, its permits not leased
    /// (`semaphore=redisson`).
    unleased_semaphores: bool,
    /// On a cluster whose Java clients publish with sharded pub/sub: the channels this
    /// client's waiters watch, each subscribed on its shard; the scripts publish with
    /// `SPUBLISH`.
    sharded_channels: Option<Arc<Channels>>,
}

/// A request's state: its subscription to its lock's channel while it waits, since when
/// it waits (while its waiter record may stand) and when it last wrote that record,
/// whether its tries take a place in a fair
/// lock's queue (once it listens on its own channel, or could not), whether it may stand
/// there, and whether a try of it was sent without an answer (it may have been granted).
#[derive(Default)]
struct Waiting {
    watch: Option<Watch>,
    since_ms: Option<u64>,
    noted: Option<std::time::Instant>,
    queues: bool,
    queued: bool,
    unanswered: bool,
}

/// What one try at a grant found.
enum Tried {
    Granted(u64),
    /// Held by another for this long (`None`: a hash without a TTL).
    Busy(Option<Duration>),
}

impl std::fmt::Debug for RedissonBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedissonBackend")
            .field("redis", &self.redis)
            .field("uuid", &self.uuid)
            .field("sharded_pubsub", &self.sharded_channels.is_some())
            .finish_non_exhaustive()
    }
}

impl RedissonBackend {
    /// Connects to the server of a `layout=redisson` URL and subscribes for wake-ups.
    ///
    /// # Examples
    ///
    /// See [`RedissonBackend`].
    pub async fn open(config: RedisConfig) -> Result<RedissonBackend> {
        let Layout::Redisson {
            uuid,
            fair_wait_timeout,
            lease,
            unleased_semaphores,
            pubsub,
        } = config.layout.clone()
        else {
            return Err(Error::invalid(
                "Redisson's layout is asked for with layout=redisson in the URL",
            ));
        };
        let sharded = pubsub::Sharded::of(&config);
        let redis = RedisBackend::open(config).await?;
        let sharded_channels = sharded.channels(&redis, pubsub).await?;
        Ok(RedissonBackend {
            redis,
            uuid,
            fair_turn: fair_wait_timeout,
            lease,
            unleased_semaphores,
            sharded_channels,
        })
    }

    /// The channels this client's waiters watch: on their shards when the Java clients
    /// publish with sharded pub/sub, else on the client's wake-up connection.
    fn channels(&self) -> &Arc<Channels> {
        self.sharded_channels
            .as_ref()
            .unwrap_or_else(|| self.redis.channels())
    }

    /// `script` as this client runs it: publishing as the Java clients do.
    fn script<'a>(&self, script: &'a LayoutScript) -> &'a Script {
        script.publishing(self.sharded_channels.is_some())
    }

    /// Refuses what this layout cannot give: a fair queue for a read-write lock or a
    /// semaphore (Redisson's have none), and a read hold leased longer than the Java
    /// clients' watchdog timeout (their renewal sets the lock's TTL to it, which would end
    /// the hash before this hold's lease).
    fn check_request(&self, request: &LockRequest) -> Result<()> {
        self.check_name(&request.name)?;
        let kind = match request.kind {
            LockKind::Read | LockKind::Write => "read-write lock",
            LockKind::Semaphore { .. } => "semaphore",
            _ => return Ok(()),
        };
        if request.fair {
            return Err(Error::new(
                ErrorKind::Unsupported,
                format!(
                    "a fair {kind} is not offered in Redisson's layout: Redisson's {kind} keeps no queue"
                ),
            ));
        }
        if request.kind == LockKind::Read && request.ttl > self.lease {
            return Err(read_lease_too_long(self.lease));
        }
        Ok(())
    }

    /// Refuses a name whose keys a cluster would put in different slots: Redisson's rule
    /// wraps a name without `{` in braces and keeps a name's own `{`, so a name with
    /// braces must hold a hash tag.
    fn check_name(&self, name: &str) -> Result<()> {
        match self.redis.is_cluster() && !layout::fits_one_slot(name) {
            true => Err(Error::invalid(format!(
                "lock name `{}` cannot be shared with Redisson on a Redis Cluster: a name with `{{` or `}}` must hold a hash tag (`{{` then `}}` with something between, as in `orders{{eu}}`) so that every key of the lock is in one slot",
                name.escape_debug()
            ))),
            false => Ok(()),
        }
    }

    /// One try at a grant for `ticket`'s request. Until it is answered, the ticket says a
    /// grant may have been made (a cancel then takes it back); a fair request that queues
    /// may stand in the queue from then on.
    async fn try_acquire(&self, ticket: &mut Ticket) -> Result<Tried> {
        let waiting = ticket.state_or_default::<Waiting>();
        let queues = waiting.queues;
        waiting.queued |= queues;
        waiting.unanswered = true;
        let tried = self.try_once(ticket, queues).await;
        // A try that failed may have been granted before its answer was lost.
        if tried.is_ok() {
            ticket.state_or_default::<Waiting>().unanswered = false;
        }
        tried
    }

    async fn try_once(&self, ticket: &Ticket, queues: bool) -> Result<Tried> {
        let request = &ticket.request;
        let recorded = Recorded::of(ticket);
        match request.kind {
            LockKind::Read | LockKind::Write => return self.try_rw(request, &recorded).await,
            LockKind::Semaphore { .. } => return self.try_semaphore(request, &recorded).await,
            _ => {}
        }
        let field = layout::field(&self.uuid, &request.token);
        let record = RequestRecord::of(request).to_json()?;
        let answer: (i64, i64) = match request.fair {
            true => {
                self.try_fair(request, &field, record, queues, &recorded)
                    .await?
            }
            false => {
                let counter = layout::token_key(&request.name);
                let keys = recorded.keys(&[request.name.as_str(), &counter]);
                let mut acquire = Call::with_keys(self.script(&SCRIPTS.acquire), &keys);
                acquire
                    .arg(request.ttl.as_millis() as u64)
                    .arg(&field)
                    .arg(layout::record_field(&field))
                    .arg(record)
                    .arg(&recorded.token);
                let conn = self.redis.conn_for(&request.name);
                self.redis.invoke_on(conn, "acquire", &acquire).await?
            }
        };
        match answer {
            (1, token) => Ok(Tried::Granted(token.max(0) as u64)),
            // PTTL -1: a hash without a TTL; 0: one about to expire.
            (0, -1) => Ok(Tried::Busy(None)),
            (0, left) => Ok(Tried::Busy(Some(Duration::from_millis(left.max(1) as u64)))),
            (-2, _) => Err(Error::invalid(format!(
                    "the key `{}` is a Redisson read-write lock, not a lock: a client uses this name as getReadWriteLock, so take it as one (Client::rwlock; distlock run --shared or --exclusive)",
                request.name
            ))
            .with_backend("redis")
            .with_operation("acquire")),
            _ => Err(not_a_lock_hash(&request.name)),
        }
    }

    /// The request stops waiting: it stops listening, and its waiter record goes.
    async fn stop_waiting(&self, ticket: &mut Ticket) {
        if self.stop_listening(ticket) {
            self.note_waiter(&ticket.request, 0, None).await;
        }
    }

    /// The request stops listening, and forgets its waiter record (a grant drops it);
    /// whether it had one.
    fn stop_listening(&self, ticket: &mut Ticket) -> bool {
        self.redis.wakers().forget(&ticket.request.token);
        let waiting = ticket.state_or_default::<Waiting>();
        waiting.watch = None;
        waiting.noted = None;
        waiting.since_ms.take().is_some()
    }

    /// Records waiter `request` (waiting since `since_ms`) for `lease`, or with `lease`
    /// `None` removes its record: for `status` only, nothing decides by it, so a failure
    /// is only logged (a record left behind lives [`WAITER_LEASE`]).
    async fn note_waiter(&self, request: &LockRequest, since_ms: u64, lease: Option<Duration>) {
        if let Err(err) = self.try_note_waiter(request, since_ms, lease).await {
            tracing::debug!(error = %err, lock = %request.name, "cannot record a waiter for status");
        }
    }

    async fn try_note_waiter(
        &self,
        request: &LockRequest,
        since_ms: u64,
        lease: Option<Duration>,
    ) -> Result<()> {
        let [waiting, info] = layout::waiting_keys(&request.name);
        let (record, lease_ms) = match lease {
            Some(lease) => (
                RequestRecord::of(request).waiter_json(since_ms, lease, request.fair)?,
                lease.as_millis() as u64,
            ),
            None => (String::new(), 0),
        };
        let mut note =
            Call::with_keys(&crate::scripts::SCRIPTS.redlock_waiting, &[&waiting, &info]);
        note.arg(&request.token).arg(lease_ms).arg(record);
        let conn = self.redis.conn_for(&request.name);
        let _: u64 = self.redis.invoke_on(conn, "acquire", &note).await?;
        Ok(())
    }

    /// Makes a waiting request listen on its lock's channel (a fair one on its own
    /// channel, after which its tries queue: a release that finds nobody listening for a
    /// distlock waiter at the head takes it for gone); whether it should try again now
    /// (it started to listen, or to queue).
    async fn listen(&self, ticket: &mut Ticket) -> bool {
        let fair = ticket.request.fair;
        let waiting = ticket.state_or_default::<Waiting>();
        if waiting.watch.is_some() {
            return false;
        }
        // Queued without a subscription (it cannot be made), a waiter is taken for gone at
        // each release and queues again at its next poll: it keeps its exclusion, not its
        // place.
        let queues_now = fair && !std::mem::replace(&mut waiting.queues, fair);
        self.redis.wakers().register(ticket);
        let request = &ticket.request;
        // A release of shared holds wakes every waiter of this client that might share what
        // it freed; a mutex's wakes one.
        let (channel, wakes) = match (request.kind, request.fair) {
            (LockKind::Read | LockKind::Write, _) => {
                (layout::rw_channel(&request.name), Wakes::All)
            }
            (LockKind::Semaphore { .. }, _) => {
                (layout::semaphore_channel(&request.name), Wakes::All)
            }
            (_, true) => (
                layout::waiter_channel(&request.name, &layout::field(&self.uuid, &request.token)),
                Wakes::Longest,
            ),
            (_, false) => (layout::channel(&request.name), Wakes::Longest),
        };
        let watched = self
            .channels()
            .watch(channel, wakes, &ticket.request.token)
            .await;
        match watched {
            Ok(watch) => {
                ticket.state_or_default::<Waiting>().watch = Some(watch);
                true
            }
            Err(why) => {
                // Without the message, the lease left bounds the wait.
                tracing::debug!(?why, "cannot listen on a Redisson lock's channel; polling");
                queues_now
            }
        }
    }

    /// Runs a renewal script of this layout on lock `name`'s server: it answers 1 when
    /// renewed, 0 when the holder holds nothing.
    async fn run_renewal(&self, name: &str, renew: &Call<'_>) -> Result<LeaseOutcome> {
        let conn = self.redis.conn_for(name);
        let renewed: i64 = self.redis.invoke_on(conn, "renew", renew).await?;
        Ok(match renewed {
            1 => LeaseOutcome::Done,
            _ => LeaseOutcome::NotHeld,
        })
    }

    /// Runs an unlock script of this layout on lock `name`'s server: it answers -1 when
    /// the holder held nothing, else what is left of the lock (let go, or held by others).
    async fn run_release(&self, name: &str, release: &Call<'_>) -> Result<LeaseOutcome> {
        let conn = self.redis.conn_for(name);
        let released: i64 = self.redis.invoke_on(conn, "release", release).await?;
        Ok(match released {
            -1 => LeaseOutcome::NotHeld,
            _ => LeaseOutcome::Done,
        })
    }

    /// Renews one grant.
    async fn renew_one(&self, grant: &Grant, ttl: Duration) -> Result<LeaseOutcome> {
        match grant.kind {
            LockKind::Read | LockKind::Write => return self.renew_rw(grant, ttl).await,
            LockKind::Semaphore { .. } => return self.renew_semaphore(grant, ttl).await,
            _ => {}
        }
        let mut renew = Call::with_keys(&SCRIPTS.renew, &[&grant.name]);
        renew
            .arg(layout::field(&self.uuid, &grant.token))
            .arg(ttl.as_millis() as u64);
        self.run_renewal(&grant.name, &renew).await
    }
}

#[async_trait]
impl Backend for RedissonBackend {
    fn scheme(&self) -> &'static str {
        "redis"
    }

    /// The lock's key (a hash, or a semaphore's number), under its own name.
    fn place_of(&self, name: &str) -> Option<String> {
        Some(format!("redis key {name} (Redisson's layout)"))
    }

    fn why_unsupported(&self, kind: LockKind) -> Option<String> {
        matches!(kind, LockKind::Semaphore { .. }).then(|| semaphore::WHY_UNLEASED.to_owned())
    }

    fn capabilities(&self) -> Capabilities {
        let mut caps = Capabilities::lease();
        caps.fair = true;
        caps.rwlock = true;
        caps.semaphore = self.unleased_semaphores;
        caps.fencing = true;
        // Redisson's counter of grants never expires.
        caps.durable_fencing = true;
        caps.push_wakeups = true;
        // A plain waiter keeps no place (that lock has no queue), a fair one keeps its
        // place by its polls; the record of either for `status` is kept by its polls.
        caps.waiter_refresh = Some(WAITER_REFRESH);
        caps
    }

    /// Tries once; a waiting request that found the lock taken listens on its channel and
    /// tries again (a release between the two is heard or found), then waits for a
    /// message or the lease left.
    async fn poll(&self, ticket: &mut Ticket) -> Result<PollOutcome> {
        self.check_request(&ticket.request)?;
        let mut tried = self.try_acquire(ticket).await?;
        if matches!(tried, Tried::Busy(_)) && ticket.request.wait && self.listen(ticket).await {
            tried = self.try_acquire(ticket).await?;
        }
        match tried {
            Tried::Granted(token) => {
                // The grant dropped the waiter's record.
                self.stop_listening(ticket);
                Ok(PollOutcome::granted(token))
            }
            Tried::Busy(left) => {
                let wait = ticket.request.wait;
                let waiting = ticket.state_or_default::<Waiting>();
                if wait && waiting.noted.is_none_or(|at| at.elapsed() >= NOTE_AGAIN) {
                    let since_ms = *waiting.since_ms.get_or_insert_with(now_ms);
                    waiting.noted = Some(std::time::Instant::now());
                    self.note_waiter(&ticket.request, since_ms, Some(WAITER_LEASE))
                        .await;
                }
                let left = left.unwrap_or(NO_TTL_RECHECK).min(WAITER_REFRESH);
                Ok(PollOutcome::pending(Some(left)))
            }
        }
    }

    async fn wait_for_change(&self, ticket: &mut Ticket, backstop: Option<Duration>) -> Result<()> {
        self.redis.wakers().wait(ticket, backstop).await;
        Ok(())
    }

    /// A waiter stops listening and leaves a fair lock's queue. A try sent without an
    /// answer (its poll dropped, or its connection lost) may have been granted: that
    /// grant is released.
    async fn cancel(&self, ticket: &mut Ticket) -> Result<()> {
        if ticket.state::<Waiting>().is_some_and(|w| w.queued) {
            self.leave_queue(&ticket.request).await?;
            ticket.state_or_default::<Waiting>().queued = false;
        }
        if ticket.request.kind == LockKind::Write && ticket.request.wait {
            self.forget_writer(&ticket.request).await;
        }
        self.stop_waiting(ticket).await;
        if !ticket.state::<Waiting>().is_some_and(|w| w.unanswered) {
            return Ok(());
        }
        let request = &ticket.request;
        let grant = Grant::new(&request.name, &request.token, request.kind);
        self.release(&grant).await?;
        ticket.state_or_default::<Waiting>().unanswered = false;
        Ok(())
    }

    async fn renew_many(&self, grants: &[Grant], ttl: Duration) -> Result<Vec<LeaseOutcome>> {
        let renewals = grants.iter().map(|grant| self.renew_one(grant, ttl));
        futures_util::future::join_all(renewals)
            .await
            .into_iter()
            .collect()
    }

    /// Unlocks as Redisson does (the hash deleted, `0` published on the lock's channel),
    /// under a latch of its own so that an unlock asked again after a dropped connection
    /// answers as the first did (the latch expires a few seconds later).
    async fn release(&self, grant: &Grant) -> Result<LeaseOutcome> {
        match grant.kind {
            LockKind::Read | LockKind::Write => return self.release_rw(grant).await,
            LockKind::Semaphore { .. } => return self.release_semaphore(grant).await,
            _ => {}
        }
        let channel = layout::channel(&grant.name);
        let latch = layout::unlock_latch(&grant.name, &format!("{}{}", random_id(), random_id()));
        let [queue, deadlines, heard] = layout::queue_keys(&grant.name);
        let keys = [
            grant.name.as_str(),
            &channel,
            &latch,
            &queue,
            &deadlines,
            &heard,
        ];
        let mut release = Call::with_keys(self.script(&SCRIPTS.release), &keys);
        release
            .arg(layout::field(&self.uuid, &grant.token))
            .arg(LATCH_KEEP.as_millis() as u64)
            .arg(self.lease.as_millis() as u64);
        fair::liveness_args(&mut release);
        self.run_release(&grant.name, &release).await
    }

    async fn inspect(&self, name: Option<&str>) -> Result<Vec<LockState>> {
        match name {
            Some(name) => {
                self.check_name(name)?;
                Ok(vec![self.state_of(name).await?])
            }
            None => self.all_states().await,
        }
    }

    fn floor(&self) -> Option<&dyn Floor> {
        self.redis.floor()
    }
}

/// Why a read hold is not leased past `lease`, the Java clients' watchdog timeout.
fn read_lease_too_long(lease: Duration) -> Error {
    Error::new(
        ErrorKind::Unsupported,
        format!(
            "a read hold in Redisson's layout is leased at most the Java clients' watchdog timeout (lease={}): their renewal sets the lock's TTL to it, which would end the lock before a longer lease",
            humantime::format_duration(lease)
        ),
    )
}

/// The error of a try that found a key of another type under the lock's name.
fn not_a_lock_hash(name: &str) -> Error {
    Error::new(
        ErrorKind::Backend,
        format!(
            "the key `{name}` is not a Redisson lock hash: a client of another layout uses this name"
        ),
    )
    .with_backend("redis")
    .with_operation("acquire")
}

/// The backend a `redis://` URL's layout asks for.
pub(crate) async fn open(config: RedisConfig) -> Result<Arc<dyn Backend>> {
    Ok(match &config.layout {
        Layout::Distlock => Arc::new(RedisBackend::open(config).await?),
        Layout::Redisson { .. } => Arc::new(RedissonBackend::open(config).await?),
    })
}
