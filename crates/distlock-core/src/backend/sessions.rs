//! What a session backend (ZooKeeper, etcd) keeps of its sessions, the same for each: the
//! one session requests are made in and its state as the core follows it
//! ([`SessionSlot`]), the deletes to make again once the session answers
//! ([`PendingDeletes`]), and whether the store deleted one grant while its session lived
//! ([`LossFlag`]).

use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use tokio::sync::watch;
use tokio::time::Instant;

use super::session::{Session, SessionState};
use crate::error::{Error, ErrorKind, Result};

/// The poison-proof lock of a mutex.
fn locked<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

/// The session a client's requests are made in (`L`, the backend's handle of it: a
/// connection, a lease), none between an ended session and the next, and the channel on
/// which the core follows its state ([`Backend::session`](super::Backend::session)). The
/// open session is always the one last reported on the channel.
///
/// # Examples
///
/// ```
/// use distlock_core::backend::SessionSlot;
/// let now = tokio::time::Instant::now();
/// let slot = SessionSlot::new("example", 1, "lease 7", now + std::time::Duration::from_secs(10));
/// assert_eq!(slot.live(), Some("lease 7"));
/// assert!(slot.is_valid(1));
/// assert_eq!(slot.end(1), Some("lease 7"));
/// assert!(slot.current().is_err());
/// slot.open(2, "lease 8", now + std::time::Duration::from_secs(10));
/// assert_eq!(slot.subscribe().borrow().id, 2);
/// ```
#[derive(Debug)]
pub struct SessionSlot<L> {
    backend: &'static str,
    current: Mutex<Option<L>>,
    sender: watch::Sender<Session>,
}

impl<L: Clone> SessionSlot<L> {
    /// A slot holding session `id` (`live`), connected and valid until `valid_until`;
    /// `backend` names the backend in errors.
    ///
    /// # Examples
    ///
    /// See [`SessionSlot`].
    pub fn new(backend: &'static str, id: u64, live: L, valid_until: Instant) -> Self {
        let (sender, _) = watch::channel(Session {
            id,
            state: SessionState::Connected { valid_until },
        });
        SessionSlot {
            backend,
            current: Mutex::new(Some(live)),
            sender,
        }
    }

    /// A slot with no session yet (reported as session 0, expired), for a backend that
    /// opens its first session when a request first needs one; `backend` names the backend
    /// in errors.
    ///
    /// # Examples
    ///
    /// ```
    /// use distlock_core::backend::SessionSlot;
    /// let slot: SessionSlot<&str> = SessionSlot::unopened("example");
    /// assert!(slot.live().is_none() && !slot.subscribe().borrow().is_alive());
    /// slot.open(1, "lease 7", tokio::time::Instant::now() + std::time::Duration::from_secs(10));
    /// assert_eq!(slot.live(), Some("lease 7"));
    /// ```
    pub fn unopened(backend: &'static str) -> Self {
        let (sender, _) = watch::channel(Session {
            id: 0,
            state: SessionState::Expired,
        });
        SessionSlot {
            backend,
            current: Mutex::new(None),
            sender,
        }
    }

    /// The session requests are made in now, if one is open.
    ///
    /// # Examples
    ///
    /// See [`SessionSlot`].
    pub fn live(&self) -> Option<L> {
        locked(&self.current).clone()
    }

    /// The session requests are made in now; a temporary `Unavailable` error between an
    /// ended session and the next.
    ///
    /// # Examples
    ///
    /// See [`SessionSlot`].
    pub fn current(&self) -> Result<L> {
        self.live().ok_or_else(|| {
            Error::new(
                ErrorKind::Unavailable,
                format!(
                    "the {} session ended and a new one is not open yet",
                    self.backend
                ),
            )
            .with_backend(self.backend)
            .temporary()
        })
    }

    /// Opens session `id` (`live`), connected and valid until `valid_until`: later
    /// requests are made in it.
    ///
    /// # Examples
    ///
    /// See [`SessionSlot`].
    pub fn open(&self, id: u64, live: L, valid_until: Instant) {
        *locked(&self.current) = Some(live);
        self.set(id, SessionState::Connected { valid_until });
    }

    /// Ends session `id`: reported expired (every grant of it turns `Lost`), and no request
    /// is made in it any more. Returns its handle if it was the current one, so the caller
    /// can close it.
    ///
    /// # Examples
    ///
    /// See [`SessionSlot`].
    pub fn end(&self, id: u64) -> Option<L> {
        let mut current = locked(&self.current);
        let open = self.sender.borrow().id == id;
        self.set(id, SessionState::Expired);
        match open {
            true => current.take(),
            false => None,
        }
    }

    /// Reports session `id` in `state` (sent only if it changed).
    ///
    /// # Examples
    ///
    /// ```
    /// use distlock_core::backend::{SessionSlot, SessionState};
    /// let now = tokio::time::Instant::now();
    /// let slot = SessionSlot::new("example", 1, (), now);
    /// slot.set(1, SessionState::suspended(now, now));
    /// assert!(matches!(slot.subscribe().borrow().state, SessionState::Suspended { .. }));
    /// ```
    pub fn set(&self, id: u64, state: SessionState) {
        self.sender.send_if_modified(|session| {
            let changed = session.id != id || session.state != state;
            *session = Session { id, state };
            changed
        });
    }

    /// The session's state, as the core follows it.
    ///
    /// # Examples
    ///
    /// See [`SessionSlot`].
    pub fn subscribe(&self) -> watch::Receiver<Session> {
        self.sender.subscribe()
    }

    /// The last deadline reported for session `id`, if it is the one reported and not
    /// expired.
    ///
    /// # Examples
    ///
    /// See [`SessionSlot::is_valid`].
    pub fn valid_until(&self, id: u64) -> Option<Instant> {
        let session = *self.sender.borrow();
        (session.id == id).then(|| session.valid_until()).flatten()
    }

    /// Whether session `id` is the one reported and surely valid now.
    ///
    /// # Examples
    ///
    /// ```
    /// use distlock_core::backend::SessionSlot;
    /// let now = tokio::time::Instant::now();
    /// let slot = SessionSlot::new("example", 1, (), now);
    /// assert!(!slot.is_valid(1), "its deadline is now");
    /// assert_eq!(slot.valid_until(2), None);
    /// ```
    pub fn is_valid(&self, id: u64) -> bool {
        self.valid_until(id)
            .is_some_and(|until| Instant::now() < until)
    }

    /// Tells the core that a grant of the session may be gone though the session lives:
    /// it then asks [`grant_lost`](super::Backend::grant_lost) of each grant.
    ///
    /// # Examples
    ///
    /// See [`LossFlag`].
    pub fn announce_loss(&self) {
        self.sender.send_modify(|_| {});
    }
}

/// Deletes a backend sent without knowing they were done (no answer, or the call dropped
/// halfway), to make again once the session answers, as Curator's guaranteed delete: a
/// release or cancel must not leave a node or key holding a lock, or a place in its queue,
/// for nobody while the session lives. `T` says what to delete.
///
/// A delete is noted before it is sent ([`PendingDeletes::note`]); while that first
/// attempt runs, the note is not due, so a retry never races the attempt (a release would
/// find its own node already gone). It becomes due when the attempt fails or is dropped,
/// and stays until [`PendingDeletes::done`] forgets it, so a retry cut short loses nothing.
///
/// # Examples
///
/// ```
/// use distlock_core::backend::PendingDeletes;
/// let pending = PendingDeletes::default();
/// let answered = pending.note(1, "/locks/a/n1");
/// assert!(pending.due(1).is_empty(), "not while its first attempt runs");
/// answered.done();
/// let unanswered = pending.note(1, "/locks/a/n2");
/// drop(unanswered);
/// let due = pending.due(1);
/// assert_eq!(due.len(), 1);
/// pending.done(due[0].0);
/// pending.note(2, "/locks/b/n1").keep();
/// pending.forget(2);
/// assert!(pending.due(2).is_empty());
/// ```
#[derive(Debug)]
pub struct PendingDeletes<T> {
    notes: Mutex<Vec<Note<T>>>,
}

#[derive(Debug)]
struct Note<T> {
    number: u64,
    session: u64,
    what: T,
    /// Whether a retry should make it (its first attempt is over).
    due: bool,
}

/// A delete noted before its first attempt: [`Attempt::done`] once answered; dropped (or
/// [`Attempt::keep`]), it is due for a retry.
#[derive(Debug)]
#[must_use = "a noted delete is due for a retry unless marked done"]
pub struct Attempt<'a, T> {
    pending: &'a PendingDeletes<T>,
    number: u64,
}

impl<T> Default for PendingDeletes<T> {
    fn default() -> Self {
        PendingDeletes {
            notes: Mutex::new(Vec::new()),
        }
    }
}

impl<T: Clone> PendingDeletes<T> {
    /// Notes `what` (of session `session`) as to be deleted, before the delete is sent.
    ///
    /// # Examples
    ///
    /// See [`PendingDeletes`].
    pub fn note(&self, session: u64, what: T) -> Attempt<'_, T> {
        static NUMBERS: AtomicU64 = AtomicU64::new(0);
        let number = NUMBERS.fetch_add(1, Ordering::Relaxed);
        locked(&self.notes).push(Note {
            number,
            session,
            what,
            due: false,
        });
        Attempt {
            pending: self,
            number,
        }
    }

    /// Forgets note `number`, whose delete was answered.
    ///
    /// # Examples
    ///
    /// See [`PendingDeletes`].
    pub fn done(&self, number: u64) {
        locked(&self.notes).retain(|note| note.number != number);
    }

    /// The deletes due in session `session`, with their notes' numbers.
    ///
    /// # Examples
    ///
    /// See [`PendingDeletes`].
    pub fn due(&self, session: u64) -> Vec<(u64, T)> {
        locked(&self.notes)
            .iter()
            .filter(|note| note.session == session && note.due)
            .map(|note| (note.number, note.what.clone()))
            .collect()
    }

    /// Drops the notes of session `session`, which ended (its deletes done by its end).
    ///
    /// # Examples
    ///
    /// See [`PendingDeletes`].
    pub fn forget(&self, session: u64) {
        locked(&self.notes).retain(|note| note.session != session);
    }
}

impl<T> Attempt<'_, T> {
    /// The delete was answered: forgets its note.
    ///
    /// # Examples
    ///
    /// See [`PendingDeletes`].
    pub fn done(self) {
        locked(&self.pending.notes).retain(|note| note.number != self.number);
    }

    /// The delete must be made again (it got no answer, or must linger): its note is due.
    ///
    /// # Examples
    ///
    /// See [`PendingDeletes`].
    pub fn keep(self) {}
}

impl<T> Drop for Attempt<'_, T> {
    fn drop(&mut self) {
        if let Some(note) = locked(&self.pending.notes)
            .iter_mut()
            .find(|note| note.number == self.number)
        {
            note.due = true;
        }
    }
}

/// Whether the store deleted one grant while its session lived (an operator removed its
/// ZooKeeper node or etcd key), as the backend's watch on the grant saw it. The grant keeps
/// the flag (answering [`grant_lost`](super::Backend::grant_lost) with
/// [`LossFlag::is_lost`]); the watch keeps a [`LossWatch`], which tells whether the grant
/// is still held at all. A release marks the flag first ([`LossFlag::releasing`]), so the
/// deletion it makes is not reported as a loss.
///
/// # Examples
///
/// ```
/// use distlock_core::backend::{LossFlag, SessionSlot};
/// let slot = SessionSlot::new("example", 1, (), tokio::time::Instant::now());
/// let flag = LossFlag::default();
/// let watch = flag.watch();
/// assert!(watch.is_held());
/// watch.report(&slot);
/// assert!(flag.is_lost());
///
/// let released = LossFlag::default();
/// let watch = released.watch();
/// released.releasing();
/// watch.report(&slot);
/// assert!(!released.is_lost(), "its own release, not a loss");
/// drop(released);
/// assert!(!watch.is_held());
/// ```
#[derive(Debug, Clone, Default)]
pub struct LossFlag(Arc<AtomicU8>);

/// The watch's side of a [`LossFlag`].
#[derive(Debug, Clone)]
pub struct LossWatch(Weak<AtomicU8>);

/// The states of a [`LossFlag`].
const HELD: u8 = 0;
const LOST: u8 = 1;
const RELEASING: u8 = 2;

impl LossFlag {
    /// Whether the grant was deleted while its session lived (and not by its release).
    ///
    /// # Examples
    ///
    /// See [`LossFlag`].
    pub fn is_lost(&self) -> bool {
        self.0.load(Ordering::Acquire) == LOST
    }

    /// The grant is being released: its deletion from now on is no loss.
    ///
    /// # Examples
    ///
    /// See [`LossFlag`].
    pub fn releasing(&self) {
        let _ = self
            .0
            .compare_exchange(HELD, RELEASING, Ordering::AcqRel, Ordering::Acquire);
    }

    /// The side the backend's watch on the grant keeps.
    ///
    /// # Examples
    ///
    /// See [`LossFlag`].
    pub fn watch(&self) -> LossWatch {
        LossWatch(Arc::downgrade(&self.0))
    }
}

impl LossWatch {
    /// Whether the grant is still held: neither dropped nor being released.
    ///
    /// # Examples
    ///
    /// See [`LossFlag`].
    pub fn is_held(&self) -> bool {
        self.0
            .upgrade()
            .is_some_and(|flag| flag.load(Ordering::Acquire) == HELD)
    }

    /// The grant was deleted: if it was held (not being released), marks it lost and tells
    /// the core, through `slot`, to look.
    ///
    /// # Examples
    ///
    /// See [`LossFlag`].
    pub fn report<L: Clone>(&self, slot: &SessionSlot<L>) {
        let Some(flag) = self.0.upgrade() else {
            return;
        };
        if flag
            .compare_exchange(HELD, LOST, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
        {
            slot.announce_loss();
        }
    }
}
