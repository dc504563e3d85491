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
    /// holder record) or shares (shared grants), or that have waiters. A
    /// foreign client's lock, a bare token, is not told from any other key: it is listed
    /// where distlock waiters queue behind it. With no prefix, every string key of the
    /// database is looked at (its first bytes, a page of keys a round trip); keys that are
    /// not UTF-8, or that change under the walk, are passed over.
    pub(super) async fn scan_names(
        &self,
        conn: &mut impl redis::aio::ConnectionLike,
    ) -> Result<Vec<String>> {
        let prefix = self.prefix.as_str();
        let mut names = Vec::new();
        for which in [Key::Queue, Key::Leases] {
            let pattern = LockKeys::companion_pattern(prefix, which);
            let mut cursor = Some(0);
            while let Some(at) = cursor {
                let (next, keys) = scan_step(conn, at, &pattern, None).await?;
                let named = keys
                    .iter()
                    .filter_map(|k| LockKeys::name_of_companion(prefix, which, k));
                names.extend(named.map(str::to_owned));
                cursor = next;
            }
        }
        let pattern = LockKeys::lock_pattern(prefix);
        let mut cursor = Some(0);
        while let Some(at) = cursor {
            let (next, keys) = scan_step(conn, at, &pattern, Some("string")).await?;
            let candidates: Vec<(&str, String)> = keys
                .iter()
                .filter_map(|k| Some((LockKeys::name_of_lock(prefix, k)?, k.clone())))
                .collect();
            if !candidates.is_empty() {
                let mut starts = redis::pipe();
                starts.ignore_errors();
                for (_, key) in &candidates {
                    let last = RECORD_START.len() - 1;
                    starts.cmd("GETRANGE").arg(key).arg(0).arg(last);
                }
                let starts: Vec<redis::Value> = starts
                    .query_async(conn)
                    .await
                    .map_err(redis_error("inspect"))?;
                for ((name, _), start) in candidates.iter().zip(starts) {
                    if matches!(&start, redis::Value::BulkString(b) if b == RECORD_START) {
                        names.push((*name).to_owned());
                    }
                }
            }
            cursor = next;
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

/// How many keys one `SCAN` step asks for.
const SCAN_PAGE: usize = 500;

/// One `SCAN` step from `cursor` over the keys matching `pattern` (of type `of_type`, if
/// given): the next cursor (`None` at the end) and the keys that are UTF-8.
async fn scan_step(
    conn: &mut impl redis::aio::ConnectionLike,
    cursor: u64,
    pattern: &str,
    of_type: Option<&str>,
) -> Result<(Option<u64>, Vec<String>)> {
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
    let (next, keys): (u64, Vec<Vec<u8>>) = command
        .query_async(conn)
        .await
        .map_err(redis_error("inspect"))?;
    let keys = keys
        .into_iter()
        .filter_map(|key| String::from_utf8(key).ok())
        .collect();
    Ok(((next != 0).then_some(next), keys))
}
