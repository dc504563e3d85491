//! What `status` reads of a lock in Redisson's layout: its hash (each holder's
//! `<uuid>:<thread id>` and hold count; a read-write lock's `mode` and writer's
//! `<uuid>:<thread id>:write`), the hash's TTL and the counter of grants, and distlock's
//! records of its own holders and waiters. A Java holder shows as its field,
//! hold count and TTL (the layout records no host or process); a distlock guard as its
//! record says (owner, host, process, token), with its field.

use std::collections::HashMap;

use distlock_core::{Error, ErrorKind, HolderInfo, LockKind, LockState, Result, WaiterInfo};

use super::RedissonBackend;
use super::layout;
use crate::error::redis_error;
use crate::record;

/// The most hold keys of one reader that `status` reads.
const MAX_HOLDS_READ: usize = 64;

/// A lock hash read with distlock's records in one round trip: the hash's fields (holders
/// and hold counts, and distlock's records of its holders), distlock's records of a
/// read-write lock's holders, the server's time, the waiters' record expiries and
/// records, and the fair lock's queue.
type Snapshot = (
    Vec<(String, String)>,
    HashMap<String, String>,
    (u64, u64),
    Vec<(String, f64)>,
    HashMap<String, String>,
    Vec<String>,
);

impl RedissonBackend {
    /// Lock `name`'s state.
    pub(super) async fn state_of(&self, name: &str) -> Result<LockState> {
        let mut conn = self.redis.conn_for(name);
        let err = redis_error("inspect");
        let (kind, left, counter): (String, i64, Option<u64>) = redis::pipe()
            .cmd("TYPE")
            .arg(name)
            .pttl(name)
            .get(layout::token_key(name))
            .query_async(&mut conn)
            .await
            .map_err(&err)?;
        let mut state = LockState::new(name);
        state.last_fencing_token = counter.unwrap_or(0);
        match kind.as_str() {
            // A free lock may still have waiters: a fair queue's head yet to claim it.
            "none" | "hash" => {}
            "string" => {
                return self.semaphore_state(name, state.last_fencing_token).await;
            }
            other => {
                return Err(Error::new(
                    ErrorKind::Backend,
                    format!(
                        "the key `{name}` holds a {other}, not a Redisson lock hash: a client of another layout uses this name"
                    ),
                )
                .with_backend("redis")
                .with_operation("inspect"));
            }
        }
        let [waiting, waiting_info] = layout::waiting_keys(name);
        let [fair_queue, ..] = layout::queue_keys(name);
        let rw_records = layout::holders_key(name);
        let (fields, rw_records, time, queue, waiters, fair_queue): Snapshot = redis::pipe()
            .hgetall(name)
            .hgetall(&rw_records)
            .cmd("TIME")
            .zrange_withscores(&waiting, 0, -1)
            .hgetall(&waiting_info)
            .lrange(&fair_queue, 0, -1)
            .query_async(&mut conn)
            .await
            .map_err(&err)?;
        let (records, mut fields): (Vec<_>, Vec<_>) = fields
            .into_iter()
            .partition(|(field, _)| field.ends_with(layout::RECORD_SUFFIX));
        let records: HashMap<String, String> = records.into_iter().collect();
        let record_of = |field: &str| {
            records
                .get(&layout::record_field(field))
                .or_else(|| rw_records.get(field))
        };
        // A read-write lock's hash says its mode; its fields are the readers' and the
        // writer's.
        let mode = fields
            .iter()
            .position(|(field, _)| field == "mode")
            .map(|at| fields.remove(at).1);
        // A reader's holds end with their keys, the hash with the longest of them.
        let lefts = match mode.as_deref() {
            Some("read") => self.read_holds_left(name, &fields).await?,
            _ => vec![left; fields.len()],
        };
        state.holders = fields
            .iter()
            .zip(lefts)
            .map(|((field, count), left)| match record_of(field) {
                // distlock's grant, with its record; a Java holder has none.
                Some(record) if count == "1" => {
                    let mut holder = record::holder_of(record, left);
                    holder.stored_as = Some(field.clone());
                    holder
                }
                _ => {
                    // Redisson's read-write lock counts no tokens; its fenced lock does.
                    let token = match mode {
                        Some(_) => 0,
                        None => state.last_fencing_token,
                    };
                    holder(field, count, left, kind_of(mode.as_deref(), field), token)
                }
            })
            .collect();
        let waiters = record::live_waiters((time, queue, waiters));
        state.waiters = in_queue_order(&fair_queue, waiters);
        Ok(state)
    }

    /// How long each reader of read-write lock `name` (its `fields` and hold counts) holds
    /// on: the longest TTL among its hold keys, as PTTL answers it.
    async fn read_holds_left(&self, name: &str, fields: &[(String, String)]) -> Result<Vec<i64>> {
        let prefix = layout::hold_prefix(name);
        let mut pipe = redis::pipe();
        let mut holds = Vec::with_capacity(fields.len());
        for (field, count) in fields {
            // At most the holds a reader could take in a status's time: a count beyond is
            // no hold count a client wrote.
            let count = count.parse::<usize>().unwrap_or(0).min(MAX_HOLDS_READ);
            for n in 1..=count {
                pipe.pttl(format!("{prefix}:{field}:rwlock_timeout:{n}"));
            }
            holds.push(count);
        }
        if holds.iter().all(|&count| count == 0) {
            return Ok(vec![-2; fields.len()]);
        }
        let mut conn = self.redis.conn_for(name);
        let lefts: Vec<i64> = pipe
            .query_async(&mut conn)
            .await
            .map_err(redis_error("inspect"))?;
        let mut lefts = lefts.into_iter();
        debug_assert!(holds.iter().sum::<usize>() == lefts.len());
        Ok(holds
            .into_iter()
            .map(|count| lefts.by_ref().take(count).max().unwrap_or(-2))
            .collect())
    }

    /// Every lock hash on the server that some holder holds (distlock's records are hashes
    /// too, but not locks), and every semaphore distlock has recorded holders of.
    pub(super) async fn all_states(&self) -> Result<Vec<LockState>> {
        let mut names = Vec::new();
        let mut recorded = Vec::new();
        for key in self.scan_hashes().await? {
            match layout::name_of_holders_key(&key) {
                None => names.push(key),
                Some(name) => recorded.push(name),
            }
        }
        let mut conn = self.redis.any_conn();
        for name in recorded {
            let kind: String = redis::cmd("TYPE")
                .arg(&name)
                .query_async(&mut conn)
                .await
                .map_err(redis_error("inspect"))?;
            if kind == "string" {
                names.push(name);
            }
        }
        names.sort();
        names.dedup();
        // Another program's hash whose braces hold no hash tag has no Redisson lock's keys
        // in its slot.
        if self.redis.is_cluster() {
            names.retain(|name| layout::fits_one_slot(name));
        }
        let mut states = Vec::new();
        for name in names {
            let state = self.state_of(&name).await?;
            if is_lock(&state) {
                states.push(state);
            }
        }
        Ok(states)
    }

    /// The names of every hash on the server (on every primary of a cluster).
    async fn scan_hashes(&self) -> Result<Vec<String>> {
        let mut names = Vec::new();
        for mut server in self.redis.key_servers().await? {
            names.extend(scan_hashes_on(&mut server).await?);
        }
        Ok(names)
    }
}

/// The names of every hash on one server.
async fn scan_hashes_on(conn: &mut impl redis::aio::ConnectionLike) -> Result<Vec<String>> {
    let err = redis_error("inspect");
    let mut names = Vec::new();
    let mut cursor: u64 = 0;
    loop {
        let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("COUNT")
            .arg(500)
            .arg("TYPE")
            .arg("hash")
            .query_async(conn)
            .await
            .map_err(&err)?;
        names.extend(keys);
        if next == 0 {
            return Ok(names);
        }
        cursor = next;
    }
}

/// The waiters in the fair lock's queue in its order, each as distlock's record of it
/// says or, without one, as its field (a Java waiter: the queue records no more), then
/// distlock's other waiters. A record is matched to a field by its thread id, which is
/// drawn from the request's token.
fn in_queue_order(queue: &[String], mut ours: Vec<(String, WaiterInfo)>) -> Vec<WaiterInfo> {
    let mut ordered = Vec::with_capacity(queue.len() + ours.len());
    for field in queue {
        let thread = layout::holder(field).map(|(_, thread)| thread);
        let record = ours
            .iter()
            .position(|(token, _)| thread == Some(layout::thread_of(token)));
        ordered.push(match record {
            Some(at) => ours.remove(at).1,
            None => java_waiter(field),
        });
    }
    ordered.extend(ours.into_iter().map(|(_, waiter)| waiter));
    ordered
}

/// A fair waiter known by its field alone.
fn java_waiter(field: &str) -> WaiterInfo {
    let mut waiter = WaiterInfo::new(field, LockKind::Mutex);
    waiter.fair = true;
    waiter.meta = record::unknown_meta();
    waiter
}

/// Whether a hash's state reads as a lock's: every field a holder with a hold count.
fn is_lock(state: &LockState) -> bool {
    !state.holders.is_empty() && state.holders.iter().all(|h| h.permits > 0)
}

/// What a holder's field holds: a mutex, or in a read-write lock (its hash has a `mode`)
/// the write lock (the writer's field ends in `:write`) or a read hold.
fn kind_of(mode: Option<&str>, field: &str) -> LockKind {
    match (mode, field.ends_with(layout::WRITER_SUFFIX)) {
        (None, _) => LockKind::Mutex,
        (Some(_), true) => LockKind::Write,
        (Some(_), false) => LockKind::Read,
    }
}

/// The holder of `kind` a field of the hash and its hold count stand for (no hold count:
/// not a holder, `permits` 0). `left` is the hash's TTL as PTTL answered it.
fn holder(field: &str, count: &str, left: i64, kind: LockKind, token: u64) -> HolderInfo {
    let held = count
        .parse::<u32>()
        .ok()
        .filter(|_| layout::holder(field).is_some());
    let owner = match held {
        Some(1) | None => field.to_owned(),
        Some(times) => format!("{field} (held {times} times)"),
    };
    let mut holder = HolderInfo::new(owner, kind, token);
    holder.permits = held.unwrap_or(0);
    holder.remaining_ms = (left > 0).then_some(left as u64);
    holder.no_expiry = left == -1;
    holder.meta = record::unknown_meta();
    holder
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holders_show_their_field_and_hold_count() {
        let java = holder(
            "0d3c9e4e-1c51-4c05-8d7f-3d3f9b5c2a10:57",
            "2",
            1_500,
            LockKind::Mutex,
            9,
        );
        assert_eq!(
            java.owner,
            "0d3c9e4e-1c51-4c05-8d7f-3d3f9b5c2a10:57 (held 2 times)"
        );
        assert_eq!(
            (java.permits, java.remaining_ms, java.fencing_token),
            (2, Some(1_500), 9)
        );
        let persistent = holder("u:1", "1", -1, LockKind::Mutex, 0);
        assert!(persistent.no_expiry && persistent.remaining_ms.is_none());
        let mut state = LockState::new("x");
        state.holders = vec![holder("u:1", "1", 10, LockKind::Mutex, 0)];
        assert!(is_lock(&state));
        state
            .holders
            .push(holder("name", "Ada", 10, LockKind::Mutex, 0));
        assert!(!is_lock(&state), "a hash of other data");
    }

    #[test]
    fn a_read_write_locks_fields_say_their_kind() {
        assert_eq!(kind_of(None, "u:1"), LockKind::Mutex);
        assert_eq!(kind_of(Some("read"), "u:1"), LockKind::Read);
        assert_eq!(kind_of(Some("write"), "u:1:write"), LockKind::Write);
        let writer = holder("u:1:write", "1", 10, LockKind::Write, 0);
        assert_eq!((writer.permits, writer.kind), (1, LockKind::Write));
    }

    #[test]
    fn fair_waiters_show_in_the_queues_order() {
        let token = "0123456789abcdef0123456789abcdef";
        let mut ours = WaiterInfo::new("rust owner", LockKind::Mutex);
        ours.fair = true;
        let plain = WaiterInfo::new("plain owner", LockKind::Mutex);
        let queue = ["java-uuid:5".to_owned(), layout::field("rust-uuid", token)];
        let waiters = in_queue_order(
            &queue,
            vec![("other".to_owned(), plain), (token.to_owned(), ours)],
        );
        let owners: Vec<&str> = waiters.iter().map(|w| w.owner.as_str()).collect();
        assert_eq!(owners, ["java-uuid:5", "rust owner", "plain owner"]);
        assert!(waiters[0].fair && waiters[0].meta.pid == 0);
    }
}
