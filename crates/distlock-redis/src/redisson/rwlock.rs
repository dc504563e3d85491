//! Read-write locks in Redisson's layout (Java's `getReadWriteLock`): one hash under the
//! lock's name with its `mode` (`read` or `write`), each reader's field
//! `<uuid>:<thread id>` and the writer's `<uuid>:<thread id>:write` with their hold counts;
//! each read hold has a key `{name}:<field>:rwlock_timeout:<n>` whose TTL is its lease,
//! and the hash lives as long as the longest of them. A release is published on
//! `redisson_rwlock:{name}` (`0` by the last reader's, `1` by the writer's). Java's write
//! unlock counts the hash's fields, so distlock keeps its records of holders in a hash
//! beside it, and of its waiting writers in a sorted set beside it: distlock's readers
//! let a waiting distlock writer go first (Java's readers, which never read that set, do
//! not; Redisson's read lock has no such rule).

use std::sync::LazyLock;
use std::time::Duration;

use distlock_core::backend::{Grant, LeaseOutcome, LockRequest, WAITER_REFRESH};
use distlock_core::{Error, LockKind, Result, random_id};
use redis::Script;

use super::{LATCH_KEEP, LayoutScript, Recorded, RedissonBackend, Tried, WAITER_LEASE, layout};
use crate::record::RequestRecord;
use crate::scripts::Call;

/// The read-write lock's scripts.
struct Scripts {
    acquire: LayoutScript,
    release: LayoutScript,
    renew: Script,
    forget_writer: LayoutScript,
}

static SCRIPTS: LazyLock<Scripts> = LazyLock::new(|| Scripts {
    acquire: super::acquire_script(&[], include_str!("../scripts/redisson_rw_acquire.lua")),
    release: LayoutScript::new(include_str!("../scripts/redisson_rw_release.lua")),
    renew: Script::new(include_str!("../scripts/redisson_rw_renew.lua")),
    forget_writer: LayoutScript::new(include_str!("../scripts/redisson_rw_forget_writer.lua")),
});

/// A hold's field in the lock's hash (a writer's ends in `:write`), and what the scripts
/// call its kind.
fn field_of(uuid: &str, token: &str, kind: LockKind) -> (String, &'static str) {
    let field = layout::field(uuid, token);
    match kind {
        LockKind::Write => (layout::writer_field(&field), "write"),
        _ => (field, "read"),
    }
}

impl RedissonBackend {
    /// One try at a read or write hold of `request`; a writer that waits records itself
    /// as waiting, so distlock's readers let it go first.
    pub(super) async fn try_rw(&self, request: &LockRequest, recorded: &Recorded) -> Result<Tried> {
        let name = request.name.as_str();
        let (field, kind) = field_of(&self.uuid, &request.token, request.kind);
        let counter = layout::token_key(name);
        let (records, writers) = (layout::holders_key(name), layout::writers_key(name));
        let hold = layout::read_hold_key(name, &field);
        let channel = layout::rw_channel(name);
        let keys = recorded.keys(&[name, &counter, &records, &writers, &hold, &channel]);
        let mut acquire = Call::with_keys(self.script(&SCRIPTS.acquire), &keys);
        acquire
            .arg(request.ttl.as_millis() as u64)
            .arg(&field)
            .arg(kind)
            .arg(RequestRecord::of(request).to_json()?)
            .arg(u8::from(request.wait))
            .arg(&request.token)
            .arg(WAITER_LEASE.as_millis() as u64)
            .arg(&recorded.token);
        let conn = self.redis.conn_for(name);
        let answer: Vec<i64> = self.redis.invoke_on(conn, "acquire", &acquire).await?;
        match answer[..] {
            [1, token, ..] => Ok(Tried::Granted(token.max(0) as u64)),
            [0, -1, ..] => Ok(Tried::Busy(None)),
            // Free, or read, but a distlock writer waits: behind it, until its record ends.
            [0, -3, until] => Ok(Tried::Busy(Some(
                Duration::from_millis(until.max(1) as u64).min(WAITER_REFRESH),
            ))),
            [0, left, ..] => Ok(Tried::Busy(Some(Duration::from_millis(left.max(1) as u64)))),
            [-2, ..] => Err(Error::invalid(format!(
                "the key `{name}` is a Redisson lock, not a read-write lock: a client uses this name as RLock"
            ))
            .with_backend("redis")
            .with_operation("acquire")),
            _ => Err(super::not_a_lock_hash(name)),
        }
    }

    /// A writer that stops waiting takes its record out of the waiting writers, and
    /// tells distlock's readers waiting behind it when it was the last.
    pub(super) async fn forget_writer(&self, request: &LockRequest) {
        let name = request.name.as_str();
        let (writers, channel) = (layout::writers_key(name), layout::rw_channel(name));
        let keys = [writers.as_str(), name, &channel];
        let mut forget = Call::with_keys(self.script(&SCRIPTS.forget_writer), &keys);
        forget.arg(&request.token);
        let conn = self.redis.conn_for(name);
        let forgotten: Result<i64> = self.redis.invoke_on(conn, "cancel", &forget).await;
        if let Err(err) = forgotten {
            // Its record ends by itself within a waiter's lease.
            tracing::debug!(error = %err, lock = %name, "cannot drop a waiting writer's record");
        }
    }

    /// Renews one read or write hold. A read hold is never leased past the Java clients'
    /// watchdog timeout (a renewal that would, such as a `release_at` further out, is
    /// refused: the hash could end before it).
    pub(super) async fn renew_rw(&self, grant: &Grant, ttl: Duration) -> Result<LeaseOutcome> {
        if grant.kind == LockKind::Read && ttl > self.lease {
            return Err(super::read_lease_too_long(self.lease));
        }
        let name = grant.name.as_str();
        let (field, kind) = field_of(&self.uuid, &grant.token, grant.kind);
        let records = layout::holders_key(name);
        let hold = layout::read_hold_key(name, &field);
        let mut renew = Call::with_keys(&SCRIPTS.renew, &[name, &records, &hold]);
        renew.arg(&field).arg(ttl.as_millis() as u64).arg(kind);
        self.run_renewal(name, &renew).await
    }

    /// Unlocks a read or write hold as Redisson does, under a latch of its own.
    pub(super) async fn release_rw(&self, grant: &Grant) -> Result<LeaseOutcome> {
        let name = grant.name.as_str();
        let (field, kind) = field_of(&self.uuid, &grant.token, grant.kind);
        let channel = layout::rw_channel(name);
        let latch = layout::unlock_latch(name, &format!("{}{}", random_id(), random_id()));
        let records = layout::holders_key(name);
        let hold = layout::read_hold_key(name, &field);
        let keys = [name, &channel, &latch, &records, &hold];
        let mut release = Call::with_keys(self.script(&SCRIPTS.release), &keys);
        release
            .arg(&field)
            .arg(kind)
            .arg(LATCH_KEEP.as_millis() as u64)
            .arg(layout::hold_prefix(name));
        self.run_release(name, &release).await
    }
}
