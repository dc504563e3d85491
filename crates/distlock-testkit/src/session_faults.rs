//! Faults every session backend (ZooKeeper, etcd) must survive the same way; each test
//! supplies what only its store knows: how to delete a holder's entry by hand, or how to
//! see the store let go of it.

use std::future::Future;
use std::time::{Duration, Instant};

use distlock::Health;

use distlock_servers::{FaultProxy, ProxyMode};

/// A client of `url` holds `held` and `kept`; `delete` removes `held`'s entry (its node or
/// key) behind the client's back, as an operator would. The holder learns it through the
/// watch on its entry and turns `Lost` alone: `kept`, in the same live session, stays
/// held; another client takes `held` with a greater token; once lost, always lost.
///
/// # Examples
///
/// ```no_run
/// # distlock_testkit::block_on(async {
/// distlock_testkit::a_holder_deleted_by_hand_turns_lost_alone(
///     "etcd://127.0.0.1:2379/ops",
///     || async { /* etcdctl del ops/held/<key> */ },
/// )
/// .await;
/// # });
/// ```
pub async fn a_holder_deleted_by_hand_turns_lost_alone<F: Future<Output = ()>>(
    url: &str,
    delete: impl FnOnce() -> F,
) {
    let client = distlock::Client::connect(url).await.unwrap();
    let guard = client.mutex("held").lock().await.unwrap();
    let bystander = client.mutex("kept").lock().await.unwrap();

    delete().await;

    tokio::time::timeout(Duration::from_secs(5), guard.lost())
        .await
        .expect("the holder learns its entry was deleted");
    assert_eq!(guard.health(), Health::Lost);
    assert_eq!(bystander.health(), Health::Held, "the session lives on");
    let next = crate::take_over(url, "held", guard.fencing_token(), Duration::from_secs(5)).await;
    assert!(guard.renew().await.is_err(), "once lost, always lost");
    next.release().await.unwrap();
    bystander.release().await.unwrap();
}

/// `guard` holds `cut` through `proxy`, and `deleted` is a task that returns when the
/// store deletes the holder's entry. The link goes silent: the guard goes `AtRisk` within
/// 3 s, then `Lost` within 3 s more — before the store lets go of the entry — and a client
/// of `direct` takes the lock over with a greater token.
///
/// # Examples
///
/// ```no_run
/// # distlock_testkit::block_on(async {
/// # let proxy = distlock_testkit::FaultProxy::start("127.0.0.1:2379".parse().unwrap()).await.unwrap();
/// let through = format!("etcd://{}/faults?session_ttl=2s", proxy.addr());
/// let client = distlock::Client::connect(&through).await.unwrap();
/// let guard = client.mutex("cut").lock().await.unwrap();
/// // A watch of the holder's key, from a client of its own:
/// let deleted = tokio::spawn(async { std::time::Instant::now() });
/// distlock_testkit::a_cut_off_holder_is_lost_before_the_store_lets_go(
///     &guard,
///     &proxy,
///     "etcd://127.0.0.1:2379/faults",
///     deleted,
/// )
/// .await;
/// # });
/// ```
pub async fn a_cut_off_holder_is_lost_before_the_store_lets_go(
    guard: &distlock::Guard,
    proxy: &FaultProxy,
    direct: &str,
    deleted: tokio::task::JoinHandle<Instant>,
) {
    proxy.set(ProxyMode::BlackHole);
    assert!(
        crate::wait_for_health(guard, Health::AtRisk, Duration::from_secs(3)).await,
        "a silent link puts the guard at risk"
    );
    tokio::time::timeout(Duration::from_secs(3), guard.lost())
        .await
        .expect("the guard is lost within the session's validity");
    let lost_at = Instant::now();
    let deleted_at = tokio::time::timeout(Duration::from_secs(10), deleted)
        .await
        .expect("the store lets go of the entry")
        .unwrap();
    assert!(
        lost_at <= deleted_at,
        "the guard was lost before the store let go"
    );
    let next = crate::take_over(direct, "cut", guard.fencing_token(), Duration::from_secs(5)).await;
    next.release().await.unwrap();
}
