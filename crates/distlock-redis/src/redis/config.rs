//! `redis://` URLs: the server, and distlock's own options.

use distlock_core::backend::{UrlParams, fence_ttl};
use distlock_core::{Error, ErrorKind, Result, Url, redact_url};

/// Multiplexed command connections to a single server unless `?connections=` says
/// otherwise. Two let the server read one connection's commands while the client writes
/// the other's: on a two-core machine, 64 tasks over distinct names ran about a third more
/// cycles per second than over one (75,000 against 55,000, measured side by side).
///
/// # Examples
///
/// ```
/// let url = distlock_core::Url::parse("redis://127.0.0.1:6379/0").unwrap();
/// let config = distlock_redis::RedisConfig::from_url(&url)?;
/// assert_eq!(config.connections, distlock_redis::DEFAULT_CONNECTIONS);
/// # Ok::<(), distlock_core::Error>(())
/// ```
pub const DEFAULT_CONNECTIONS: usize = 2;
/// The most command connections one client may open (`?connections=`).
///
/// # Examples
///
/// ```
/// use distlock_redis::{MAX_CONNECTIONS, RedisConfig};
/// let parse = |n: &str| {
///     let url = format!("redis://127.0.0.1:6379/0?connections={n}");
///     RedisConfig::from_url(&distlock_core::Url::parse(&url).unwrap())
/// };
/// assert_eq!(parse("1")?.connections, 1);
/// assert!(parse(&(MAX_CONNECTIONS + 1).to_string()).is_err());
/// assert!(parse("0").is_err());
/// assert!(parse("two").is_err());
/// # Ok::<(), distlock_core::Error>(())
/// ```
pub const MAX_CONNECTIONS: usize = 16;

/// The query parameters a `redis://` URL may carry; any other is refused, so a typo
/// (`min_replica=1`) is not silently dropped.
const KNOWN_PARAMETERS: &str = "prefix, connections, connect_timeout, min_replicas, replica_timeout, fence_ttl, handoff_claim, first_try, tls_ca (rediss://), hosts (redis+cluster://), protocol, layout, uuid, fencing, fair_wait_timeout, lease, semaphore and pubsub (layout=redisson)";

/// How long a connection to a server may take to open, unless `connect_timeout` says.
pub const DEFAULT_CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(1);

/// How long a lock handed straight on to its next waiter by a release stays granted
/// before the waiter confirms it (`handoff_claim`): a waiter that stopped (paused, or its
/// messages held up) keeps it no longer.
///
/// # Examples
///
/// ```
/// assert_eq!(distlock_redis::DEFAULT_HANDOFF_CLAIM.as_millis(), 100);
/// ```
pub const DEFAULT_HANDOFF_CLAIM: std::time::Duration = std::time::Duration::from_millis(100);

/// The shortest `handoff_claim` taken but zero (none): a waiter confirms a grant within a
/// quarter of it, and trusts one that comes with half of it left.
const MIN_HANDOFF_CLAIM: std::time::Duration = std::time::Duration::from_millis(10);
/// The longest `handoff_claim` taken.
const MAX_HANDOFF_CLAIM: std::time::Duration = std::time::Duration::from_secs(10);

/// The longest `connect_timeout` taken.
const MAX_CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// How to reach Redis and lay out keys, parsed from `redis://[user:password@]host:port/db`
/// (or `rediss://` for TLS; `redis+cluster://h1:7000,h2:7001,…` or `rediss+cluster://` for
/// a Redis Cluster, learnt from any of the nodes listed) with distlock's options in the
/// query: `prefix` (put before every
/// lock key; default none); `connections` (how many multiplexed connections carry a single
/// server's commands, 1 to 16, default [`DEFAULT_CONNECTIONS`]; every operation on one lock
/// goes through the same one, so they reach the server in the order they were made);
/// `connect_timeout` (how long opening a connection to a server may take, default
/// [`DEFAULT_CONNECT_TIMEOUT`], at most a minute: raise it for a server far away or behind
/// a slow TLS handshake); `min_replicas` and `replica_timeout` (hand out a grant only once
/// that many replicas have it, waiting at most that long; default none and 1 s); and, for
/// TLS, `tls_ca` (a PEM file of the certificate authority to trust instead of the
/// system's); `fence_ttl` (how long a lock's fencing counter is kept after it was seeded,
/// default a day); `handoff_claim` (how long a lock a release handed straight to the
/// next waiter stays granted unconfirmed, default [`DEFAULT_HANDOFF_CLAIM`], `0s` for no
/// hand-offs); `first_try` (`script`, the default, or `commands`: see
/// [`first_try_commands`](Self::first_try_commands)). Other query parameters go to the
/// Redis client.
///
/// # Examples
///
/// ```
/// use distlock_redis::RedisConfig;
/// let url = distlock_core::Url::parse("redis://:secret@127.0.0.1:6379/2?prefix=locks:").unwrap();
/// let config = RedisConfig::from_url(&url)?;
/// assert_eq!(config.prefix, "locks:");
/// assert!(!format!("{config:?}").contains("secret"));
/// assert_eq!(config.fence_ttl, distlock_redis::DEFAULT_FENCE_TTL);
/// assert_eq!(config.connect_timeout, distlock_redis::DEFAULT_CONNECT_TIMEOUT);
/// let url = distlock_core::Url::parse("redis://127.0.0.1:6379/0?connect_timeout=5s").unwrap();
/// assert_eq!(RedisConfig::from_url(&url)?.connect_timeout.as_secs(), 5);
/// let url = distlock_core::Url::parse("redis://127.0.0.1:6379/0?connect_timeout=0s").unwrap();
/// assert!(RedisConfig::from_url(&url).is_err());
/// let url = distlock_core::Url::parse("redis://127.0.0.1:6379/0?fence_ttl=1h").unwrap();
/// assert_eq!(RedisConfig::from_url(&url)?.fence_ttl.as_secs(), 3600);
/// let url = distlock_core::Url::parse("redis://127.0.0.1:6379/0?fence_ttl=10ms").unwrap();
/// assert!(RedisConfig::from_url(&url).is_err());
/// let url = distlock_core::Url::parse("redis://127.0.0.1:6379/0?handoff_claim=0s").unwrap();
/// assert!(RedisConfig::from_url(&url)?.handoff_claim.is_zero());
/// let url = distlock_core::Url::parse("redis://127.0.0.1:6379/0?first_try=commands").unwrap();
/// assert!(RedisConfig::from_url(&url)?.first_try_commands);
/// # Ok::<(), distlock_core::Error>(())
/// ```
#[derive(Clone)]
pub struct RedisConfig {
    /// The URL for the Redis client, without distlock's options.
    pub(crate) server: Url,
    /// Put before every lock's name to make its key.
    pub prefix: String,
    /// The certificate authority to trust for TLS, instead of the system's.
    pub tls_ca: Option<std::path::PathBuf>,
    /// How many replicas must have a grant before it is handed out (`min_replicas`;
    /// 0, the default, waits for none).
    pub min_replicas: u32,
    /// How long to wait for them (`replica_timeout`; default 1 s).
    pub replica_timeout: std::time::Duration,
    /// How many multiplexed connections carry the commands to a single server
    /// (`connections`). A cluster uses the cluster client's connections instead.
    pub connections: usize,
    /// How long opening a connection to a server may take (`connect_timeout`).
    pub connect_timeout: std::time::Duration,
    /// How long a lock's fencing counter lives after it was seeded (`fence_ttl`, default a
    /// day): a name locked once does not keep a key for ever. The next grant after seeds
    /// the counter again from the server's clock in microseconds, above every token it
    /// handed out before, as after a restart that lost it.
    pub fence_ttl: std::time::Duration,
    /// How long a lock a release handed straight on to this client's waiter stays
    /// granted before the waiter confirms it with its first renewal (`handoff_claim`,
    /// default [`DEFAULT_HANDOFF_CLAIM`]; zero: this client's waiters take no hand-offs,
    /// and wait to be woken and try, as they do on a cluster, and where grants wait for
    /// replicas).
    pub handoff_claim: std::time::Duration,
    /// Whether an exclusive request nobody queued tries first with four plain commands
    /// instead of a script (`first_try=commands`; default `script`). The server does about
    /// half the work for such a grant (a cycle costs it 1.4× the minimal lock's instead of
    /// 2.35×), but the grant's holder record lacks its fencing token until the first
    /// renewal or note: until then `status` shows the holder with token 0, breaking it by
    /// its token needs token 0, and a hand-off of it is adopted by its request token alone.
    pub first_try_commands: bool,
    /// The nodes to learn a Redis Cluster's layout from, for `redis+cluster://` (empty for
    /// a single server; a single server that says it is in a cluster is used as one).
    pub(crate) cluster_seeds: Vec<Url>,
    /// Whose key layout locks use (`layout`): distlock's own, or Redisson's.
    pub layout: Layout,
}

/// The key layout of a `redis://` URL's locks (`?layout=`).
///
/// # Examples
///
/// ```
/// use distlock_redis::{Layout, RedisConfig};
/// let url = distlock_core::Url::parse("redis://127.0.0.1:6379/0?layout=redisson&uuid=billing-7").unwrap();
/// let config = RedisConfig::from_url(&url)?;
/// let Layout::Redisson { uuid, fair_wait_timeout, lease, unleased_semaphores, .. } =
///     &config.layout
/// else {
///     unreachable!()
/// };
/// assert_eq!(uuid, "billing-7");
/// assert_eq!(*fair_wait_timeout, std::time::Duration::from_secs(300), "Redisson's default");
/// assert_eq!(*lease, std::time::Duration::from_secs(30), "Redisson's lockWatchdogTimeout");
/// assert!(!unleased_semaphores, "semaphores are asked for with semaphore=redisson");
/// let url = distlock_core::Url::parse("redis://127.0.0.1:6379/0").unwrap();
/// assert_eq!(RedisConfig::from_url(&url)?.layout, Layout::Distlock);
/// # Ok::<(), distlock_core::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Layout {
    /// distlock's own: a queue, records of holders and waiters, a fencing counter.
    Distlock,
    /// Redisson's fenced lock (`layout=redisson`): the lock is a hash of its holder's
    /// `<uuid>:<thread id>` and hold count, its tokens counted in
    /// `redisson_lock_token:{name}`, its releases published on
    /// `redisson_lock__channel:{name}`; Java services on `RLock`/`RFencedLock` share it.
    Redisson {
        /// This client's id in holders' fields (`uuid`; by default a random UUID, one per
        /// process), so an operator can tell a Rust holder in Redis.
        uuid: String,
        /// How long a fair lock's waiter at the head of the queue may take to claim its
        /// turn (`fair_wait_timeout`): Redisson's `fairLockWaitTimeout`, 5 minutes by
        /// default. It must be the Java clients' own: each grant moves the deadlines of the
        /// waiters behind by it.
        fair_wait_timeout: std::time::Duration,
        /// The Java clients' `lockWatchdogTimeout` (`lease`, 30 s by default): the lease a
        /// hold left after an unlock gets, as Java's does, and the longest lease a read hold
        /// may take (Java's renewal of its read holds sets the lock's TTL to it).
        lease: std::time::Duration,
        /// Whether semaphores take Redisson's semaphore as it is (`semaphore=redisson`):
        /// a number of permits available with no record of who holds them, so a holder
        /// that crashes loses its permits for good, where distlock's own semaphores lease
        /// them. Without it, semaphores are refused.
        unleased_semaphores: bool,
        /// How the Java clients publish releases (`pubsub`, their
        /// `shardedSubscriptionMode`).
        pubsub: PubSub,
    },
}

/// How Redisson's clients publish a lock's releases and listen for them (`pubsub=`, the
/// Java clients' `shardedSubscriptionMode`): on a Redis Cluster, Redisson's default
/// (`auto`) uses sharded pub/sub (`SPUBLISH`) where the servers have it; on one server,
/// plain pub/sub always.
///
/// # Examples
///
/// ```
/// use distlock_redis::{Layout, PubSub, RedisConfig};
/// let url = distlock_core::Url::parse("redis://127.0.0.1:6379/0?layout=redisson&pubsub=plain").unwrap();
/// let Layout::Redisson { pubsub, .. } = RedisConfig::from_url(&url)?.layout else { unreachable!() };
/// assert_eq!(pubsub, PubSub::Plain);
/// # Ok::<(), distlock_core::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum PubSub {
    /// Redisson's default: sharded on a cluster whose servers have it, plain elsewhere.
    Auto,
    /// `PUBLISH`/`SUBSCRIBE` (Java's `shardedSubscriptionMode` `OFF`).
    Plain,
    /// `SPUBLISH`/`SSUBSCRIBE` (Java's `ON`).
    Sharded,
}

impl std::fmt::Debug for RedisConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisConfig")
            .field("server", &redact_url(self.server.as_str()))
            .field("prefix", &self.prefix)
            .field("tls_ca", &self.tls_ca)
            .field("min_replicas", &self.min_replicas)
            .field("replica_timeout", &self.replica_timeout)
            .field("connections", &self.connections)
            .field("connect_timeout", &self.connect_timeout)
            .field("fence_ttl", &self.fence_ttl)
            .field("handoff_claim", &self.handoff_claim)
            .field("cluster_nodes", &self.cluster_seeds.len())
            .field("layout", &self.layout)
            .finish()
    }
}

impl RedisConfig {
    /// Parses a `redis://` URL.
    ///
    /// # Examples
    ///
    /// ```
    /// let url = distlock_core::Url::parse("redis://127.0.0.1/0?prefix={bad").unwrap();
    /// assert!(distlock_redis::RedisConfig::from_url(&url).is_err());
    /// let typo = distlock_core::Url::parse("redis://:pw@127.0.0.1/0?min_replica=1").unwrap();
    /// let err = distlock_redis::RedisConfig::from_url(&typo).unwrap_err();
    /// assert!(err.to_string().contains("unknown parameter `min_replica`"), "{err}");
    /// assert!(err.to_string().contains("min_replicas"), "{err}");
    /// ```
    pub fn from_url(url: &Url) -> Result<Self> {
        if url.host_str().is_none_or(str::is_empty) {
            return Err(Error::invalid(format!(
                "a redis URL needs a host, e.g. redis://127.0.0.1:6379/0, not `{}`",
                redact_url(url.as_str())
            )));
        }
        let (cluster, scheme) = match url.scheme() {
            "redis+cluster" => (true, "redis"),
            "rediss+cluster" => (true, "rediss"),
            other => (false, other),
        };
        let mut server = url.clone();
        server
            .set_scheme(scheme)
            .map_err(|()| Error::invalid(format!("cannot use scheme `{scheme}`")))?;
        let mut params = UrlParams::of(url)?;
        let prefix = params.text("prefix").unwrap_or_default();
        let connections = params
            .number("connections", 1..=MAX_CONNECTIONS)?
            .unwrap_or(DEFAULT_CONNECTIONS);
        let fence_ttl_given = url.query_pairs().any(|(key, _)| key == "fence_ttl");
        let fence_ttl = fence_ttl(&mut params)?;
        let connect_timeout = match params.text("connect_timeout") {
            None => DEFAULT_CONNECT_TIMEOUT,
            Some(value) => humantime::parse_duration(&value)
                .ok()
                .filter(|t| !t.is_zero() && *t <= MAX_CONNECT_TIMEOUT)
                .ok_or_else(|| {
                    Error::invalid(format!(
                        "connect_timeout `{value}` is not a duration above zero and at most a minute, e.g. 3s"
                    ))
                })?,
        };
        let handoff_claim = match params.text("handoff_claim") {
            None => DEFAULT_HANDOFF_CLAIM,
            Some(value) => {
                let claim = distlock_core::backend::duration_within(
                    "handoff_claim",
                    &value,
                    std::time::Duration::ZERO..=MAX_HANDOFF_CLAIM,
                )?;
                if !claim.is_zero() && claim < MIN_HANDOFF_CLAIM {
                    return Err(Error::invalid(format!(
                        "handoff_claim `{value}` leaves a waiter no time to confirm a lock handed to it: give 0s (no hand-offs) or at least {MIN_HANDOFF_CLAIM:?}"
                    )));
                }
                claim
            }
        };
        let first_try_commands = match params.text("first_try").as_deref() {
            None | Some("script") => false,
            Some("commands") => true,
            Some(other) => {
                return Err(Error::invalid(format!(
                    "first_try `{other}` is neither `script` nor `commands`"
                )));
            }
        };
        let hosts = params.text("hosts");
        if hosts.is_some() && !cluster {
            return Err(Error::invalid(
                "a list of hosts is for redis+cluster:// (a cluster) or redlock:// (independent masters)",
            ));
        }
        let min_replicas = match params.text("min_replicas") {
            None => 0,
            Some(_) if cluster => {
                return Err(Error::invalid(
                    "min_replicas is for one primary with replicas, not for a cluster",
                ));
            }
            Some(value) => value.parse().map_err(|_| {
                Error::invalid(format!("min_replicas `{value}` is not a whole number"))
            })?,
        };
        let replica_timeout = match params.text("replica_timeout") {
            None => std::time::Duration::from_secs(1),
            Some(value) => humantime::parse_duration(&value)
                .ok()
                .filter(|t| !t.is_zero())
                .ok_or_else(|| {
                    Error::invalid(format!(
                        "replica_timeout `{value}` is not a duration above zero, e.g. 500ms"
                    ))
                })?,
        };
        let tls_ca = match params.text("tls_ca") {
            Some(_) if url.scheme() != "rediss" => {
                return Err(Error::invalid(
                    "tls_ca is for TLS connections: use a rediss:// URL",
                ));
            }
            ca => ca.map(Into::into),
        };
        let layout = layout(&mut params, &prefix, min_replicas)?;
        if first_try_commands && matches!(layout, Layout::Redisson { .. }) {
            return Err(Error::new(
                ErrorKind::Unsupported,
                "layout=redisson takes no first_try: its locks are Redisson's scripts",
            ));
        }
        if fence_ttl_given && matches!(layout, Layout::Redisson { .. }) {
            return Err(Error::new(
                ErrorKind::Unsupported,
                "layout=redisson takes no fence_ttl: Redisson's fenced-lock counter lives for good, as the Java clients keep it",
            ));
        }
        // The Redis client's own parameter (RESP2 or RESP3).
        let passed: Vec<(&str, String)> = params
            .text("protocol")
            .map(|protocol| ("protocol", protocol))
            .into_iter()
            .collect();
        if let Some(other) = params.unknown() {
            return Err(Error::invalid(format!(
                "unknown parameter `{other}` in a redis URL; known: {KNOWN_PARAMETERS}"
            )));
        }
        check_prefix(&prefix)?;
        if passed.is_empty() {
            server.set_query(None);
        } else {
            server.query_pairs_mut().clear().extend_pairs(passed);
        }
        let cluster_seeds = match (cluster, hosts) {
            (false, _) => Vec::new(),
            (true, None) => vec![server.clone()],
            (true, Some(list)) => list
                .split(',')
                .map(|host| seed(&server, host))
                .collect::<Result<_>>()?,
        };
        Ok(RedisConfig {
            server,
            prefix,
            tls_ca,
            min_replicas,
            replica_timeout,
            connections,
            connect_timeout,
            fence_ttl,
            handoff_claim,
            first_try_commands,
            cluster_seeds,
            layout,
        })
    }
}

/// Redisson's default `fairLockWaitTimeout`.
const DEFAULT_FAIR_WAIT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(300);
/// The longest `fair_wait_timeout` and `lease` taken.
const MAX_REDISSON_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(86_400);
/// The shortest `lease` taken: a watchdog renews every third of it.
const MIN_WATCHDOG_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(1);
/// Redisson's default `lockWatchdogTimeout`.
const DEFAULT_WATCHDOG_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// The layout `layout`, `uuid`, `fencing`, `fair_wait_timeout` and `lease` ask for, where
/// the rest of the URL allows it.
fn layout(params: &mut UrlParams, prefix: &str, min_replicas: u32) -> Result<Layout> {
    let layout = params.text("layout");
    let (uuid, fencing) = (params.text("uuid"), params.text("fencing"));
    let fair_wait_timeout = params.text("fair_wait_timeout");
    let lease = params.text("lease");
    let semaphore = params.text("semaphore");
    let pubsub = params.text("pubsub");
    match layout.as_deref() {
        None | Some("distlock") => {
            let redissons = [
                &uuid,
                &fencing,
                &fair_wait_timeout,
                &lease,
                &semaphore,
                &pubsub,
            ];
            match redissons.iter().any(|option| option.is_some()) {
                true => Err(Error::invalid(
                    "uuid, fencing, fair_wait_timeout, lease, semaphore and pubsub are options of Redisson's layout: add layout=redisson",
                )),
                false => Ok(Layout::Distlock),
            }
        }
        Some("redisson") => {
            if let Some(other) = fencing.filter(|f| f != "redisson") {
                return Err(Error::new(
                    ErrorKind::Unsupported,
                    format!(
                        "fencing `{other}` is not offered in Redisson's layout: every guard carries a fencing token, and on Redisson's layout it comes from Redisson's fenced lock (fencing=redisson, the default; Redisson's plain RLock has none), so every Java client of a name must use RFencedLock for tokens to mean anything"
                    ),
                ));
            }
            if let Some(other) = semaphore.as_deref().filter(|s| *s != "redisson") {
                return Err(Error::invalid(format!(
                    "semaphore `{other}` is not offered in Redisson's layout: semaphore=redisson takes Redisson's semaphore as it is (its permits are not leased: a holder that crashes loses them for good)"
                )));
            }
            let refuse =
                |what: &str| Err(Error::invalid(format!("layout=redisson takes no {what}")));
            if !prefix.is_empty() {
                return refuse("prefix: a Redisson lock's key is its name");
            }
            if min_replicas > 0 {
                return refuse(
                    "min_replicas: Redisson's own clients do not wait for replicas on a single primary",
                );
            }
            let pubsub = match pubsub.as_deref() {
                None | Some("auto") => PubSub::Auto,
                Some("plain") => PubSub::Plain,
                Some("sharded") => PubSub::Sharded,
                Some(other) => {
                    return Err(Error::invalid(format!(
                        "pubsub `{other}` is not one Redisson has: auto (the default), plain or sharded, as the Java clients' shardedSubscriptionMode AUTO, OFF or ON"
                    )));
                }
            };
            let uuid = uuid.unwrap_or_else(crate::redisson::process_uuid);
            if !crate::redisson::valid_uuid(&uuid) {
                return Err(Error::invalid(format!(
                    "uuid `{}` cannot name a client in holders' fields: 1 to 64 letters, digits, `-`, `_` or `.`",
                    uuid.escape_debug()
                )));
            }
            let fair_wait_timeout = redisson_timeout(
                fair_wait_timeout,
                DEFAULT_FAIR_WAIT_TIMEOUT,
                "fair_wait_timeout",
                "5m (the Java clients' fairLockWaitTimeout)",
            )?;
            let lease = redisson_timeout(
                lease,
                DEFAULT_WATCHDOG_TIMEOUT,
                "lease",
                "30s (the Java clients' lockWatchdogTimeout)",
            )?;
            if lease < MIN_WATCHDOG_TIMEOUT {
                return Err(Error::invalid(format!(
                    "lease `{}` is below 1s: it is the Java clients' lockWatchdogTimeout, which their watchdog renews every third of",
                    humantime::format_duration(lease)
                )));
            }
            Ok(Layout::Redisson {
                uuid,
                fair_wait_timeout,
                lease,
                unleased_semaphores: semaphore.is_some(),
                pubsub,
            })
        }
        Some(other) => Err(Error::invalid(format!(
            "layout `{other}` is not one distlock speaks: distlock (the default) or redisson"
        ))),
    }
}

/// Option `option` of Redisson's layout (`value`, or `default` without one): a duration
/// above zero and at most a day, as `example` is.
fn redisson_timeout(
    value: Option<String>,
    default: std::time::Duration,
    option: &str,
    example: &str,
) -> Result<std::time::Duration> {
    let Some(value) = value else {
        return Ok(default);
    };
    humantime::parse_duration(&value)
        .ok()
        .filter(|t| !t.is_zero() && *t <= MAX_REDISSON_TIMEOUT)
        .ok_or_else(|| {
            Error::invalid(format!(
                "{option} `{value}` is not a duration above zero and at most a day, e.g. {example}"
            ))
        })
}

/// `server` with its host and port replaced by `host` (`name:port`).
pub(crate) fn seed(server: &Url, host: &str) -> Result<Url> {
    let bad = || Error::invalid(format!("bad cluster node `{host}`: expected host:port"));
    let (name, port) = host.rsplit_once(':').ok_or_else(bad)?;
    let mut seed = server.clone();
    seed.set_host(Some(name)).map_err(|_| bad())?;
    seed.set_port(Some(port.parse().map_err(|_| bad())?))
        .map_err(|()| bad())?;
    Ok(seed)
}

/// Refuses a key prefix with braces: they would split a lock's keys across cluster slots.
pub(crate) fn check_prefix(prefix: &str) -> Result<()> {
    match prefix.contains(['{', '}']) {
        true => Err(Error::invalid(
            "the redis key prefix may not contain `{` or `}`: they would split a lock's keys across cluster slots",
        )),
        false => Ok(()),
    }
}
