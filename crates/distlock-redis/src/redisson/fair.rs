//! Fair locks in Redisson's layout (`fair(true)`): Redisson's fair-lock queue beside the
//! lock's hash, a list of waiters' fields `redisson_lock_queue:{name}` and a sorted set of
//! their deadlines `redisson_lock_timeout:{name}`; the lock goes only to the waiter at the
//! head, and a release tells that waiter alone, on its own channel
//! `redisson_lock__channel:{name}:<field>`. A Java waiter keeps the deadline it set as it
//! queued (the wait ahead of it and a turn: Redisson's `fairLockWaitTimeout`, the URL's
//! `fair_wait_timeout`) and is dropped when it passes without a grant; distlock's waiters set theirs again at every poll, and keep a record of
//! when they were last heard from beside the queue, so one whose process died leaves it
//! within [`WAITER_LEASE`](super::WAITER_LEASE) of its last poll instead of stalling the
//! queue for the holder's lease.

use std::sync::LazyLock;

use distlock_core::Result;
use distlock_core::backend::LockRequest;
use redis::Script;

use super::{RedissonBackend, WAITER_LEASE, layout};
use crate::scripts::Call;

/// The queue's helpers, then the script that uses them.
pub(super) fn with_queue(body: &str) -> Script {
    Script::new(&[include_str!("../scripts/redisson_queue.lua"), body].join("\n"))
}

/// The fair lock's scripts.
struct Scripts {
    acquire: Script,
    leave: Script,
}

static SCRIPTS: LazyLock<Scripts> = LazyLock::new(|| Scripts {
    acquire: with_queue(include_str!("../scripts/redisson_fair_acquire.lua")),
    leave: with_queue(include_str!("../scripts/redisson_fair_cancel.lua")),
});

impl RedissonBackend {
    /// One try at a fair grant of `request` (holder `field`, distlock's `record` of it):
    /// the answer of the fair acquire script, as the plain one answers. With `queues`, a
    /// request not granted takes its place in the queue, or keeps it.
    pub(super) async fn try_fair(
        &self,
        request: &LockRequest,
        field: &str,
        record: String,
        queues: bool,
    ) -> Result<(i64, i64)> {
        let name = request.name.as_str();
        let (counter, records) = (layout::token_key(name), layout::records_key(name));
        let [queue, deadlines, heard] = layout::queue_keys(name);
        let keys = [name, &counter, &records, &queue, &deadlines, &heard];
        let mut acquire = Call::with_keys(&SCRIPTS.acquire, &keys);
        acquire
            .arg(request.ttl.as_millis() as u64)
            .arg(field)
            .arg(record)
            .arg(self.fair_turn.as_millis() as u64)
            .arg(u8::from(queues))
            .arg(WAITER_LEASE.as_millis() as u64)
            .arg(layout::channel(name));
        let conn = self.redis.conn_for(name);
        self.redis.invoke_on(conn, "acquire", &acquire).await
    }

    /// Takes `request`'s field out of the queue, as a Java waiter that gives up does (every
    /// waiter behind it moves up a turn; a free lock's new head is told). On failure it is
    /// only logged: the field not heard from again leaves the queue within
    /// [`WAITER_LEASE`](super::WAITER_LEASE).
    pub(super) async fn leave_queue(&self, request: &LockRequest) {
        let name = request.name.as_str();
        let [queue, deadlines, heard] = layout::queue_keys(name);
        let mut leave = Call::with_keys(&SCRIPTS.leave, &[name, &queue, &deadlines, &heard]);
        leave
            .arg(layout::field(&self.uuid, &request.token))
            .arg(self.fair_turn.as_millis() as u64)
            .arg(layout::channel(name));
        let conn = self.redis.conn_for(name);
        let left: Result<i64> = self.redis.invoke_on(conn, "cancel", &leave).await;
        if let Err(err) = left {
            tracing::debug!(error = %err, lock = %name, "cannot leave a Redisson fair lock's queue");
        }
    }
}
