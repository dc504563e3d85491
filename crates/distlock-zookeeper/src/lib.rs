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
//! # Fencing
//!
//! A grant's fencing token is a ZooKeeper transaction id (zxid): unique, increasing across
//! the ensemble (a new leader's epoch makes it larger still), and durable. It is taken at
//! grant, not at create: a poll that may grant (its wait ended because the node ahead went)
//! writes its node again right behind the listing that decides, and the token is that
//! write's zxid — above every token granted before, which was written before the listing,
//! so tokens strictly increase in grant order for every kind, readers granted together
//! included (a node's `czxid` would not: two readers waiting on one writer are granted at
//! once, and the younger may be seen first). One exception costs nothing: an exclusive
//! request granted on the listing sent with its create, with nothing joined or left the
//! queue since (`pzxid == czxid`), keeps its create's zxid — every earlier grant left
//! before it, with a token below its deletion. A waiter's watch on the node ahead ignores
//! these writes. A semaphore stamps its last lease. `status` shows each holder's node's
//! last write (`mzxid`), the same number.

mod backend;
mod config;
mod error;
mod inspect;
mod names;
mod nodes;
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
