//! A Redis server's command counts, for tests that count what an operation costs it.

/// How many `EVALSHA`s the server behind `raw` ran since its statistics were reset.
pub async fn script_calls(raw: &mut redis::aio::MultiplexedConnection) -> u64 {
    let stats: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(raw)
        .await
        .unwrap();
    stats
        .lines()
        .find_map(|line| line.strip_prefix("cmdstat_evalsha:calls="))
        .and_then(|rest| rest.split(',').next())
        .map_or(0, |calls| calls.parse().unwrap())
}

/// Resets the statistics of the server behind `raw`.
pub async fn reset_stats(raw: &mut redis::aio::MultiplexedConnection) {
    let _: () = redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query_async(raw)
        .await
        .unwrap();
}
