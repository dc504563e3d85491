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

use std::time::Duration;

use distlock_core::Result;
use distlock_core::backend::{LockRequest, WAITER_REFRESH};

use super::{LayoutScript, Recorded, RedissonBackend, WAITER_LEASE, layout};
use crate::scripts::Call;

/// The queue's helpers.
const QUEUE: &str = include_str!("../scripts/redisson_queue.lua");

/// The queue's helpers, then the script that uses them.
pub(super) fn with_queue(body: &str) -> LayoutScript {
    LayoutScript::new(&[QUEUE, body].join("\n"))
}

/// The fair lock's scripts.
struct Scripts {
    acquire: LayoutScript,
    leave: LayoutScript,
}

static SCRIPTS: LazyLock<Scripts> = LazyLock::new(|| Scripts {
    acquire: super::acquire_script(
        &[QUEUE, super::GRANTS],
        include_str!("../scripts/redisson_fair_acquire.lua"),
    ),
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
        recorded: &Recorded,
    ) -> Result<(i64, i64)> {
        let name = request.name.as_str();
        let counter = layout::token_key(name);
        let [queue, deadlines, heard] = layout::queue_keys(name);
        let keys = recorded.keys(&[name, &counter, &queue, &deadlines, &heard]);
        let mut acquire = Call::with_keys(self.script(&SCRIPTS.acquire), &keys);
        acquire
            .arg(request.ttl.as_millis() as u64)
            .arg(field)
            .arg(layout::record_field(field))
            .arg(record)
            .arg(self.fair_turn.as_millis() as u64)
            .arg(u8::from(queues));
        liveness_args(&mut acquire)
            .arg(layout::channel(name))
            .arg(&recorded.token);
        let conn = self.redis.conn_for(name);
        self.redis.invoke_on(conn, "acquire", &acquire).await
    }

    /// Takes `request`'s field out of the queue, as a Java waiter that gives up does (every
    /// waiter behind it moves up a turn; a free lock's new head is told).
    pub(super) async fn leave_queue(&self, request: &LockRequest) -> Result<()> {
        let name = request.name.as_str();
        let [queue, deadlines, heard] = layout::queue_keys(name);
        let mut leave = Call::with_keys(
            self.script(&SCRIPTS.leave),
            &[name, &queue, &deadlines, &heard],
        );
        leave
            .arg(layout::field(&self.uuid, &request.token))
            .arg(self.fair_turn.as_millis() as u64);
        liveness_args(&mut leave).arg(layout::channel(name));
        let conn = self.redis.conn_for(name);
        let _: i64 = self.redis.invoke_on(conn, "cancel", &leave).await?;
        Ok(())
    }
}

/// Appends what tells a live distlock waiter in the queue from a gone one: how long it
/// counts as alive after a poll, and after how long without a poll a waiter that nobody
/// hears on its channel counts as gone (a poll is due every [`WAITER_REFRESH`] at most;
/// a waiter whose wake-up connection is down still polls, and keeps its place).
pub(super) fn liveness_args<'c, 'a>(call: &'c mut Call<'a>) -> &'c mut Call<'a> {
    call.arg(WAITER_LEASE.as_millis() as u64)
        .arg(UNHEARD_AFTER.as_millis() as u64)
}

/// How long after its last poll a distlock waiter nobody hears on its channel counts as
/// gone: a poll's longest gap and a margin.
const UNHEARD_AFTER: Duration = WAITER_REFRESH.saturating_add(Duration::from_millis(500));
