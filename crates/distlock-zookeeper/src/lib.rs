//! The ZooKeeper backend for distlock: `zk://h1:2181,h2:2181,h3:2181/base?session_timeout=10s`,
//! or `zks://…?tls_ca=ca.pem` over TLS.
//!
//! # Layout: Curator's
//!
//! A lock named `orders/42` is the node `<base>/orders/42` (names ZooKeeper cannot store as
//! a path are escaped, see below). Each request creates an ephemeral sequential child of it,
//! named as Apache Curator names its own, so Curator and distlock exclude each other on the
//! same path:
//!
//! * a mutex: `_c_<uuid>-lock-<seq>` (Curator's `InterProcessMutex`);
//! * a read-write lock: `_c_<uuid>-__READ__<seq>` and `_c_<uuid>-__WRIT__<seq>` (Curator's
//!   `InterProcessReadWriteLock`);
//! * a semaphore of N permits (Curator's `InterProcessSemaphoreV2`): a queue of
//!   `locks/_c_<uuid>-lock-<seq>` contenders; at its head a request creates one
//!   `leases/_c_<uuid>-lease-<seq>` node per permit and is granted once the leases number no
//!   more than N. The names `locks` and `leases` under a semaphore's node are its own.
//!
//! kazoo's contenders (`<uuid>__lock__<seq>`, `<uuid>__rlock__<seq>`) count as contenders
//! too, so a kazoo `Lock` on the same path (with `extra_lock_patterns` for Curator's names,
//! on its side) shares the lock. The node's data is the holder's record (owner, host,
//! process) as JSON, which `distlock status` shows; other clients' nodes show as foreign.
//!
//! Contenders queue in the order of their sequence numbers. A writer or mutex goes when it
//! is first; a reader when no writer is ahead of it. Every grant is in arrival order (`fair`
//! is implied). A waiter watches only the node whose deletion can let it go — the one just
//! ahead of a writer, the nearest writer ahead of a reader — so a release wakes one waiter
//! (or the readers behind one writer), never the whole queue, and nothing polls.
//!
//! The unique `_c_<uuid>-` prefix is Curator's protected create: when the answer to a create
//! is lost, the client finds its node by the prefix (checking that its session owns it)
//! instead of creating a second one that would hold the lock for nobody; a request dropped
//! at any point deletes its node, found the same way.
//!
//! # Names
//!
//! A lock name that is a valid ZooKeeper path relative to the base (no empty, `.` or `..`
//! segment, no character ZooKeeper refuses) and has no `%` is used verbatim, so it matches a
//! Curator path. Any other name is the single node `%` + its percent-encoded bytes (all but
//! ASCII letters, digits and `-._~`), e.g. `a//b` is `<base>/%a%2F%2Fb`. So is a name one of
//! whose segments after the first a lock's node holds itself — `locks`, `leases`, or a
//! contender's name such as `lock-0000000001` — so that `jobs/locks` is a lock of its own,
//! `<base>/%jobs%2Flocks`, not a semaphore's queue inside lock `jobs`.
//!
//! # Sessions and what `Lost` means
//!
//! Grants live as long as the client's ZooKeeper session; nothing per lock is renewed. The
//! client sends a heartbeat every quarter of the session timeout; a session is reported
//! valid until the start of the last answered request plus the negotiated timeout (less
//! 1 % drift and 2 ms), which is the earliest moment the server could expire it. When the
//! connection drops, every guard of the client turns `AtRisk` at once; it is `Held` again if
//! the client reconnects in time, and `Lost` at that deadline if not — before the server can
//! have handed the lock to anyone else. When the server expires the session, every guard
//! turns `Lost` at once and a new session serves later requests; a waiter whose node went
//! with the old session queues again in the new one.
//!
//! A node deleted by someone else (an operator, a forced release) loses its grant alone:
//! each grant watches its own node from 100 ms after the grant, and a mutex or writer whose
//! token is not its node's creation writes its record 10 ms after the grant, which finds
//! the node gone sooner. Until then the holder still believes it holds, beside the next
//! holder, whose token is greater: a fenced resource refuses the old holder's writes once
//! it has seen the new one's. One case more comes with an ensemble: a member that has not
//! yet applied such a deletion of a *waiter's* node may grant that waiter after the next
//! holder was granted elsewhere. Its token is below the next holder's (its grant was
//! decided on the older state), and the two hold together until its record's write, which
//! the leader answers, finds the node gone: 10 ms and a write's round trip after the grant;
//! a hold shorter than that learns it at its release, which answers `NotHeld`.
//!
//! # Fencing
//!
//! A grant's fencing token is a ZooKeeper transaction id (zxid): unique, increasing across
//! the ensemble (a new leader's epoch makes it larger still), and durable. Tokens strictly
//! increase in grant order for every kind — the order in which the grants were decided,
//! which is also the order their holders learn of them but for the lagging member's case
//! above:
//!
//! * A mutex or writer is granted on a listing of its queue that shows it first. Its token
//!   is that listing's `pzxid`, the transaction that last changed the queue. Every earlier
//!   holder's node was deleted before the listing, by a transaction no later than the
//!   `pzxid` and later than that holder's token; every later holder is granted only after
//!   this one's node is deleted, later still. So no write stands between the end of a wait
//!   and the grant: one read. When the token is not the node's creation (`czxid`), the
//!   holder writes it into its node's record once the grant has lasted 10 ms, for
//!   `status` (written at once, it would delay the release of a short hold, which comes
//!   after it in the session).
//! * A reader's token is a write to its own node (a stamp) made after the listing that
//!   grants it — in the same round trip, when its wait has just ended — so it is above
//!   every token granted before that listing, and readers granted together each get one of
//!   their own (they would share a listing's `pzxid`; and their nodes' `czxid`s would not
//!   follow grant order, as the younger of two readers freed by one writer may be granted
//!   first).
//! * A semaphore's request stamps its last lease the same way.
//!
//! A waiter watches the node ahead for its deletion alone (a watch on its children, which
//! an ephemeral node cannot have), so these writes wake no one (a node it may not read,
//! made with its creator's ACL, is watched with `exists`, and its writes only set the watch
//! again). `status` shows each holder's token: the one in its node's record, else its
//! node's last write (`mzxid`). Until a mutex's or writer's record with its token arrives
//! (10 ms and a write's round trip after the grant), another client's `status` shows the
//! node's creation there, below the token; the holder's own client shows the token.
//!
//! The `pzxid` a listing answers must not go back: ZooKeeper before 3.6 could set it back
//! when it replayed its log at a restart (ZOOKEEPER-3145, ZOOKEEPER-3249). Use 3.6 or
//! later (Debian's is 3.8).

mod backend;
mod config;
mod error;
mod inspect;
mod names;
mod nodes;
mod queue;
mod record;
mod request;
mod runtime;
mod semaphore;
mod session;

use std::sync::Arc;

use distlock_core::backend::{Backend, Connector, async_trait};
use distlock_core::{Result, Url};

pub use backend::ZkBackend;
pub use config::{DEFAULT_BASE, DEFAULT_SESSION_TIMEOUT, ZkConfig};

/// Checks that lock `name` (a valid one) has a ZooKeeper node of its own, for the fuzz
/// target `name` in `fuzz/`: built only by `cargo fuzz`.
#[cfg(fuzzing)]
pub fn fuzz_name(name: &str) {
    names::check_name(name);
}

/// Registers the `zk://` and `zks://` connector with the core's URL registry.
///
/// # Examples
///
/// ```
/// distlock_zookeeper::install();
/// ```
pub fn install() {
    distlock_core::backend::register(Arc::new(ZkConnector));
}

/// Connects `zk://` URLs.
#[derive(Debug)]
struct ZkConnector;

#[async_trait]
impl Connector for ZkConnector {
    fn schemes(&self) -> &'static [&'static str] {
        &["zk", "zks"]
    }

    async fn connect(&self, url: &Url) -> Result<Arc<dyn Backend>> {
        Ok(Arc::new(ZkBackend::open(ZkConfig::from_url(url)?).await?))
    }
}
