//! What distlock stores in Redis about a request (JSON records), and what it reads back:
//! the acquire script's answer and a lock's state for `status`. Everything read here may
//! have been written by another client or by hand, so nothing in it may panic or be
//! trusted: a record that does not decode is a foreign holder or is left out, and
//! arithmetic on the server's numbers saturates.

use std::borrow::Cow;
use std::collections::HashMap;
use std::time::Duration;

use distlock_core::backend::LockRequest;
use distlock_core::{
    Error, ErrorKind, HolderInfo, HolderMeta, LockKind, LockState, Result, WaiterInfo,
};
use serde::{Deserialize, Serialize};

/// What a grant head ends with: the fencing token's field, opened.
const FENCE_OPENS: &str = ",\"f\":\"";

/// What the client tells the acquire script about a request; the script stores it as the
/// grant's record (appending the fencing token `f`) or, with its queue fields, as the
/// waiter's record. Written here so that every string in it is escaped by a JSON encoder,
/// and the scripts store a grant without decoding it. Large numbers are text.
#[derive(Serialize, Deserialize)]
pub(crate) struct RequestRecord<'a> {
    #[serde(default)]
    t: Cow<'a, str>,
    k: Cow<'a, str>,
    n: u32,
    l: u32,
    o: Cow<'a, str>,
    h: Cow<'a, str>,
    p: u32,
    #[serde(default)]
    a: Cow<'a, str>,
}

impl<'a> RequestRecord<'a> {
    pub(crate) fn of(request: &'a LockRequest) -> Self {
        RequestRecord {
            t: Cow::Borrowed(&request.token),
            k: Cow::Borrowed(request.kind.as_str()),
            n: request.permits,
            l: request.kind.limit(),
            o: Cow::Borrowed(request.owner.as_str()),
            h: Cow::Borrowed(&request.meta.host),
            p: request.meta.pid,
            a: Cow::Owned(request.meta.acquired_at_unix_ms.to_string()),
        }
    }

    pub(crate) fn to_json(&self) -> Result<String> {
        serde_json::to_string(self).map_err(|err| {
            Error::new(ErrorKind::Backend, "could not encode the holder record")
                .with_backend("redis")
                .with_source(err)
        })
    }

    /// The record as the acquire fast path takes it: the JSON object with its closing
    /// brace replaced by [`FENCE_OPENS`], for the script to complete with the fencing
    /// token and `"}` (it then reads as a [`HolderRecord`]).
    pub(crate) fn to_grant_head(&self) -> Result<String> {
        let mut head = self.to_json()?;
        head.pop();
        head.push_str(FENCE_OPENS);
        Ok(head)
    }

    /// The record ([`to_json`](Self::to_json)) made of its grant head, for the full
    /// script once the fast path did not apply.
    pub(crate) fn of_grant_head(mut head: String) -> String {
        head.truncate(head.len().saturating_sub(FENCE_OPENS.len()));
        head.push('}');
        head
    }

    /// The record of a waiter kept beside a layout without distlock's queue (RedLock's,
    /// Redisson's) waiting since `since_ms`, whose record lives for `lease`, and which
    /// waits in a fair queue or not, as JSON.
    pub(crate) fn waiter_json(&self, since_ms: u64, lease: Duration, fair: bool) -> Result<String> {
        let mut record = serde_json::to_value(self).map_err(|err| {
            Error::new(ErrorKind::Backend, "could not encode the waiter record")
                .with_backend("redis")
                .with_source(err)
        })?;
        let until = since_ms.saturating_add(lease.as_millis().try_into().unwrap_or(u64::MAX));
        record["s"] = since_ms.to_string().into();
        record["e"] = until.to_string().into();
        record["f"] = fair.into();
        Ok(record.to_string())
    }

    fn kind(&self) -> LockKind {
        LockKind::parse(&self.k, self.l).unwrap_or(LockKind::Mutex)
    }

    /// Where the request came from; `since_ms` is when it was granted or queued.
    fn meta(self, since_ms: u64) -> HolderMeta {
        HolderMeta {
            host: self.h.into_owned(),
            pid: self.p,
            acquired_at_unix_ms: since_ms,
        }
    }
}

/// How the holder record of the request with `token` starts, `{"t":"<token>"`. Like every
/// script, it takes the token as it stands in the record, as distlock's tokens (hex digits)
/// do.
pub(crate) fn record_start(token: &str) -> String {
    let mut start = String::with_capacity(token.len() + 12);
    start.push_str("{\"t\":\"");
    start.push_str(token);
    start.push('"');
    start
}

/// How the holder record of the request with `token` starts while nobody waited for its
/// grant, `{"t":"<token>","k"`: what the release fast path recognizes its grant by. A
/// waiter that queues behind a grant marks its record (`"w":1` after the token), and so
/// does a grant made while waiters queue, so the release of such a grant finds no match
/// and goes to the full script, which passes the lock on.
pub(crate) fn unwaited_start(token: &str) -> String {
    let mut start = record_start(token);
    start.push_str(",\"k\"");
    start
}

/// Who holds a lock: the request's record and the grant's fencing token (none yet in a
/// record its client's first try wrote, until its first renewal: read as 0).
#[derive(Deserialize)]
struct HolderRecord {
    #[serde(flatten)]
    request: RequestRecord<'static>,
    #[serde(default)]
    f: String,
}

impl HolderRecord {
    fn into_info(self, remaining_ms: u64) -> HolderInfo {
        let request = self.request;
        let granted_at = number(&request.a);
        let mut holder = HolderInfo::new(request.o.to_string(), request.kind(), number(&self.f));
        holder.permits = request.n;
        holder.remaining_ms = Some(remaining_ms);
        holder.meta = request.meta(granted_at);
        holder
    }
}

/// A queued request: the request's record, when it started waiting (`s`), until when its
/// place is kept (`e`), and whether it is fair (`f`).
#[derive(Deserialize)]
struct WaiterRecord {
    #[serde(flatten)]
    request: RequestRecord<'static>,
    s: String,
    e: String,
    f: bool,
}

impl WaiterRecord {
    fn into_info(self) -> WaiterInfo {
        let mut waiter = WaiterInfo::new(self.request.o.to_string(), self.request.kind());
        waiter.permits = self.request.n;
        waiter.fair = self.f;
        waiter.meta = self.request.meta(number(&self.s));
        waiter
    }
}

fn number(text: &str) -> u64 {
    text.parse().unwrap_or(0)
}

/// The server's `TIME` answer in milliseconds.
fn server_ms((secs, micros): (u64, u64)) -> u64 {
    secs.saturating_mul(1000).saturating_add(micros / 1000)
}

/// An expiry read as a sorted set's score (milliseconds); NaN and negatives are past.
fn expiry_ms(score: f64) -> u64 {
    score as u64
}

/// One lock read in one round trip: the lock's value (our holder record or a foreign
/// token), its PTTL, fencing counter, waiter records, queue order, server time, shared
/// grants with expiries, their records.
pub(crate) type Snapshot = (
    Option<String>,
    i64,
    Option<u64>,
    HashMap<String, String>,
    Vec<String>,
    (u64, u64),
    Vec<(String, f64)>,
    HashMap<String, String>,
);

/// The metadata of a holder or waiter the store records none of (a foreign client's, a
/// Java client's): no host, process or time.
pub(crate) fn unknown_meta() -> HolderMeta {
    HolderMeta {
        host: String::new(),
        pid: 0,
        acquired_at_unix_ms: 0,
    }
}

/// The grant stored as `value` (our holder record, or a foreign client's token in the lock
/// key) with `pttl` milliseconds of lease left.
pub(crate) fn holder_of(value: &str, pttl: i64) -> HolderInfo {
    let remaining_ms = pttl.max(0) as u64;
    match serde_json::from_str::<HolderRecord>(value) {
        Ok(record) => record.into_info(remaining_ms),
        // A key set by another program; PTTL -1 is a key without a TTL: a lock that stays
        // taken until someone deletes it.
        Err(_) => {
            let owner = format!("foreign client (token {value})");
            let mut holder = HolderInfo::new(owner, LockKind::Mutex, 0);
            holder.remaining_ms = (pttl != -1).then_some(remaining_ms);
            holder.no_expiry = pttl == -1;
            holder.meta = unknown_meta();
            holder
        }
    }
}

/// Lock `name`'s state from its [`Snapshot`]: the holder (ours or a foreign client's), the
/// live shared grants, and the live waiters in queue order.
pub(crate) fn lock_state(name: &str, snapshot: Snapshot) -> LockState {
    let (held, pttl, fence, waiters, queue, time, leases, lease_info) = snapshot;
    let now_ms = server_ms(time);
    let mut holders = Vec::new();
    if let Some(held) = held {
        holders.push(holder_of(&held, pttl));
    }
    for (token, expiry) in leases {
        let expiry = expiry_ms(expiry);
        if expiry <= now_ms {
            continue;
        }
        if let Some(record) = lease_info
            .get(&token)
            .and_then(|raw| serde_json::from_str::<HolderRecord>(raw).ok())
        {
            holders.push(record.into_info(expiry - now_ms));
        }
    }
    let waiters = queue
        .iter()
        .filter_map(|token| waiters.get(token))
        .filter_map(|raw| serde_json::from_str::<WaiterRecord>(raw).ok())
        .filter(|w| number(&w.e) > now_ms)
        .map(WaiterRecord::into_info)
        .collect();
    let mut state = LockState::new(name);
    // The shared counter, or a holder's token where the counter was lost under it.
    let held_tokens = holders.iter().map(|holder| holder.fencing_token);
    state.last_fencing_token = held_tokens.fold(fence.unwrap_or(0), u64::max);
    state.holders = holders;
    state.waiters = waiters;
    state
}

/// RedLock waiters read in one round trip: server time, tokens with expiries, records.
pub(crate) type WaitingSnapshot = ((u64, u64), Vec<(String, f64)>, HashMap<String, String>);

/// The RedLock waiters of a [`WaitingSnapshot`] whose places are still kept, by request
/// token.
pub(crate) fn live_waiters(snapshot: WaitingSnapshot) -> Vec<(String, WaiterInfo)> {
    let (time, queue, records) = snapshot;
    let now_ms = server_ms(time);
    queue
        .into_iter()
        .filter(|(_, expiry)| expiry_ms(*expiry) > now_ms)
        .filter_map(|(token, _)| {
            let record = serde_json::from_str::<WaiterRecord>(records.get(&token)?).ok()?;
            Some((token, record.into_info()))
        })
        .collect()
}

/// The waiters of one lock's queue (its records by request token, as `HGETALL` of the
/// waiters' hash reads them) whose places are still kept at server time `time`, by
/// request token.
pub(crate) fn queued_waiters(
    time: (u64, u64),
    records: HashMap<String, String>,
) -> Vec<(String, WaiterInfo)> {
    let now_ms = server_ms(time);
    records
        .into_iter()
        .filter_map(|(token, raw)| Some((token, serde_json::from_str::<WaiterRecord>(&raw).ok()?)))
        .filter(|(_, record)| number(&record.e) > now_ms)
        .map(|(token, record)| (token, record.into_info()))
        .collect()
}

/// What the acquire script answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AcquireAnswer {
    /// Granted, with this fencing token.
    Granted(u64),
    /// Not granted: the holder's lease ends within `left` (`None`: no end known), and
    /// `foreign` says whether the holder is a client other than distlock.
    Refused {
        left: Option<Duration>,
        foreign: bool,
        /// The server's clock when it refused, in ms.
        server_ms: u64,
    },
}

impl AcquireAnswer {
    /// Decodes `[1, fence]` or `[0, pttl, foreign, server ms]`; anything else is a backend
    /// error.
    pub(crate) fn decode(answer: &[i64]) -> Result<AcquireAnswer> {
        match *answer {
            [1, fence] if fence > 0 => Ok(AcquireAnswer::Granted(fence as u64)),
            [0, pttl, foreign @ (0 | 1), server_ms] if server_ms >= 0 => {
                Ok(AcquireAnswer::Refused {
                    left: (pttl >= 0).then(|| Duration::from_millis(pttl as u64)),
                    foreign: foreign == 1,
                    server_ms: server_ms as u64,
                })
            }
            _ => Err(Error::new(
                ErrorKind::Backend,
                format!("unexpected answer from the acquire script: {answer:?}"),
            )
            .with_backend("redis")),
        }
    }
}

/// Decodes `reply` (RESP bytes) as every reply distlock reads from Redis, for fuzzing:
/// nothing may panic, whatever the bytes.
#[cfg(any(test, fuzzing))]
pub(crate) fn decode_any(reply: &[u8]) {
    use redis::FromRedisValue;
    let Ok(value) = redis::parse_redis_value(reply) else {
        return;
    };
    if let Ok(snapshot) = Snapshot::from_redis_value(value.clone()) {
        let state = lock_state("fuzzed", snapshot);
        let _ = serde_json::to_string(&state);
    }
    if let Ok(snapshot) = WaitingSnapshot::from_redis_value(value.clone()) {
        live_waiters(snapshot);
    }
    if let Ok((time, records)) =
        <((u64, u64), HashMap<String, String>)>::from_redis_value(value.clone())
    {
        queued_waiters(time, records);
    }
    if let Ok(answer) = Vec::<i64>::from_redis_value(value) {
        let _ = AcquireAnswer::decode(&answer);
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// RESP for an array of `items`, each a bulk string or an integer.
    fn resp_array(items: &[Result<String, i64>]) -> Vec<u8> {
        let mut out = format!("*{}\r\n", items.len()).into_bytes();
        for item in items {
            match item {
                Ok(text) => out.extend(format!("${}\r\n{text}\r\n", text.len()).into_bytes()),
                Err(n) => out.extend(format!(":{n}\r\n").into_bytes()),
            }
        }
        out
    }

    /// A record as distlock writes it, with any values, or any text at all.
    fn record() -> impl Strategy<Value = String> {
        let fields = (
            "(mutex|read|write|semaphore|x)",
            any::<u32>(),
            any::<u32>(),
            any::<String>(),
            any::<u32>(),
            "[0-9]{0,22}",
            any::<bool>(),
        );
        prop_oneof![
            any::<String>(),
            fields.prop_map(|(k, n, l, o, p, number, fair)| {
                serde_json::json!({
                    "k": k, "n": n, "l": l, "o": o, "h": "host", "p": p, "a": number,
                    "f": if fair { serde_json::json!(number) } else { serde_json::json!(fair) },
                    "s": number, "e": number,
                })
                .to_string()
            }),
        ]
    }

    fn snapshot() -> impl Strategy<Value = Snapshot> {
        let tokens = proptest::collection::vec("[a-c]{1,2}", 0..6);
        (
            proptest::option::of(record()),
            any::<i64>(),
            any::<Option<u64>>(),
            proptest::collection::hash_map("[a-c]{1,2}", record(), 0..6),
            tokens,
            (any::<u64>(), any::<u64>()),
            proptest::collection::vec(("[a-c]{1,2}", any::<f64>()), 0..6),
            proptest::collection::hash_map("[a-c]{1,2}", record(), 0..6),
        )
    }

    fn request(owner: &str) -> LockRequest {
        let owner = distlock_core::Owner::parse(owner).unwrap();
        let mut request = LockRequest::new("n", LockKind::Mutex, owner, "t");
        request.ttl = Duration::from_secs(1);
        request
    }

    proptest! {
        #[test]
        fn any_reply_bytes_decode_without_panicking(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
            decode_any(&bytes);
        }

        #[test]
        fn any_array_reply_decodes_without_panicking(
            items in proptest::collection::vec(
                prop_oneof![any::<String>().prop_map(Ok), any::<i64>().prop_map(Err)],
                0..10,
            )
        ) {
            decode_any(&resp_array(&items));
        }

        #[test]
        fn a_state_shows_at_most_the_holders_and_waiters_it_was_given(snapshot in snapshot()) {
            let (held, leases, queue) = (snapshot.0.is_some(), snapshot.6.len(), snapshot.4.len());
            let state = lock_state("n", snapshot);
            prop_assert!(state.holders.len() <= usize::from(held) + leases);
            prop_assert!(state.waiters.len() <= queue);
        }

        #[test]
        fn only_the_two_answer_shapes_decode(answer in proptest::collection::vec(-3i64..3, 0..6), fence in any::<i64>()) {
            let mut answer = answer;
            if answer.first() == Some(&1) && answer.len() == 2 {
                answer[1] = fence;
            }
            match AcquireAnswer::decode(&answer) {
                Ok(AcquireAnswer::Granted(token)) => {
                    prop_assert_eq!(answer.as_slice(), &[1, token as i64][..]);
                    prop_assert!(token > 0);
                }
                Ok(AcquireAnswer::Refused { left, foreign, server_ms }) => {
                    prop_assert!(answer.len() == 4 && answer[0] == 0);
                    prop_assert_eq!(server_ms as i64, answer[3]);
                    prop_assert_eq!(left.is_some(), answer[1] >= 0);
                    prop_assert_eq!(foreign, answer[2] == 1);
                }
                Err(err) => prop_assert_eq!(err.kind(), ErrorKind::Backend),
            }
        }

        #[test]
        fn a_fast_path_grant_reads_as_a_holder_record_that_starts_as_its_release_expects(
            token in "[0-9a-f]{1,32}",
            owner in "[a-z][a-z0-9-]{0,20}",
            fence in any::<u64>(),
        ) {
            let mut request = request(&owner);
            request.token = token.clone();
            let record = RequestRecord::of(&request);
            let head = record.to_grant_head().unwrap();
            let stored = format!("{head}{fence}\"}}");
            let holder: HolderRecord = serde_json::from_str(&stored).unwrap();
            prop_assert_eq!(holder.f, fence.to_string());
            prop_assert_eq!(holder.request.t, token.as_str());
            prop_assert!(stored.starts_with(&record_start(&token)));
            prop_assert!(stored.starts_with(&unwaited_start(&token)));
            prop_assert_eq!(RequestRecord::of_grant_head(head), record.to_json().unwrap());
            // The start ends with the token's closing quote: the grant of a longer token
            // that begins with this one is not taken for this one's.
            request.token = format!("{token}0");
            let longer = RequestRecord::of(&request).to_grant_head().unwrap();
            prop_assert!(!longer.starts_with(&record_start(&token)));
        }

        #[test]
        fn a_waiter_record_is_encoded_whatever_the_numbers(since_ms in any::<u64>(), lease_ms in any::<u64>()) {
            let request = request("o");
            let json = RequestRecord::of(&request).waiter_json(since_ms, Duration::from_millis(lease_ms), false).unwrap();
            prop_assert!(serde_json::from_str::<WaiterRecord>(&json).is_ok());
        }

        #[test]
        fn a_waiter_record_is_read_back_until_its_place_expires(
            // Scores are doubles: exact below 2^53 ms, which is 285,000 years.
            since_ms in 0u64..1 << 52,
            lease_ms in 0u64..1 << 52,
            owner in "[a-z0-9-]{1,20}",
        ) {
            let request = request(&owner);
            let lease = Duration::from_millis(lease_ms);
            let json = RequestRecord::of(&request).waiter_json(since_ms, lease, true).unwrap();
            let until = since_ms.saturating_add(lease_ms);
            let at = |ms: u64| (ms / 1000, ms % 1000 * 1000);
            let records = HashMap::from([(request.token.clone(), json)]);
            let queue = vec![(request.token.clone(), until as f64)];
            let before = live_waiters((at(since_ms), queue.clone(), records.clone()));
            let after = live_waiters((at(until), queue, records));
            if until > since_ms {
                prop_assert_eq!(before.len(), 1);
                prop_assert_eq!(before[0].1.owner.as_str(), owner.as_str());
                prop_assert!(before[0].1.fair, "the record says the waiter is fair");
            }
            prop_assert!(after.is_empty());
        }
    }
}
