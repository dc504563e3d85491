//! What `status` reads of a Redis lock: the names with a fencing counter, and one lock's
//! whole state in one round trip.

use distlock_core::{LockState, Result};

use super::RedisBackend;
use crate::error::redis_error;
use crate::keys::{Key, LockKeys};
use crate::record::{self, Snapshot};

impl RedisBackend {
    /// The names of the locks with a fencing counter matching `pattern`, on one server.
    pub(super) async fn scan_names(
        &self,
        conn: &mut impl redis::aio::ConnectionLike,
        pattern: &str,
    ) -> Result<Vec<String>> {
        let mut names = Vec::new();
        let mut cursor: u64 = 0;
        loop {
            let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
                .arg(cursor)
                .arg("MATCH")
                .arg(pattern)
                .arg("COUNT")
                .arg(500)
                .query_async(conn)
                .await
                .map_err(redis_error("inspect"))?;
            names.extend(
                keys.iter()
                    .filter_map(|k| LockKeys::name_of_fence(&self.prefix, k))
                    .map(str::to_owned),
            );
            if next == 0 {
                return Ok(names);
            }
            cursor = next;
        }
    }

    pub(super) async fn state_of(&self, name: &str) -> Result<LockState> {
        let keys = self.keys(name)?;
        let err = redis_error("inspect");
        let mut conn = self.conn_for(name);
        let snapshot: Snapshot = redis::pipe()
            .get(keys.named(Key::Lock))
            .pttl(keys.named(Key::Lock))
            .get(keys.named(Key::Fence))
            .hgetall(keys.named(Key::Waiters))
            .zrange(keys.named(Key::Queue), 0, -1)
            .cmd("TIME")
            .zrange_withscores(keys.named(Key::Leases), 0, -1)
            .hgetall(keys.named(Key::LeaseInfo))
            .query_async(&mut conn)
            .await
            .map_err(&err)?;
        Ok(record::lock_state(name, snapshot))
    }
}
