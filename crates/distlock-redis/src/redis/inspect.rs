//! What `status` reads of a Redis lock: the names held or waited for, and one lock's whole
//! state in one round trip.

use distlock_core::{LockState, Result};

use super::RedisBackend;
use crate::error::redis_error;
use crate::keys::{Key, LockKeys};
use crate::record::{self, Snapshot};

/// How our holder record starts, which tells our lock keys from other string keys.
const RECORD_START: &[u8] = br#"{"t":""#;

impl RedisBackend {
    /// The names of the locks on one server that distlock holds (a lock key with our
    /// holder record) or shares (shared grants) or that have waiters. A foreign client's
    /// lock, a bare token, is not told from any other key: it is listed where distlock
    /// waiters queue behind it.
    pub(super) async fn scan_names(
        &self,
        conn: &mut impl redis::aio::ConnectionLike,
    ) -> Result<Vec<String>> {
        let prefix = self.prefix.as_str();
        let mut names = Vec::new();
        for which in [Key::Queue, Key::Leases] {
            let pattern = LockKeys::companion_pattern(prefix, which);
            scan(conn, &pattern, None, |keys| {
                let named = keys
                    .iter()
                    .filter_map(|k| LockKeys::name_of_companion(prefix, which, k));
                names.extend(named.map(str::to_owned));
            })
            .await?;
        }
        let pattern = LockKeys::lock_pattern(prefix);
        let mut candidates = Vec::new();
        scan(conn, &pattern, Some("string"), |keys| {
            candidates.extend(
                keys.into_iter()
                    .filter(|k| LockKeys::name_of_lock(prefix, k).is_some()),
            );
        })
        .await?;
        for page in candidates.chunks(SCAN_PAGE) {
            let mut starts = redis::pipe();
            for key in page {
                starts
                    .cmd("GETRANGE")
                    .arg(key)
                    .arg(0)
                    .arg(RECORD_START.len() - 1);
            }
            let starts: Vec<Vec<u8>> = starts
                .query_async(conn)
                .await
                .map_err(redis_error("inspect"))?;
            for (key, start) in page.iter().zip(starts) {
                if start == RECORD_START {
                    names.extend(LockKeys::name_of_lock(prefix, key).map(str::to_owned));
                }
            }
        }
        Ok(names)
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

/// How many keys one `SCAN` step asks for, and one pipeline reads.
const SCAN_PAGE: usize = 500;

/// Walks the keys matching `pattern` (of type `of_type`, if given) with `SCAN`, handing
/// each step's keys to `step`.
async fn scan(
    conn: &mut impl redis::aio::ConnectionLike,
    pattern: &str,
    of_type: Option<&str>,
    mut step: impl FnMut(Vec<String>),
) -> Result<()> {
    let mut cursor: u64 = 0;
    loop {
        let mut command = redis::cmd("SCAN");
        command
            .arg(cursor)
            .arg("MATCH")
            .arg(pattern)
            .arg("COUNT")
            .arg(SCAN_PAGE);
        if let Some(of_type) = of_type {
            command.arg("TYPE").arg(of_type);
        }
        let (next, keys): (u64, Vec<String>) = command
            .query_async(conn)
            .await
            .map_err(redis_error("inspect"))?;
        step(keys);
        if next == 0 {
            return Ok(());
        }
        cursor = next;
    }
}
