//! What a request's ticket (and, once granted, its grant) remembers of its key.

use std::sync::{Arc, Weak};

use distlock_core::backend::{
    EntryWatch, Grant, HolderRecord, LockRequest, LossFlag, LossWatch, Ticket, watch_entry,
};
use distlock_core::{Error, ErrorKind, Result};

use crate::session::Sessions;
use crate::watch::{Deletion, Stood, deleted, went_since_listing};

/// A request's state.
#[derive(Debug)]
pub(crate) struct Request {
    /// The prefix of its lock's contender keys: `<prefix>/<name>/`.
    pub(crate) pfx: String,
    /// What its key holds: the request's record, encoded once.
    pub(crate) value: Vec<u8>,
    /// Its contender key, once taken.
    pub(crate) key: Option<Key>,
    /// What it waits for.
    pub(crate) blocker: Option<Deletion>,
    /// Whether its last wait ended because what it waited for went: its next poll will
    /// likely grant, and stamps its key in the same transaction.
    pub(crate) likely: bool,
    /// Set, once granted, when its key is deleted or taken over (by anyone).
    pub(crate) gone: LossFlag,
}

/// A request's contender key.
#[derive(Debug, Clone)]
pub(crate) struct Key {
    pub(crate) name: String,
    /// The session (and lease) it lives on.
    pub(crate) session: u64,
    /// Its create revision; 0 until a transaction that made it was answered.
    pub(crate) created: i64,
    /// The revision of the write that granted it (its fencing token), which it keeps
    /// while held: nothing writes a held key but an adoption, which takes it over. 0 until
    /// granted.
    pub(crate) granted: i64,
}

impl Request {
    /// State for `request`, on the lock whose contender keys start with `pfx`.
    pub(crate) fn new(pfx: String, request: &LockRequest) -> Request {
        Request {
            pfx,
            // An exclusive grant can be handed off: its record holds the token an adoption
            // compares.
            value: match request.kind.is_exclusive() {
                true => HolderRecord::encode_adoptable(request),
                false => HolderRecord::encode(request),
            },
            key: None,
            blocker: None,
            likely: false,
            gone: LossFlag::default(),
        }
    }

    /// Whether the grant's key was deleted, or taken over, while its session lived.
    pub(crate) fn lost(grant: &Grant) -> bool {
        grant
            .state::<Request>()
            .is_some_and(|request| request.gone.is_lost())
    }

    /// Watches `key`, this grant's key, from the revision that granted it on, until it is
    /// deleted (by its holder's release, or by someone else: an operator, `etcdctl del`),
    /// written again (adopted by another request), or its session ends. A deletion or a
    /// write marks the grant gone and tells the core, which turns the guard
    /// `Lost` unless it was released. The watch is set shortly after the grant, and only
    /// if the grant is still held then, so a short hold costs the server nothing more; a
    /// deletion in the meantime is still seen, the key's create revision being read once
    /// the watch stands.
    pub(crate) fn watch_grant(&self, sessions: &Arc<Sessions>, key: &Key) {
        let what = Deletion {
            key: key.name.clone(),
            after: key.granted,
            stood: Stood::Key {
                created: key.created,
                granted: Some(key.granted),
            },
        };
        let (sessions, gone) = (Arc::downgrade(sessions), self.gone.watch());
        crate::runtime::SESSIONS.spawn(watch_key(sessions, key.session, what, gone));
    }
}

/// Watches `what`, a grant's key in `session`, until it is deleted (a loss to report),
/// the grant is released, or the session ends (which loses the grant through the session
/// channel).
async fn watch_key(sessions: Weak<Sessions>, session: u64, what: Deletion, gone: LossWatch) {
    let watched = sessions.clone();
    let deleted = watch_entry(gone.clone(), move || {
        watch_once(watched.clone(), session, what.clone())
    })
    .await;
    if let Some(sessions) = sessions.upgrade().filter(|_| deleted) {
        gone.report(&sessions.slot);
    }
}

/// One watch on `what`, a grant's key in `session`: what it saw.
async fn watch_once(sessions: Weak<Sessions>, session: u64, what: Deletion) -> EntryWatch {
    let Some(this) = sessions.upgrade() else {
        return EntryWatch::Over;
    };
    if this.slot.live().is_none_or(|live| live.id != session) {
        return EntryWatch::Over;
    }
    let (client, watches) = (this.client().clone(), this.watches.clone());
    let mut states = this.slot.subscribe();
    drop(this);
    let ended = states.wait_for(|s| s.id != session || s.valid_until().is_none());
    let watched = tokio::select! {
        _ = ended => return EntryWatch::Over,
        watched = deleted(&watches, &client, &what) => watched,
    };
    match watched {
        Ok(true) => EntryWatch::Deleted,
        // A watch that fell behind compaction: is the key still there? Watch on.
        Ok(false) => match went_since_listing(&client, &what).await {
            Ok(true) => EntryWatch::Deleted,
            Ok(false) => EntryWatch::Again,
            Err(_) => EntryWatch::Failed,
        },
        // A watch this client may not set (no read permission): the grant goes unwatched
        // rather than asked again forever.
        Err(err) if !err.is_temporary() => {
            tracing::warn!(key = %what.key, error = %err, "cannot watch a held lock's key; a deletion by someone else will not be noticed");
            EntryWatch::Over
        }
        Err(_) => EntryWatch::Failed,
    }
}

/// The backend state of `ticket`, which `enqueue` made.
pub(crate) fn request_mut(ticket: &mut Ticket) -> Result<&mut Request> {
    ticket.state_mut::<Request>().ok_or_else(|| {
        Error::new(
            ErrorKind::Backend,
            "an etcd ticket was polled before it was enqueued",
        )
        .with_backend("etcd")
    })
}
