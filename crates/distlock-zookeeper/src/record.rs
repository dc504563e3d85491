//! What a distlock contender's node holds: who asks, for what, from where. Curator's and
//! kazoo's nodes hold other data (an address, an identifier); they show as foreign.

use distlock_core::backend::{HolderInfo, LockRequest, WaiterInfo};
use distlock_core::{HolderMeta, LockKind};
use serde::{Deserialize, Serialize};

use crate::names::{Contender, Role};

/// A contender's node data, as JSON.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Record {
    /// The owner.
    o: String,
    /// The kind of request, and for a semaphore its number of permits.
    k: String,
    #[serde(default)]
    l: u32,
    /// Host and process of the holder.
    h: String,
    p: u32,
    /// When the request was made (holder's clock, ms since the Unix epoch).
    a: u64,
}

impl Record {
    /// The record of `request`, as node data.
    pub(crate) fn of(request: &LockRequest) -> Vec<u8> {
        serde_json::to_vec(&Record {
            o: request.owner.as_str().to_owned(),
            k: request.kind.as_str().to_owned(),
            l: request.kind.limit(),
            h: request.meta.host.clone(),
            p: request.meta.pid,
            a: request.meta.acquired_at_unix_ms,
        })
        .unwrap_or_default()
    }

    /// The number of permits of the semaphore a distlock lease node with `data` belongs to.
    pub(crate) fn limit_of(data: &[u8]) -> Option<u32> {
        serde_json::from_slice::<Record>(data)
            .ok()
            .filter(|record| record.k == "semaphore")
            .map(|record| record.l)
    }

    /// What `data`, the node data of `contender`, says of its holder: our record, or a
    /// foreign contender described by its node name.
    fn read(contender: &Contender, data: &[u8]) -> (String, LockKind, HolderMeta) {
        let fallback_kind = match contender.role {
            Role::Exclusive if contender.name.contains("__WRIT__") => LockKind::Write,
            Role::Exclusive => LockKind::Mutex,
            Role::Shared => LockKind::Read,
        };
        match serde_json::from_slice::<Record>(data) {
            Ok(record) => (
                record.o,
                LockKind::parse(&record.k, record.l).unwrap_or(fallback_kind),
                HolderMeta {
                    host: record.h,
                    pid: record.p,
                    acquired_at_unix_ms: record.a,
                },
            ),
            Err(_) => (
                format!("foreign client (node {})", contender.name),
                fallback_kind,
                HolderMeta {
                    host: String::from_utf8_lossy(data).chars().take(64).collect(),
                    pid: 0,
                    acquired_at_unix_ms: 0,
                },
            ),
        }
    }

    /// `contender` as a holder whose grant's fencing token is `zxid` (its node's last write).
    pub(crate) fn holder(contender: &Contender, data: &[u8], zxid: i64) -> HolderInfo {
        let (owner, kind, meta) = Record::read(contender, data);
        HolderInfo {
            owner,
            kind,
            permits: 1,
            fencing_token: zxid.max(0) as u64,
            remaining_ms: None,
            meta,
        }
    }

    /// `contender` as a waiter.
    pub(crate) fn waiter(contender: &Contender, data: &[u8]) -> WaiterInfo {
        let (owner, kind, meta) = Record::read(contender, data);
        WaiterInfo {
            kind,
            permits: 1,
            owner,
            fair: true,
            meta,
        }
    }
}
