//! What a RedLock asks of each of its masters beyond the calls every Redis lock makes: its
//! waiters' records, for `status`, and the stamp of a grant's token.

use std::time::Duration;

use distlock_core::backend::LockRequest;
use distlock_core::{Result, WaiterInfo};

use super::RedisBackend;
use crate::error::redis_error;
use crate::keys::Key;
use crate::record::{self, RequestRecord, WaitingSnapshot};
use crate::scripts::{Call, SCRIPTS};

impl RedisBackend {
    /// Records RedLock waiter `request` (waiting since `since_ms`) for `lease`, or with
    /// `lease` `None` removes its record. The records are for `status` only.
    pub(crate) async fn note_redlock_waiter(
        &self,
        request: &LockRequest,
        since_ms: u64,
        lease: Option<Duration>,
    ) -> Result<()> {
        let keys = self.keys(&request.name)?;
        let record = match lease {
            Some(lease) => (
                RequestRecord::of(request).waiter_json(since_ms, lease, request.fair)?,
                lease.as_millis() as u64,
            ),
            None => (String::new(), 0),
        };
        let waiting_keys = [Key::RedlockWaiting, Key::RedlockWaitingInfo];
        let mut note = Call::new(&SCRIPTS.redlock_waiting, keys, &waiting_keys);
        note.arg(&request.token).arg(record.1).arg(record.0);
        let _: u64 = self.invoke(&request.name, "acquire", &note).await?;
        Ok(())
    }

    /// The live RedLock waiters of lock `name`, by request token.
    pub(crate) async fn redlock_waiters(&self, name: &str) -> Result<Vec<(String, WaiterInfo)>> {
        let keys = self.keys(name)?;
        let mut conn = self.conn_for(name);
        let snapshot: WaitingSnapshot = redis::pipe()
            .cmd("TIME")
            .zrange_withscores(keys.named(Key::RedlockWaiting), 0, -1)
            .hgetall(keys.named(Key::RedlockWaitingInfo))
            .query_async(&mut conn)
            .await
            .map_err(redis_error("inspect"))?;
        Ok(record::live_waiters(snapshot))
    }

    /// Stamps the grant under request `token` of lock `name` with fencing token `token_value`
    /// (RedLock): the counter is raised to it, and the holder record shows it.
    pub(crate) async fn restamp(&self, name: &str, token: &str, token_value: u64) -> Result<()> {
        let keys = self.keys(name)?;
        let mut stamp = Call::new(&SCRIPTS.restamp, keys, &[Key::Fence, Key::Lock]);
        stamp.arg(token_value).arg(token).arg(self.fence_ttl_ms);
        let _: u64 = self.invoke(name, "acquire", &stamp).await?;
        Ok(())
    }
}
