//! Waiters queued by hand, as a distlock client would queue them, for tests that need a
//! waiter that never polls.

/// A waiter queued by hand: its request token, the channel its client listens on, its
/// place in the queue, since when it waits (server clock, ms) and the hand-off claim it
/// takes (ms; zero: none).
pub struct ByHand<'a> {
    pub token: &'a str,
    pub channel: &'a str,
    pub place: u64,
    pub since_ms: u64,
    pub claim_ms: u64,
}

/// Queues `waiter` for lock `name` (no prefix), not fair, its place kept for ever.
pub async fn queue_by_hand(
    conn: &mut redis::aio::MultiplexedConnection,
    name: &str,
    waiter: ByHand<'_>,
) {
    let record = serde_json::json!({
        "t": waiter.token, "k": "mutex", "n": 1, "l": 1, "o": "by-hand", "h": "h",
        "p": 1, "a": "0", "s": waiter.since_ms.to_string(), "e": "99999999999999",
        "c": waiter.channel, "f": false, "g": waiter.claim_ms,
    });
    let _: () = redis::pipe()
        .cmd("ZADD")
        .arg(format!("{{{name}}}:queue"))
        .arg(waiter.place)
        .arg(waiter.token)
        .cmd("HSET")
        .arg(format!("{{{name}}}:waiters"))
        .arg(waiter.token)
        .arg(record.to_string())
        .query_async(conn)
        .await
        .unwrap();
}
