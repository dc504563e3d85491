//! The etcd backend: each request is a contender key on the session's lease under its
//! lock's prefix, granted when no contender created before it conflicts, waiting on the
//! one key whose deletion can let it go.

use std::sync::Arc;
use std::time::Duration;

use distlock_core::backend::{
    Backend, Capabilities, Floor, Grant, LeaseOutcome, Liveness, LockState, Note, PollOutcome,
    Session, Ticket, adopt_refused, async_trait,
};
use distlock_core::{Error, ErrorKind, HolderInfo, Result};
use tokio::sync::watch;

use crate::config::EtcdConfig;
use crate::error::etcd_error;
use crate::queue::{self, Turn};
use crate::request::{Key, Request, request_mut};
use crate::session::{Doomed, Live, Sessions};
use crate::txns::{self, Enqueued, Listing};
use crate::watch::{Deletion, Stood, deleted};
use crate::{inspect, notes};

/// What a poll's transaction found of its request's key.
enum Listed {
    /// The key is queued: the listing of it and those ahead, and whether the transaction
    /// wrote it (so the listing's revision is a write of ours).
    Mine {
        key: Key,
        listing: Listing,
        written: bool,
    },
    /// The key is gone (deleted by someone else while it waited): it queues again.
    Gone,
    /// The lock is busy, and the request, which queues only on a free lock, wrote nothing.
    Busy(Listing),
}

/// A distlock client's etcd backend: one session lease at a time (see the crate docs).
///
/// # Examples
///
/// ```no_run
/// # async fn demo() -> distlock_core::Result<()> {
/// use std::sync::Arc;
/// use distlock_etcd::{EtcdBackend, EtcdConfig};
///
/// let url = distlock_core::parse_lock_url("etcd://127.0.0.1:2379/locks")?;
/// let backend = EtcdBackend::open(EtcdConfig::from_url(&url)?).await?;
/// let client = distlock_core::Client::with_backend(Arc::new(backend));
/// let guard = client.mutex("orders/42").lock().await?;
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct EtcdBackend {
    pub(crate) sessions: Arc<Sessions>,
}

impl EtcdBackend {
    /// Connects (an unreachable cluster or refused credentials fail at once); the session
    /// lease is granted when a request first needs one, and kept alive from then on, so a
    /// client that only reads the state (`status`) or breaks locks holds none.
    ///
    /// # Examples
    ///
    /// See [`EtcdBackend`].
    pub async fn open(config: EtcdConfig) -> Result<Self> {
        Ok(EtcdBackend {
            sessions: Sessions::open(config).await?,
        })
    }

    /// The id of the lease the current session's keys live on, if one is granted: what
    /// `etcdctl lease timetolive` takes (in hex, as in the keys' names), or what a test
    /// revokes to end the session from outside.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn demo(backend: &distlock_etcd::EtcdBackend) {
    /// if let Some(lease) = backend.lease() {
    ///     println!("keys live on lease {lease:x}");
    /// }
    /// # }
    /// ```
    pub fn lease(&self) -> Option<i64> {
        self.sessions.slot.live().map(|live| live.lease)
    }

    fn config(&self) -> &EtcdConfig {
        self.sessions.config()
    }

    /// The prefix of lock `name`'s contender keys.
    fn pfx(&self, name: &str) -> String {
        format!("{}/{name}/", self.config().prefix)
    }

    /// The ticket's key in session `live`: the one it has, or a new one (a request whose
    /// key went with an ended session queues again in the new one).
    fn key_in(&self, live: &Live, request: &mut Request) -> Key {
        if let Some(key) = request.key.as_ref().filter(|k| k.session == live.id) {
            return key.clone();
        }
        let key = Key {
            name: self.sessions.take_key(live, &request.pfx),
            session: live.id,
            created: 0,
            granted: 0,
        };
        request.key = Some(key.clone());
        key
    }

    /// The listing a poll decides on: queueing the key if it is not queued yet (with
    /// `only_if_free`, only on a lock no key is under), else a read (with the key stamped
    /// first when `stamp`).
    async fn listing(
        &self,
        live: &Live,
        request: &mut Request,
        stamp: bool,
        only_if_free: bool,
    ) -> Result<Listed> {
        let key = self.key_in(live, request);
        if key.created == 0 {
            let queued =
                match txns::queue(live, &key.name, &request.value, &request.pfx, only_if_free)
                    .await?
                {
                    Enqueued::Queued(queued) => queued,
                    Enqueued::Busy(listing) => {
                        // Nothing was written: the request has no key to withdraw.
                        request.key = None;
                        return Ok(Listed::Busy(listing));
                    }
                };
            if !queued.fresh && queued.lease != live.lease {
                return Err(Error::new(
                    ErrorKind::Backend,
                    format!(
                        "the contender key {} is on lease {:x}, not on this client's {:x}: another client wrote it",
                        key.name, queued.lease, live.lease
                    ),
                )
                .with_backend("etcd"));
            }
            let key = Key {
                created: queued.created,
                ..key
            };
            request.key = Some(key.clone());
            return Ok(Listed::Mine {
                key,
                listing: queued.listing,
                written: queued.fresh,
            });
        }
        let stamp = stamp.then_some(request.value.as_slice());
        match txns::list(live, &key.name, key.created, &request.pfx, stamp).await? {
            Some(listing) => Ok(Listed::Mine {
                key,
                listing,
                written: stamp.is_some(),
            }),
            None => {
                if let Some(key) = request.key.as_mut() {
                    key.created = 0;
                }
                Ok(Listed::Gone)
            }
        }
    }

    /// A request's poll: granted when its turn came. The fencing token is the revision of
    /// a write of its key made no earlier than the listing that decided: its create, or a
    /// stamp. So it is above every token handed out before, whatever their kinds.
    async fn poll_request(&self, ticket: &mut Ticket) -> Result<PollOutcome> {
        let live = self.sessions.current().await?;
        let (name, kind, permits) = (
            ticket.request.name.clone(),
            ticket.request.kind,
            ticket.request.permits,
        );
        let waits = ticket.request.wait;
        let request = request_mut(ticket)?;
        request.blocker = None;
        let mut stamp = std::mem::take(&mut request.likely);
        // An exclusive request that does not wait queues only on a free lock: on a busy one
        // it is refused after a read, not after its key was written and deleted again.
        let mut only_if_free = !waits && kind.is_exclusive();
        // Twice at most: a grant decided on a listing without a write of ours is decided
        // again on a stamped one.
        loop {
            let (key, listing, written) =
                match self.listing(&live, request, stamp, only_if_free).await? {
                    Listed::Mine {
                        key,
                        listing,
                        written,
                    } => (key, listing, written),
                    Listed::Gone => {
                        return Ok(PollOutcome::pending(Some(Duration::ZERO)));
                    }
                    Listed::Busy(listing) => {
                        let queue = queue::contenders(&request.pfx, &listing.kvs);
                        // Only keys of deeper locks (`a/b`'s under `a`): queue as usual.
                        if queue.is_empty() {
                            only_if_free = false;
                            continue;
                        }
                        queue::same_use(&queue, &name, kind)?;
                        return Ok(PollOutcome::pending(None));
                    }
                };
            let queue = queue::contenders(&request.pfx, &listing.kvs);
            // The listing's transaction checked the key exists: it is in the listing.
            let Some(index) = queue
                .iter()
                .position(|c| c.key == key.name && c.created == key.created)
            else {
                return Err(Error::new(
                    ErrorKind::Backend,
                    format!(
                        "etcd listed {} without the key {} it had just checked",
                        request.pfx, key.name
                    ),
                )
                .with_backend("etcd"));
            };
            // Only those ahead decide: a request of another use behind this one is refused
            // on its own poll, and does not knock this one out.
            queue::same_use(&queue[..index], &name, kind)?;
            let (target, stood) = match queue::turn(&queue, index, kind, permits) {
                Turn::Go if written => {
                    let key = Key {
                        granted: listing.revision,
                        ..key
                    };
                    request.watch_grant(&self.sessions, &key);
                    request.key = Some(key);
                    return Ok(PollOutcome::granted_in_session(
                        listing.revision.max(0) as u64,
                        live.id,
                    ));
                }
                Turn::Go => {
                    stamp = true;
                    continue;
                }
                Turn::WaitFor { key, created } => (
                    key,
                    Stood::Key {
                        created,
                        granted: None,
                    },
                ),
                Turn::WaitForAny => {
                    let count = listing
                        .kvs
                        .iter()
                        .filter(|kv| kv.create_revision < key.created)
                        .count();
                    let stood = Stood::Ahead {
                        before: key.created,
                        count,
                    };
                    (request.pfx.clone(), stood)
                }
            };
            request.blocker = Some(Deletion {
                key: target,
                after: listing.revision,
                stood,
            });
            return self.pending(ticket).await;
        }
    }

    /// A request that must wait: a waiting one keeps its key; one that does not wait
    /// leaves nothing behind.
    async fn pending(&self, ticket: &mut Ticket) -> Result<PollOutcome> {
        if !ticket.request.wait {
            self.withdraw(ticket).await?;
        }
        Ok(PollOutcome::pending(None))
    }

    /// Deletes the ticket's key, if it has one in the current session.
    async fn withdraw(&self, ticket: &mut Ticket) -> Result<()> {
        let Some(request) = ticket.state_mut::<Request>() else {
            return Ok(());
        };
        request.blocker = None;
        let Some(key) = request.key.take() else {
            return Ok(());
        };
        match self.sessions.slot.live() {
            Some(live) if live.id == key.session => self.delete_surely(&live, &key).await.map(drop),
            // Its lease ended, and took the key with it.
            _ => Ok(()),
        }
    }

    /// Deletes `key` now; if that gets no answer (or this call is dropped halfway), once
    /// the session answers again, the error still being returned. True if it was there. A
    /// key whose create was never answered (`created` 0) is deleted again for a TTL after,
    /// in case that create is applied late.
    async fn delete_surely(&self, live: &Live, key: &Key) -> Result<bool> {
        let doomed = Doomed {
            key: key.name.clone(),
            created: key.created,
            granted: key.granted,
            adopted_from: 0,
            linger_until: (key.created == 0)
                .then(|| tokio::time::Instant::now() + self.config().session_ttl),
        };
        let note = self.sessions.pending.note(live.id, doomed);
        let deleted = txns::delete(live, key).await;
        if key.created != 0 && !deleted.as_ref().is_err_and(Error::is_temporary) {
            note.done();
        }
        deleted
    }
}

#[async_trait]
impl Backend for EtcdBackend {
    fn scheme(&self) -> &'static str {
        "etcd"
    }

    /// The prefix of the lock's contender keys, as `etcdctl get --prefix` takes it.
    fn place_of(&self, name: &str) -> Option<String> {
        Some(format!("etcd keys {}", self.pfx(name)))
    }

    /// Its connections, and every call, run on the etcd side runtime.
    fn calls_outlive_the_runtime(&self) -> bool {
        true
    }

    fn capabilities(&self) -> Capabilities {
        // Everything, by the session, each waiter woken by its own watch.
        let mut caps = Capabilities::full(true);
        caps.liveness = Liveness::Session;
        caps.detachable = false;
        caps.waiter_refresh = None;
        // A held key moves to an adopter's lease in one transaction.
        caps.adopt = true;
        caps
    }

    fn session(&self) -> Option<watch::Receiver<Session>> {
        Some(self.sessions.slot.subscribe())
    }

    /// Watches on the lock's contender keys and its note, kept while a receiver lives.
    fn lock_news(&self, name: &str) -> Option<watch::Receiver<u64>> {
        let (note, _) = notes::keys(&self.config().prefix, name);
        let sessions = Arc::downgrade(&self.sessions);
        Some(crate::news::start(sessions, self.pfx(name), note))
    }

    /// Prepares the request's state. Its first poll queues its key and lists the lock's
    /// contenders in one transaction; the key's name is in the ticket before that is sent,
    /// so a cancel deletes the key even if the poll is dropped halfway.
    async fn enqueue(&self, ticket: &mut Ticket) -> Result<()> {
        let pfx = self.pfx(&ticket.request.name);
        ticket.set_state(Request::new(pfx, &ticket.request));
        Ok(())
    }

    /// Lists the contenders (queueing the key first, the first time) and grants the request
    /// when its turn came.
    async fn poll(&self, ticket: &mut Ticket) -> Result<PollOutcome> {
        self.poll_request(ticket).await
    }

    /// Watches the one key whose deletion may let the request go (no other waiter is woken
    /// by it), or a semaphore's keys, until a deletion or the end of the session.
    async fn wait_for_change(&self, ticket: &mut Ticket, backstop: Option<Duration>) -> Result<()> {
        let Some(live) = self.sessions.slot.live() else {
            return Ok(());
        };
        let Some(request) = ticket.state_mut::<Request>() else {
            return Ok(());
        };
        let in_session = request.key.as_ref().is_some_and(|k| k.session == live.id);
        let Some(blocker) = request.blocker.take().filter(|_| in_session) else {
            return Ok(());
        };
        let mut states = self.sessions.slot.subscribe();
        let session = live.id;
        let waited = async {
            tokio::select! {
                _ = states.wait_for(|s| s.id != session || s.valid_until().is_none()) => Ok(false),
                freed = deleted(&self.sessions.watches, &live.client, &blocker) => freed,
            }
        };
        let freed = match backstop {
            Some(limit) => tokio::time::timeout(limit, waited)
                .await
                .unwrap_or(Ok(false))?,
            None => waited.await?,
        };
        // The next poll will likely grant: it stamps its key in the same transaction.
        request.likely = freed;
        Ok(())
    }

    async fn cancel(&self, ticket: &mut Ticket) -> Result<()> {
        self.withdraw(ticket).await
    }

    fn grant_lost(&self, grant: &Grant) -> bool {
        Request::lost(grant)
    }

    /// Deletes the grant's key, if it is still the one granted.
    async fn release(&self, grant: &Grant) -> Result<LeaseOutcome> {
        let Some(request) = grant.state::<Request>() else {
            return Ok(LeaseOutcome::NotHeld);
        };
        // The deletion below is this release's, not a loss to report.
        request.gone.releasing();
        let Some(key) = request.key.as_ref() else {
            return Ok(LeaseOutcome::NotHeld);
        };
        // A session past its validity is being ended, and its keys with it.
        let live = self
            .sessions
            .slot
            .live()
            .filter(|live| live.id == key.session && self.sessions.slot.is_valid(live.id));
        let Some(live) = live else {
            return Ok(LeaseOutcome::NotHeld);
        };
        Ok(match self.delete_surely(&live, key).await? {
            true => LeaseOutcome::Done,
            false => LeaseOutcome::NotHeld,
        })
    }

    /// Moves the handed-off key (found by the write that granted it, its fencing token, and
    /// the request token in its record) to this client's session lease in one transaction
    /// that checks it was not written since: it keeps its create revision, and so its place
    /// ahead of every waiter; the adoption's revision is the new fencing token. The
    /// sender's watch on the key sees the move and ends its hold.
    async fn adopt(
        &self,
        handed: &Grant,
        fencing_token: u64,
        ticket: &mut Ticket,
    ) -> Result<PollOutcome> {
        let live = self.sessions.current().await?;
        let mut request = Request::new(self.pfx(&handed.name), &ticket.request);
        let fence = i64::try_from(fencing_token).map_err(|_| adopt_refused(&handed.name))?;
        let handed_grant = (handed.token.as_str(), handed.kind);
        let (name, created) = txns::handed_key(&live, &request.pfx, handed_grant, fence)
            .await?
            .ok_or_else(|| adopt_refused(&handed.name))?;
        // Should the adoption's answer be lost (or this call dropped) after etcd made it,
        // the key it moved onto this session is deleted once the session answers again.
        let doomed = Doomed {
            key: name.clone(),
            created,
            granted: 0,
            adopted_from: fence,
            linger_until: None,
        };
        let note = self.sessions.pending.note(live.id, doomed);
        let taken = txns::take_over(&live, &name, fence, &request.value).await;
        if !taken.as_ref().is_err_and(Error::is_temporary) {
            note.done();
        }
        let revision = taken?.ok_or_else(|| adopt_refused(&handed.name))?;
        if !self.sessions.slot.is_valid(live.id) {
            // Its lease ends (or ended), and takes the adopted key with it.
            return Err(Error::new(
                ErrorKind::Unavailable,
                format!(
                    "the etcd session ended as lock `{}` was adopted: the grant went with it",
                    handed.name
                ),
            )
            .with_backend("etcd")
            .temporary());
        }
        let key = Key {
            name,
            session: live.id,
            created,
            granted: revision,
        };
        request.watch_grant(&self.sessions, &key);
        request.key = Some(key);
        ticket.set_state(request);
        Ok(PollOutcome::granted_in_session(
            revision.max(0) as u64,
            live.id,
        ))
    }

    async fn inspect(&self, name: Option<&str>) -> Result<Vec<LockState>> {
        inspect::locks(self.sessions.client(), &self.config().prefix, name).await
    }

    /// etcd has no clock to stamp a note with; its quiet windows are leases, counted in
    /// whole seconds.
    async fn write_note(
        &self,
        grant: &Grant,
        fencing_token: u64,
        value: &str,
        quiet_for: Option<Duration>,
    ) -> Result<Option<u64>> {
        let live = self.sessions.current().await?;
        let prefix = &self.config().prefix;
        notes::write(&live, prefix, grant, fencing_token, value, quiet_for).await
    }

    async fn read_note(&self, name: &str) -> Result<Option<Note>> {
        let live = self.sessions.current().await?;
        notes::read(&live, &self.config().prefix, name).await
    }

    async fn force_release(
        &self,
        name: &str,
        fencing_token: Option<u64>,
    ) -> Result<Vec<HolderInfo>> {
        let prefix = &self.config().prefix;
        inspect::force_release(self.sessions.client(), prefix, name, fencing_token).await
    }

    fn floor(&self) -> Option<&dyn Floor> {
        Some(self)
    }
}

#[async_trait]
impl Floor for EtcdBackend {
    fn op(&self) -> &'static str {
        "put"
    }

    async fn round(&self) -> Result<()> {
        let live = self.sessions.current().await?;
        let key = format!("{}/%floor", self.config().prefix);
        let put = crate::grpc::pb::PutRequest {
            key: key.into_bytes(),
            value: Vec::new(),
            lease: live.lease,
        };
        live.client
            .put(put)
            .await
            .map(drop)
            .map_err(etcd_error("put"))
    }
}
