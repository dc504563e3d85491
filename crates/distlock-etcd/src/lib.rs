//! The etcd backend for distlock: `etcd://h1:2379,h2:2379,h3:2379/prefix?session_ttl=10s`,
//! or `etcds://…?tls_ca=ca.pem` over TLS.
//!
//! # Layout: etcd's own mutex
//!
//! A lock named `orders/42` is the key prefix `<prefix>/orders/42/`. Each request writes one
//! contender key under it, on the client's session lease, as etcd's `concurrency.Mutex`
//! does (the mutex `etcdctl lock` and Go services use): `<prefix>/orders/42/<lease id in
//! lowercase hex>`, written with `If CreateRevision(key) = 0 Then Put Else Get`, so a
//! create whose answer was lost is found, never made twice. That is the key of a session's
//! first request; later ones get `<lease hex>_<n>`, the n-th after it, so no key name is
//! used twice in a session and a late delete of an old request's key never removes a
//! newer one. A key whose create was never answered is deleted again for a TTL after its
//! request went, in case etcd applies that create late. Contenders
//! queue in the order of their create revisions, so `etcdctl lock <prefix>/orders/42` and
//! a distlock mutex on `orders/42` exclude each other, both ways.
//!
//! A distlock key's value is its holder's record (owner, kind, host, process) as JSON,
//! which `distlock status` shows; etcd's own mutex writes an empty value, and such a key
//! is an exclusive contender shown as foreign. On the value rest the kinds etcd's mutex
//! does not have:
//!
//! * a mutex or a writer goes when it is first;
//! * a reader goes when no mutex or writer is ahead of it;
//! * a semaphore of N permits lets its first contenders go while their permits add up to
//!   no more than N. A name is a semaphore (of one size) or a lock, never both: a request
//!   of the other use is refused.
//!
//! A waiter watches, from the revision of the listing that made it wait, for the deletion
//! of the one key that can let it go — the key just ahead of a writer, the nearest writer
//! ahead of a reader — as etcd's `waitDeletes` does: a release wakes one waiter (or the
//! readers behind one writer), never the whole queue, and nothing polls. A semaphore's
//! waiters watch the lock's prefix for any deletion. After every wait the waiter reads its
//! own key again in the transaction that lists the queue, and a key deleted while it
//! waited queues again instead of being granted.
//!
//! Keys deeper under a lock's prefix belong to other locks (`orders/42/a`'s under
//! `orders/42`'s) and distlock leaves them out of its queue; etcd's own mutex does not, so
//! an `etcdctl lock orders/42` also waits for holders of `orders/42/a`.
//!
//! # Why not etcd's Lock RPC
//!
//! etcd also has a server-side lock (`v3lock`), which is not used: on etcd 3.4 it can report
//! a grant after the caller's lease expired while it waited (fixed in 3.5), its waiters
//! re-check on a fixed step instead of being woken, and called without a lease it holds
//! the lock on a 60 s lease nobody renews.
//!
//! # Sessions and what `Lost` means
//!
//! Every key of a client lives on its session lease; nothing per lock is renewed. The
//! lease (TTL `session_ttl`, as granted) is granted when the client's first request needs
//! it, so a client that only reads the state or breaks locks holds none. It is kept alive
//! by one keep-alive stream, a keep-alive every quarter of the TTL; the session is reported valid until the sending
//! of the last answered keep-alive plus the TTL (less 1 % drift and 2 ms), the earliest
//! moment etcd could expire the lease. A keep-alive unanswered within its quarter turns
//! every guard `AtRisk`; they are `Held` again if an answer comes in time, and `Lost` at
//! the deadline if not — before etcd can have handed the lock to anyone else — and the
//! lease is then revoked (if the cluster can be reached) and a new one serves later
//! requests. An answer saying the lease is gone turns every guard `Lost` at once. A holder
//! whose key someone else deletes (`etcdctl del`) learns it through a watch on its own key
//! and turns `Lost` alone. Requests fail on a member without a leader, which could not keep
//! a lease alive either.
//!
//! # Several members
//!
//! With several members in the URL, requests are spread over those that serve. Each member
//! is asked for its status when the client connects and every second after, on a
//! connection of its own: one that is down, hangs past 800 ms or knows no leader takes no
//! requests until it serves again, so a member lost under a running client costs its
//! calls at most a second of errors (which a waiting `lock` rides out), and a client can
//! connect while one is down. A client's waits and held keys are all watched on one watch
//! stream; when its member is taken out, the stream is dropped and every watch set again
//! on a member that serves. When none serves, requests go to all of them and fail with
//! the reason. A leader killed under a held lock leaves the guard `Held` (etcd's new leader
//! keeps the leases, and the keep-alives go on through another member); a quorum lost turns
//! it `AtRisk`, then `Lost` at the session deadline.
//!
//! # Fencing
//!
//! A grant's fencing token is an etcd revision: unique, increasing, durable. It is the
//! revision of a write of the holder's key made no earlier than the listing that decided
//! the grant — its create, when the create's own listing granted it, or else a stamp (the
//! key written again) in the transaction that lists the queue after its wait, or right
//! after. So tokens strictly increase in grant order for every kind, readers and permits
//! granted together included. `status` shows each holder's key's last write, the same
//! number (a contender whose turn just came, not yet granted, shows an older one).
//!
//! A write to etcd itself under an etcd lock is fenced by etcd: put [`still_holds`] in the
//! condition of the write's transaction, and a holder that lost its grant (its session
//! expired while it was paused, say) has its write refused. It names the key and revision
//! to compare ([`HeldKey`]), for whichever etcd client the program writes with.
//!
//! # Sharing a lock with `etcdctl lock`
//!
//! With `etcd://h:2379/locks`, a distlock mutex on `orders` and
//! `etcdctl --endpoints h:2379 lock locks/orders -- <command>` exclude each other; `distlock
//! status orders` shows etcdctl's holder as a foreign client with its lease. A prefix that
//! must start with a slash (Go programs often lock `/locks/…`) is written with a second
//! slash: `etcd://h:2379//locks`.

mod backend;
mod config;
mod error;
mod fenced;
mod grpc;
mod inspect;
mod members;
mod queue;
mod record;
mod request;
mod runtime;
mod session;
mod txns;
mod watch;
mod watches;

use std::sync::Arc;

use distlock_core::backend::{Backend, Connector, async_trait};
use distlock_core::{Result, Url};

pub use backend::EtcdBackend;
pub use config::{DEFAULT_PREFIX, DEFAULT_SESSION_TTL, EtcdConfig};
pub use fenced::{HeldKey, still_holds};

/// Registers the `etcd://` and `etcds://` connector with the core's URL registry.
///
/// # Examples
///
/// ```
/// distlock_etcd::install();
/// ```
pub fn install() {
    distlock_core::backend::register(Arc::new(EtcdConnector));
}

/// Connects `etcd://` URLs.
#[derive(Debug)]
struct EtcdConnector;

#[async_trait]
impl Connector for EtcdConnector {
    fn schemes(&self) -> &'static [&'static str] {
        &["etcd", "etcds"]
    }

    async fn connect(&self, url: &Url) -> Result<Arc<dyn Backend>> {
        Ok(Arc::new(
            EtcdBackend::open(EtcdConfig::from_url(url)?).await?,
        ))
    }
}
