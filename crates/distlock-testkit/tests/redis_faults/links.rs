//! A Redis client's link failing under its guard: one test for each layout's suite.

use std::time::Duration;

use distlock::{Health, LockOptions};

/// A client of the layout `query` names (`""` for distlock's, `"?layout=redisson"`) whose
/// link to Redis fails as `mode` says: its guard goes AtRisk, then Lost while Redis still
/// has the lease, and the next holder's token is greater.
pub async fn lost_before_the_server_ttl_ends(query: &str, mode: distlock_testkit::ProxyMode) {
    let redis = distlock_testkit::redis_server().unwrap_or_else(|e| panic!("{e}"));
    let proxy = distlock_testkit::FaultProxy::start(redis.addr())
        .await
        .unwrap();
    let direct = format!("redis://{}/0{query}", redis.addr());
    let mut observer = redis::Client::open(format!("redis://{}/0", redis.addr()))
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let client = distlock::Client::connect(&format!("redis://{}/0{query}", proxy.addr()))
        .await
        .unwrap();
    let ttl = Duration::from_millis(1500);
    let options = LockOptions::new()
        .ttl(ttl)
        .renew_every(Duration::from_millis(200));
    let guard = client.mutex("link").lock_with(&options).await.unwrap();
    proxy.set(mode);
    assert!(
        distlock_testkit::wait_for_health(&guard, Health::AtRisk, Duration::from_secs(3)).await,
        "a failed or unanswered renewal puts the lease at risk"
    );
    // When Redis will let the lease go, on this machine's clock: read while it holds it,
    // after the last renewal the guard counts on (no answer passes the link any more; a
    // renewal the server applies unanswered only moves it later).
    let expires_unix_ms: i64 = redis::cmd("PEXPIRETIME")
        .arg("link")
        .query_async(&mut observer)
        .await
        .unwrap();
    assert!(expires_unix_ms > 0, "Redis holds the lease, with a TTL");
    tokio::time::timeout(ttl + Duration::from_secs(2), guard.lost())
        .await
        .expect("the lease is lost when it cannot be renewed");
    // The moment the guard turned Lost (its safe deadline), on the same clock: compared
    // with the server's expiry, not raced against it.
    let lost_ago = std::time::Instant::now().saturating_duration_since(guard.safe_until());
    let lost_unix_ms = (std::time::SystemTime::now() - lost_ago)
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    assert!(
        lost_unix_ms < expires_unix_ms,
        "the guard was Lost before the server-side TTL ended: lost at {lost_unix_ms}, \
         expired at {expires_unix_ms}"
    );
    let _next = distlock_testkit::take_over(
        &direct,
        "link",
        guard.fencing_token(),
        Duration::from_secs(3),
    )
    .await;
}
