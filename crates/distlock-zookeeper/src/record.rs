//! What a distlock contender's node holds: who asks, for what, from where. Curator's and
//! kazoo's nodes hold other data (an address, an identifier); they show as foreign.

use std::collections::HashMap;
use std::sync::Mutex;

use distlock_core::backend::{HolderInfo, HolderRecord, WaiterInfo};
use distlock_core::{HolderMeta, LockKind};

use crate::names::{Contender, Role};

/// What distlock's contender nodes hold: each request's [`HolderRecord`].
pub(crate) struct Record;

impl Record {
    /// The number of permits of the semaphore a distlock lease node with `data` belongs to.
    pub(crate) fn limit_of(data: &[u8]) -> Option<u32> {
        match HolderRecord::decode(data)?.kind {
            LockKind::Semaphore { limit } => Some(limit),
            _ => None,
        }
    }

    /// What `data`, the node data of `contender`, says of its holder: our record, or a
    /// foreign contender described by its node name.
    fn read(contender: &Contender, data: &[u8]) -> HolderRecord {
        HolderRecord::decode(data).unwrap_or_else(|| HolderRecord {
            owner: format!("foreign client (node {})", contender.name),
            kind: match contender.role {
                Role::Exclusive if contender.name.contains("__WRIT__") => LockKind::Write,
                Role::Exclusive => LockKind::Mutex,
                Role::Shared => LockKind::Read,
            },
            permits: 1,
            meta: HolderMeta {
                host: String::from_utf8_lossy(data).chars().take(64).collect(),
                pid: 0,
                acquired_at_unix_ms: 0,
            },
            fencing_token: None,
        })
    }

    /// `contender` as a holder: its grant's fencing token is the one its record holds, else
    /// `zxid` (its node's last write).
    pub(crate) fn holder(contender: &Contender, data: &[u8], zxid: i64) -> HolderInfo {
        let record = Record::read(contender, data);
        let token = record.fencing_token.unwrap_or(zxid.max(0) as u64);
        let mut holder = HolderInfo::new(record.owner, record.kind, token);
        holder.meta = record.meta;
        holder
    }

    /// `contender` as a waiter.
    pub(crate) fn waiter(contender: &Contender, data: &[u8]) -> WaiterInfo {
        let record = Record::read(contender, data);
        let mut waiter = WaiterInfo::new(record.owner, record.kind);
        waiter.fair = true;
        waiter.meta = record.meta;
        waiter
    }
}

/// The fencing tokens of this client's grants that their nodes' records may not show yet
/// (written [`RECORD_AFTER`](crate::request::RECORD_AFTER) after the grant), by node path, for as long as each grant is held:
/// `status` asked by this client shows its own grants' tokens from here.
#[derive(Debug, Default)]
pub(crate) struct Unrecorded(Mutex<HashMap<String, (u64, u64)>>);

impl Unrecorded {
    /// The grant whose node is `path`, made in `session`, has fencing token `token`. The
    /// grants of sessions other than `live` (the one that serves now), all lost, are
    /// forgotten.
    pub(crate) fn note(&self, path: &str, session: u64, token: u64, live: u64) {
        let mut tokens = self.lock();
        tokens.retain(|_, (made_in, _)| *made_in == live);
        tokens.insert(path.to_owned(), (session, token));
    }

    /// The grant whose node is `path` is over.
    pub(crate) fn forget(&self, path: &str) {
        self.lock().remove(path);
    }

    /// The fencing token of this client's grant whose node is `path`, if noted.
    pub(crate) fn token(&self, path: &str) -> Option<u64> {
        self.lock().get(path).map(|(_, token)| *token)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, (u64, u64)>> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}
