//! What backend authors implement: the [`Backend`] trait, the [`Ticket`] a request waits
//! with, the [`Grant`] it becomes, the [`Capabilities`] a backend declares, and the helpers
//! the existing backends share ([`admit`], [`LocalWakers`]). Users call
//! the crate root; nothing here is needed to take a lock.
//!
//! # The shape of a backend
//!
//! Every backend speaks in tickets. The core builds a [`Ticket`] for each request and owns
//! it from start to end; [`Backend::enqueue`] registers it, [`Backend::poll`] asks whether
//! it is granted, [`Backend::wait_for_change`] sleeps until something that may grant it
//! happened, and [`Backend::cancel`] withdraws it. Queue-based stores (ZooKeeper's
//! sequential nodes, etcd's revisions) create their queue entry in `enqueue`; try-and-retry
//! stores (Redis, SQL) may make `enqueue` cheap and do the work in `poll`. What a backend
//! learns about a request (a node path, a create revision, "already queued") goes into the
//! ticket's state, and the state a granted ticket holds becomes the [`Grant`]'s, which
//! [`Backend::renew_many`] and [`Backend::release`] get back.
//!
//! The core owns everything else, once for every backend: deadlines (each backend call of
//! an acquire is bounded by the wait deadline), cancellation (a ticket whose acquire ends
//! without a grant, or whose future is dropped at any await, is cancelled, in the background
//! if need be), the watchdog, lease health, reentrancy, metrics and tracing.
//!
//! # Two kinds of liveness
//!
//! * **Per-grant leases** ([`Liveness::Lease`]): each grant expires unless renewed. The
//!   core's watchdog renews it every `renew_every` through [`Backend::renew_many`] (batched
//!   per client), derives `safe_until` from the start of each successful renewal, and turns
//!   the guard `AtRisk` when a renewal fails and `Lost` when the backend says `NotHeld` or
//!   the safe deadline passes. The memory backend's default mode is the worked example
//!   (`memory://`).
//! * **Sessions** ([`Liveness::Session`]): a grant lives as long as the client's session (a
//!   ZooKeeper session, an etcd lease, a database connection). The backend renews nothing
//!   per lock; it reports its session on one channel ([`Backend::session`]) and says in
//!   each grant which session it lives in
//!   ([`PollOutcome::Granted`]'s `session`). The core derives every such guard's health
//!   from that channel — connected: `Held` until the session's `valid_until`; suspended:
//!   `AtRisk`; expired, replaced by a new session, or past `valid_until`: `Lost`, every
//!   guard at once — and releases a grant itself when `max_hold` ends or, with
//!   `auto_renew(false)`, when its TTL ends. A grant the store deletes while the session
//!   lives (an operator removing a ZooKeeper node) turns `Lost` alone, through
//!   [`Backend::grant_lost`]. The memory backend's session mode is the worked example
//!   (`memory://?liveness=session`).
//!
//! # Waiting
//!
//! [`PollOutcome::Pending`] says when to poll again. A backend whose waiters' queue entries
//! expire declares how often they must be refreshed ([`Capabilities::waiter_refresh`]); one
//! whose entries live with the session declares `None`, and its waiters then poll only when
//! [`Backend::wait_for_change`] returns — on a push backend, only when woken.
//!
//! A store may also grant a waiter on its own, as a release passes the lock straight on,
//! and tell it so in the wake-up: the next poll then answers
//! [`PollOutcome::handed_over`] without asking the store, with the grant's first lease,
//! short and dated from what the backend can prove ([`HandedOver`]); the core confirms it
//! with a renewal within its first quarter, whether renewals are automatic or not. Redis
//! does so: its locks change hands in one trip.
//!
//! # Background tasks
//!
//! The core spawns its own tasks (renewal batches, background cancels and releases) on the
//! runtime of the client's caller. A backend spawns what its store needs beside the
//! requests — session heartbeats, watch streams, wake-up listeners, work that must finish
//! even when its caller gives up (a transaction left open would hold locks) — and chooses
//! where: on the runtime that connected it (`tokio::spawn` inside
//! [`Connector::connect`]), or on a [`SideRuntime`] of its own, a thread that outlives
//! that runtime, in which case it says so through
//! [`Backend::calls_outlive_the_runtime`]. Either way its tasks hold the backend weakly
//! (a `Weak`, or channels whose far end the backend owns), so they end when the client's
//! last handle drops the backend; a task that holds it strongly keeps it, and its
//! connections, alive for ever.
//!
//! # Fencing
//!
//! A token is strictly greater than every token granted before for the name, whatever the
//! kind: readers and permits too. A backend whose natural number is minted at enqueue (a
//! ZooKeeper `czxid`, an etcd create revision) must still hand them out in grant order.

mod admission;
pub(crate) mod connector;
pub(crate) mod deadline;
mod fence_ttl;
mod floor;
mod info;
mod keeping;
mod note;
mod record;
mod request;
mod runtime;
mod session;
mod sessions;
mod ticket;
mod url;
mod wakers;
mod writes;

use std::any::Any;
use std::fmt;
use std::time::Duration;

use tokio::sync::watch;

pub use admission::{Claim, Queued, STARVATION, admit};
pub use async_trait::async_trait;
pub use connector::{Connector, register};
pub use deadline::safe_deadline;
pub use fence_ttl::{
    DEFAULT_FENCE_TTL, MAX_FENCE_TTL, MIN_FENCE_TTL, check_fence_ttl, parse_fence_ttl,
};
pub use floor::Floor;
pub use info::{Capabilities, HolderInfo, LockState, WAITER_REFRESH, WaiterInfo};
pub use keeping::{EntryWatch, until_done, watch_entry};
pub use note::{MAX_NOTE_LEN, Note, check_note, note_refused};
pub use record::HolderRecord;
pub use request::{LockKind, LockRequest};
pub use runtime::SideRuntime;
pub use session::{Liveness, Session, SessionState};
pub use sessions::{Attempt, LossFlag, LossWatch, PendingDeletes, SessionSlot};
pub use ticket::{Grant, HandedOver, LeaseOutcome, PollOutcome, Ticket};
pub use url::{UrlParams, duration_within, fence_ttl, url_credentials, url_path};
pub use wakers::LocalWakers;
pub use writes::WritesPaused;

pub use crate::client::backend_of;
pub use crate::guard::grant_of;

// What a backend hands back and is handed besides its own types, so a backend crate can
// import all it needs from this module.
pub use crate::error::{Error, ErrorKind, Result};
pub use crate::owner::{HolderMeta, Owner};
pub use ::url::Url;

/// The most grants renewed by one [`Backend::renew_many`] call.
pub const BATCH: usize = 1000;

/// A lock store. Implement this to add a backend; the core supplies everything else.
///
/// A backend is `Any`, so a test can reach its own hooks from a client's
/// [`backend_of`] by downcasting.
///
/// Implementations must make `poll` atomic (grant, fencing-token increment and dequeue in
/// one step); must make `renew`, `release` and `cancel` compare the request token so a stale
/// holder never touches a newer grant; must make a `poll` of a ticket whose request does not
/// `wait` leave nothing behind when it answers `Pending`; and must make `cancel` idempotent
/// and safe at any point, even on a ticket whose `enqueue` or `poll` was dropped halfway
/// (the core calls it again, in the background, if a cancel is itself dropped).
///
/// # Examples
///
/// ```
/// # async fn demo() -> distlock_core::Result<()> {
/// use std::sync::Arc;
/// use distlock_core::{Client, MemoryBackend};
/// use distlock_core::backend::Backend;
///
/// let backend: Arc<dyn Backend> = Arc::new(MemoryBackend::new());
/// let client = Client::with_backend(backend);
/// let guard = client.mutex("a").lock().await?;
/// # Ok(()) }
/// ```
#[async_trait]
pub trait Backend: Any + Send + Sync + fmt::Debug + 'static {
    /// The URL scheme, used in errors, logs and metrics.
    fn scheme(&self) -> &'static str;

    /// What this backend supports, and how its grants live and its waiters wait.
    fn capabilities(&self) -> Capabilities;

    /// The client's session, for a backend whose grants live by session: one channel per
    /// client, on which every change of state is sent. `None` for lease backends.
    fn session(&self) -> Option<watch::Receiver<Session>> {
        None
    }

    /// Whether the store told the backend that this grant is gone before its session or
    /// lease would say so: a ZooKeeper node or etcd key deleted by an operator, a session
    /// lock whose database server restarted. A session backend announces such news with a
    /// send on its session channel (the state may be unchanged), a lease backend on its
    /// [`loss_news`](Backend::loss_news) channel; the core then asks this of every grant
    /// the client holds and turns those gone `Lost`. It also asks at each grant's checks.
    /// Called often: answer from memory, without a round trip. The default: never.
    fn grant_lost(&self, grant: &Grant) -> bool {
        let _ = grant;
        false
    }

    /// For a backend whose grants live by their own lease: a channel on which it announces
    /// that the store may have dropped grants before their leases ran out (a database
    /// server that restarted forgets every lock its sessions held, at once). After each
    /// send the core asks [`grant_lost`](Backend::grant_lost) of every grant the client
    /// holds, within milliseconds, instead of learning it at the next renewal. `None`
    /// (the default): no such news.
    ///
    /// # Examples
    ///
    /// ```
    /// use distlock_core::MemoryBackend;
    /// use distlock_core::backend::Backend;
    /// assert!(MemoryBackend::new().loss_news().is_none());
    /// ```
    fn loss_news(&self) -> Option<watch::Receiver<u64>> {
        None
    }

    /// News of lock `name`: a channel whose value changes when the store pushes that the
    /// lock's holders or note may have changed, for as long as a receiver lives; an
    /// election's observer reads the leader again at each change, beside its polling.
    /// `None` (the default): the store pushes nothing, and observers poll alone.
    ///
    /// # Examples
    ///
    /// ```
    /// use distlock_core::MemoryBackend;
    /// use distlock_core::backend::Backend;
    /// assert!(MemoryBackend::new().lock_news("services/billing").is_none());
    /// ```
    fn lock_news(&self, name: &str) -> Option<watch::Receiver<u64>> {
        let _ = name;
        None
    }

    /// Registers the ticket's request (creates its queue entry, where the store has one).
    /// The default does nothing: the first poll does the work.
    async fn enqueue(&self, ticket: &mut Ticket) -> Result<()> {
        let _ = ticket;
        Ok(())
    }

    /// Asks whether the ticket is granted, granting it if it now may be. A waiting ticket
    /// of a backend whose waiter entries expire keeps its place by being polled.
    async fn poll(&self, ticket: &mut Ticket) -> Result<PollOutcome>;

    /// Waits until something happened that may let the ticket through, or `backstop`
    /// passed (`None`: no bound; the core bounds it by the deadline).
    async fn wait_for_change(&self, ticket: &mut Ticket, backstop: Option<Duration>) -> Result<()>;

    /// Withdraws a ticket: removes its queue entry and any grant made under its token.
    async fn cancel(&self, ticket: &mut Ticket) -> Result<()>;

    /// Extends many grants to `ttl` from now, answering for each in order. The watchdogs of
    /// one client renew through this, up to [`BATCH`] grants a call; backends that can
    /// should do it in one round trip. Every backend whose grants live by a lease
    /// ([`Liveness::Lease`]) implements it; session backends are never asked, and the
    /// default refuses with `Unsupported`.
    async fn renew_many(&self, grants: &[Grant], ttl: Duration) -> Result<Vec<LeaseOutcome>> {
        let _ = (grants, ttl);
        Err(Error::new(
            ErrorKind::Unsupported,
            format!(
                "the {} backend's grants live by its session: there is no lease to renew",
                self.scheme()
            ),
        ))
    }

    /// Deletes a grant, if it is still ours.
    async fn release(&self, grant: &Grant) -> Result<LeaseOutcome>;

    /// The state of one lock, or of every lock with holders or waiters.
    async fn inspect(&self, name: Option<&str>) -> Result<Vec<LockState>>;

    /// Refuses a lock name this backend cannot store, beyond what every backend refuses
    /// ([`validate_name`](crate::validate_name)). The core asks before every acquire,
    /// `status` and `forget`, so such a name never reaches a server (where a RedLock would
    /// report it as masters not answering). The default accepts every name.
    ///
    /// # Examples
    ///
    /// ```
    /// use distlock_core::MemoryBackend;
    /// use distlock_core::backend::Backend;
    /// assert!(MemoryBackend::new().check_name("a{b}").is_ok());
    /// ```
    fn check_name(&self, name: &str) -> Result<()> {
        let _ = name;
        Ok(())
    }

    /// Lets the store drop what it keeps of `names` between their grants: each name's
    /// fencing counter, where it is the backend's shortest `fence_ttl` or more below the
    /// server's clock ([`MIN_FENCE_TTL`]; a backend whose servers' clocks may differ waits
    /// longer) — the rule by which `fence_ttl` ends an idle
    /// counter: a later grant seeds it again from that clock, above every token it gave
    /// (as long as the clock does not step back by more than that margin). Holders and
    /// waiters are untouched. Answers how many counters went. The default: nothing is
    /// kept.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> distlock_core::Result<()> {
    /// use distlock_core::MemoryBackend;
    /// use distlock_core::backend::Backend;
    /// assert_eq!(MemoryBackend::new().forget(&["orders/42"]).await?, 0);
    /// # Ok(()) }
    /// ```
    async fn forget(&self, names: &[&str]) -> Result<usize> {
        let _ = names;
        Ok(0)
    }

    /// Writes lock `grant.name`'s note (at most [`MAX_NOTE_LEN`] bytes), replacing the one
    /// before, if `grant` is still a live grant of it: compared in the store in the same
    /// step as the write, so a holder whose grant expired or was broken writes nothing and
    /// gets an `ErrorKind::NotHeld` error. The store stamps it with its own clock. Given
    /// `quiet_for`, it keeps a quiet window that long from the write, measured on its
    /// clock; without, the window the note had goes on as it was. Answers the write's time
    /// on the store's clock (`None` where the store has none). A job keeps
    /// its run record here. The default keeps no notes: `Unsupported`.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> distlock_core::Result<()> {
    /// use std::sync::Arc;
    /// use distlock_core::{Client, MemoryBackend};
    /// use distlock_core::backend::{Backend, grant_of};
    ///
    /// let backend = Arc::new(MemoryBackend::new());
    /// let client = Client::with_backend(backend.clone());
    /// let guard = client.mutex("jobs/a").lock().await?;
    /// backend.write_note(grant_of(&guard), guard.fencing_token(), "ran", None).await?;
    /// assert_eq!(backend.read_note("jobs/a").await?.unwrap().value, "ran");
    /// # Ok(()) }
    /// ```
    async fn write_note(
        &self,
        grant: &Grant,
        fencing_token: u64,
        value: &str,
        quiet_for: Option<Duration>,
    ) -> Result<Option<u64>> {
        let _ = (grant, fencing_token, value, quiet_for);
        Err(notes_unsupported(self.scheme()))
    }

    /// Lock `name`'s note, if one was written, with what is left of its quiet window
    /// measured by the store now. The default keeps no notes: `Unsupported`.
    ///
    /// # Examples
    ///
    /// See [`write_note`](Backend::write_note).
    async fn read_note(&self, name: &str) -> Result<Option<Note>> {
        let _ = name;
        Err(notes_unsupported(self.scheme()))
    }

    /// Takes over `handed`, an exclusive grant with `fencing_token` that its holder handed
    /// off ([`Guard::hand_off`](crate::Guard::hand_off)), for `ticket`'s request: if the
    /// store still holds it (under the same request token and fencing token, its lease
    /// live), it becomes the ticket's grant in one atomic step, with a fencing token above
    /// every earlier one and a lease of the request's TTL. Answers
    /// [`PollOutcome::Granted`] with the new token and, on a backend whose grants live by
    /// session, the session the adoption was made in (a `Pending` answer is an error). The
    /// backend keeps in the ticket what its grant needs, as when it grants a poll. `NotHeld` when the
    /// store does not hold it so (adopted already, released, expired, broken). The
    /// default: `Unsupported`, saying why ([`Capabilities::adopt`] is false).
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> distlock_core::Result<()> {
    /// # let client = distlock_core::Client::connect("memory://").await?;
    /// let guard = client.mutex("migrations").lock().await?;
    /// let handed = guard.hand_off(std::time::Duration::from_secs(30))?;
    /// let adopted = client.adopt(&handed).await?;
    /// assert!(adopted.fencing_token() > guard.fencing_token());
    /// # Ok(()) }
    /// ```
    async fn adopt(
        &self,
        handed: &Grant,
        fencing_token: u64,
        ticket: &mut Ticket,
    ) -> Result<PollOutcome> {
        let _ = (handed, fencing_token, ticket);
        Err(adopt_unsupported(self.scheme(), self.capabilities()))
    }

    /// Breaks grants of lock `name` whoever holds them, for an operator freeing a stuck
    /// lock (`distlock break`): the grant whose fencing token is `fencing_token`, or every
    /// current grant when it is `None`. Where the store keeps a fencing counter, it is
    /// bumped first (before any grant goes), so every later grant's token is above the
    /// broken holder's even if the break stops half-way; the broken holder learns of it as
    /// it would of an operator's deletion (its next renewal, or the store's news). Waiters
    /// are then granted as after a release. Answers the grants it broke, as
    /// [`inspect`](Backend::inspect) showed them (none: nothing matched). A backend that
    /// cannot break another's grant refuses with `Unsupported`, naming the store's own
    /// tool; the default refuses every break.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> distlock_core::Result<()> {
    /// use distlock_core::MemoryBackend;
    /// use distlock_core::backend::Backend;
    /// assert!(MemoryBackend::new().force_release("orders/42", None).await?.is_empty());
    /// # Ok(()) }
    /// ```
    async fn force_release(
        &self,
        name: &str,
        fencing_token: Option<u64>,
    ) -> Result<Vec<HolderInfo>> {
        let _ = (name, fencing_token);
        Err(Error::new(
            ErrorKind::Unsupported,
            format!(
                "the {} backend cannot break another holder's grant",
                self.scheme()
            ),
        ))
    }

    /// Why this backend grants no `kind` (a kind its [`Capabilities`] leave out), in a
    /// sentence the core's `Unsupported` error carries, so a user learns what the store
    /// cannot give and what to do instead. `None` (the default): the error names the
    /// capability alone.
    ///
    /// # Examples
    ///
    /// ```
    /// use distlock_core::{LockKind, MemoryBackend};
    /// use distlock_core::backend::Backend;
    /// assert_eq!(MemoryBackend::new().why_unsupported(LockKind::Read), None);
    /// ```
    fn why_unsupported(&self, kind: LockKind) -> Option<String> {
        let _ = kind;
        None
    }

    /// Where lock `name` lives in the store, as the store's own tools show it (the key
    /// prefix `etcdctl get --prefix` lists, the node path `zkCli.sh ls` shows), for
    /// messages and `distlock status`: so an operator sees that two programs that think of
    /// the same lock share nothing. `None` (the default) where the store's name for it is
    /// the lock's name.
    ///
    /// # Examples
    ///
    /// ```
    /// use distlock_core::MemoryBackend;
    /// use distlock_core::backend::Backend;
    /// assert_eq!(MemoryBackend::new().place_of("orders/42"), None);
    /// ```
    fn place_of(&self, name: &str) -> Option<String> {
        let _ = name;
        None
    }

    /// Whether this backend's calls still work once the runtime that connected it has
    /// stopped running tasks: true where its connections run on a runtime of their own (a
    /// [`SideRuntime`]), or it needs none. A client's last handle dropped at the end of a
    /// current-thread runtime's `block_on` (a `#[tokio::main(flavor = "current_thread")]`
    /// program returning with a guard still held) releases the grants left in flight on a
    /// thread of its own: through this backend when this is true, else through a new
    /// connection to the client's URL, which releases the grants that have a lease (those
    /// that live by a connection of their own end with it). The default is false.
    ///
    /// # Examples
    ///
    /// ```
    /// use distlock_core::MemoryBackend;
    /// use distlock_core::backend::Backend;
    /// assert!(MemoryBackend::new().calls_outlive_the_runtime());
    /// ```
    fn calls_outlive_the_runtime(&self) -> bool {
        false
    }

    /// Waits, at most `within`, for the calls this backend left running on tasks of its
    /// own once it had its answer (a RedLock's calls to its slower masters after a
    /// majority answered), so that a program that exits after [`Client::settle`] or
    /// [`Client::close`](crate::Client::close) leaves none of them half-done: a release
    /// dropped with the runtime would leave its lock held until its lease ends. True if
    /// none is left. The default: the backend leaves nothing running.
    ///
    /// [`Client::settle`]: crate::Client::settle
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// use std::time::Duration;
    /// use distlock_core::MemoryBackend;
    /// use distlock_core::backend::Backend;
    /// assert!(MemoryBackend::new().settle(Duration::from_secs(1)).await);
    /// # }
    /// ```
    async fn settle(&self, within: Duration) -> bool {
        let _ = within;
        true
    }

    /// Waits until none of this client's writes that others would wait on is under way,
    /// and holds new ones back until the answer is dropped. A process about to stop itself
    /// (as job control stops it on Ctrl-Z) takes it first, so that it does not stop in the
    /// middle of one: a SQLite writer holds the database file's one write lock, and a
    /// lease-table transaction the locks it took, and keeps them while stopped. Keep it
    /// short, and await none of the client's operations while holding it: they wait for
    /// its drop (renewals too). The default holds nothing back, for stores whose other
    /// clients do not wait on one client's writes.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// use distlock_core::MemoryBackend;
    /// use distlock_core::backend::Backend;
    /// assert!(!MemoryBackend::new().pause_writes().await.is_holding());
    /// # }
    /// ```
    async fn pause_writes(&self) -> WritesPaused {
        WritesPaused::none()
    }

    /// What a benchmark measures this backend's locks against: the store's cheapest
    /// comparable operation, and where it has one a minimal correct lock cycle. `None` (the
    /// default): `distlock bench` refuses the backend, having nothing to measure it
    /// against; its locks work the same.
    ///
    /// # Examples
    ///
    /// ```
    /// use distlock_core::MemoryBackend;
    /// use distlock_core::backend::Backend;
    /// let backend = MemoryBackend::new();
    /// assert_eq!(backend.floor().map(|floor| floor.op()), Some("tokio::sync::Mutex lock+unlock"));
    /// ```
    fn floor(&self) -> Option<&dyn Floor> {
        None
    }
}

/// The refusal of a hand-off on the backend of `scheme`, which cannot adopt grants: why,
/// by how its grants live (the default of [`Backend::adopt`]).
///
/// # Examples
///
/// ```
/// use distlock_core::ErrorKind;
/// use distlock_core::backend::{Capabilities, adopt_unsupported};
/// let err = adopt_unsupported("zk", Capabilities::session());
/// assert_eq!(err.kind(), ErrorKind::Unsupported);
/// assert!(err.to_string().contains("session"));
/// ```
pub fn adopt_unsupported(scheme: &str, caps: Capabilities) -> Error {
    let why = match (caps.liveness, caps.detachable) {
        (Liveness::Session, _) => format!(
            "a {scheme} grant lives by its holder's session, which another process cannot take over"
        ),
        (Liveness::Lease, false) => format!(
            "a {scheme} grant in this mode lives by its holder's own database connection; lease mode (?mode=lease) hands grants over"
        ),
        (Liveness::Lease, true) => {
            format!("the {scheme} backend cannot hand a grant to another process")
        }
    };
    Error::new(ErrorKind::Unsupported, why)
}

/// The refusal of an adoption whose grant the store no longer holds (`NotHeld`), for a
/// backend's [`adopt`](Backend::adopt).
///
/// # Examples
///
/// ```
/// use distlock_core::ErrorKind;
/// assert_eq!(distlock_core::backend::adopt_refused("migrations").kind(), ErrorKind::NotHeld);
/// ```
pub fn adopt_refused(name: &str) -> Error {
    Error::new(
        ErrorKind::NotHeld,
        format!(
            "lock `{name}` is not held under that hand-off any more: adopted already, released, expired or broken"
        ),
    )
}

/// The refusal of a backend that keeps no notes.
fn notes_unsupported(scheme: &str) -> Error {
    Error::new(
        ErrorKind::Unsupported,
        format!(
            "the {scheme} backend keeps no notes beside its locks: a job's run record \
             (once_per, job_status) needs a store that keeps one, with a clock of its own"
        ),
    )
}
