#![doc = include_str!("../docs.md")]

mod child;
pub mod conformance;
mod scenarios;
mod session_faults;
mod session_targets;

pub use child::{ChildEvent, ChildProcess, ChildTask, run_child, share_from_processes};
pub use conformance::{SessionFaults, Target, memory_session_target};
/// The servers, the fault proxy and the signals, from `distlock-servers`, so a backend's
/// tests import from one crate.
pub use distlock_servers::{
    DATABASE_PASSWORD, EtcdCluster, FaultProxy, LaunchError, ProxyMode, Ready, RedisCluster,
    Server, ServerSpec, Signal, TestCertificates, ZkEnsemble, etcd_cluster, etcd_server,
    etcd_server_with, etcd_tls_server, etcd_watch_counts, etcdctl, find_program, free_port,
    mariadb_server, mariadb_tls_server, mariadb_url, postgres_server, postgres_tls_server,
    postgres_url, redis_cluster, redis_server, redis_server_with, redis_tls_server, send,
    servers_in_own_process_groups, zookeeper_ensemble, zookeeper_server, zookeeper_tls_server,
};
pub use scenarios::{
    a_hung_server_bounds_every_call, observers_hear_each_change_within_a_second,
    odd_names_are_locks_of_their_own,
};
pub use session_faults::{
    a_cut_off_holder_is_lost_before_the_store_lets_go, a_holder_deleted_by_hand_turns_lost_alone,
};
pub use session_targets::{etcd_target, zookeeper_target};

/// Runs an async test body on a fresh multi-threaded runtime (used by the suite macros, so
/// the calling crate needs no runtime of its own).
///
/// # Examples
///
/// ```
/// distlock_testkit::block_on(async { assert_eq!(1 + 1, 2) });
/// ```
pub fn block_on<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a test runtime can be built")
        .block_on(future)
}

/// Waits until `guard` reports `health`, checking every 10 ms for at most `within`; true if
/// it did.
///
/// # Examples
///
/// ```
/// # distlock_testkit::block_on(async {
/// let client = distlock::Client::connect("memory://").await.unwrap();
/// let guard = client.mutex("a").lock().await.unwrap();
/// let held = distlock_testkit::wait_for_health(&guard, distlock::Health::Held, std::time::Duration::from_secs(1)).await;
/// assert!(held);
/// # });
/// ```
pub async fn wait_for_health(
    guard: &distlock::Guard,
    health: distlock::Health,
    within: std::time::Duration,
) -> bool {
    let deadline = std::time::Instant::now() + within;
    loop {
        if guard.health() == health {
            return true;
        }
        if std::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}

/// A new client on `url` takes over `name` from a lost guard whose token was `lost`:
/// granted within `within`, with a greater fencing token. Returns the new guard.
///
/// # Examples
///
/// ```
/// # distlock_testkit::block_on(async {
/// use std::time::Duration;
/// let client = distlock::Client::connect("memory://take-over").await.unwrap();
/// let once = distlock::LockOptions::new().ttl(Duration::from_millis(50)).auto_renew(false);
/// let stale = client.mutex("a").lock_with(&once).await.unwrap();
/// let next = distlock_testkit::take_over("memory://take-over", "a", stale.fencing_token(), Duration::from_secs(1)).await;
/// # });
/// ```
pub async fn take_over(
    url: &str,
    name: &str,
    lost: u64,
    within: std::time::Duration,
) -> distlock::Guard {
    let client = distlock::Client::connect(url).await.unwrap();
    let next = client
        .mutex(name)
        .lock_timeout(within)
        .await
        .unwrap_or_else(|e| panic!("the lock `{name}` was not taken over within {within:?}: {e}"));
    assert!(
        next.fencing_token() > lost,
        "the next holder's token {} is not greater than the lost one's {lost}",
        next.fencing_token(),
    );
    next
}

/// Takes lock `name` through `proxy` (a client on `through`, TTL 30 s, renewed every
/// 200 ms), cuts the link, and asserts the guard is `Lost` within 3 s and that a client on
/// `direct` takes the lock over within 3 s — long before the TTL: a session lock dies with
/// its connection.
///
/// # Examples
///
/// ```no_run
/// # distlock_testkit::block_on(async {
/// let pg = distlock_testkit::postgres_server().unwrap();
/// let proxy = distlock_testkit::FaultProxy::start(pg.addr()).await.unwrap();
/// let direct = distlock_testkit::postgres_url(&pg);
/// let through = direct.replace(&pg.addr().to_string(), &proxy.addr().to_string());
/// distlock_testkit::cut_session_is_freed_at_once(&through, &direct, &proxy, "cut").await;
/// # });
/// ```
pub async fn cut_session_is_freed_at_once(
    through: &str,
    direct: &str,
    proxy: &FaultProxy,
    name: &str,
) {
    let client = distlock::Client::connect(through).await.unwrap();
    let options = distlock::LockOptions::new()
        .ttl(std::time::Duration::from_secs(30))
        .renew_every(std::time::Duration::from_millis(200));
    let guard = client.mutex(name).lock_with(&options).await.unwrap();
    proxy.set(ProxyMode::Cut);
    tokio::time::timeout(std::time::Duration::from_secs(3), guard.lost())
        .await
        .expect("a dead connection means Lost at the next renewal");
    let next = take_over(
        direct,
        name,
        guard.fencing_token(),
        std::time::Duration::from_secs(3),
    )
    .await;
    next.release().await.unwrap();
}

/// Asserts the testkit's [`DATABASE_PASSWORD`] in `url` shows neither in the error of a
/// connection with a wrong password nor in the connected backend's `Debug` output.
///
/// # Examples
///
/// ```no_run
/// # distlock_testkit::block_on(async {
/// let pg = distlock_testkit::postgres_server().unwrap();
/// distlock_testkit::passwords_stay_hidden(&distlock_testkit::postgres_url(&pg)).await;
/// # });
/// ```
pub async fn passwords_stay_hidden(url: &str) {
    let wrong = url.replace(DATABASE_PASSWORD, "not-the-password-xyz");
    let err = distlock::Client::connect(&wrong).await.unwrap_err();
    assert!(
        !format!("{err} {err:?}").contains("not-the-password-xyz"),
        "{err:?}"
    );
    let client = distlock::Client::connect(url).await.unwrap();
    let shown = format!("{:?}", distlock::backend::backend_of(&client));
    assert!(!shown.contains(DATABASE_PASSWORD), "{shown}");
}

/// Asserts a client of database URL `url` (no query yet) with `?pool=1` serves every kind
/// of lock, renewals and status on its one pooled connection, and that `?pool=0` is refused.
///
/// # Examples
///
/// ```no_run
/// # distlock_testkit::block_on(async {
/// let pg = distlock_testkit::postgres_server().unwrap();
/// distlock_testkit::a_pool_of_one_serves_every_kind(&distlock_testkit::postgres_url(&pg)).await;
/// # });
/// ```
pub async fn a_pool_of_one_serves_every_kind(url: &str) {
    let err = distlock::Client::connect(&format!("{url}?pool=0"))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), distlock::ErrorKind::InvalidInput, "{err}");
    let (one, other) = (
        distlock::Client::connect(&format!("{url}?pool=1"))
            .await
            .unwrap(),
        distlock::Client::connect(&format!("{url}?pool=1"))
            .await
            .unwrap(),
    );
    let mutex = one.mutex("pooled-mutex").lock().await.unwrap();
    let permit = one.semaphore("pooled-permits", 2).acquire().await.unwrap();
    let reader = one.rwlock("pooled-doc").read().await.unwrap();
    for renewed in [
        mutex.renew().await,
        permit.renew().await,
        reader.renew().await,
    ] {
        renewed.unwrap();
    }
    assert!(
        other
            .mutex("pooled-mutex")
            .try_lock()
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        other
            .rwlock("pooled-doc")
            .try_write()
            .await
            .unwrap()
            .is_none()
    );
    let names = status_names(&one).await;
    for name in ["pooled-doc", "pooled-mutex", "pooled-permits"] {
        assert!(
            names.iter().any(|n| n == name),
            "{name} missing from {names:?}"
        );
    }
    reader.release().await.unwrap();
    permit.release().await.unwrap();
    mutex.release().await.unwrap();
}

/// The names of every lock `client`'s store shows with holders or waiters, as `status`
/// lists them.
///
/// # Examples
///
/// ```
/// # distlock_testkit::block_on(async {
/// let client = distlock::Client::connect("memory://names").await.unwrap();
/// assert!(distlock_testkit::status_names(&client).await.is_empty());
/// # });
/// ```
pub async fn status_names(client: &distlock::Client) -> Vec<String> {
    let states = client.status(None).await.unwrap();
    states.into_iter().map(|state| state.name).collect()
}

/// Asserts that distlock clients that took a lock `ours` times each, beside clients of
/// another library (`peer`) that took it `theirs` times each, got at least a third of their
/// fair share together, each at least a quarter of its own, and that the lock changed
/// hands at all.
///
/// # Examples
///
/// ```
/// distlock_testkit::assert_fair_share(&[40, 30], &[70, 60], "redis-py");
/// ```
pub fn assert_fair_share(ours: &[u64], theirs: &[u64], peer: &str) {
    let total: u64 = ours.iter().chain(theirs).sum();
    let fair = total / (ours.len() + theirs.len()) as u64;
    assert!(total > 100, "the key changed hands: {ours:?} {theirs:?}");
    let ours_total: u64 = ours.iter().sum();
    let ours_fair = fair * ours.len() as u64;
    assert!(
        ours_total * 3 >= ours_fair,
        "distlock got {ours_total} of a fair {ours_fair} (distlock {ours:?}, {peer} {theirs:?})"
    );
    for count in ours {
        assert!(
            *count * 4 >= fair,
            "a distlock client got {count} of a fair {fair} (distlock {ours:?}, {peer} {theirs:?})"
        );
    }
}

/// Restarts `server` on a blocking thread (kill, start again, wait until it answers) while
/// guards are held whose `losses` (their [`lost`](distlock::Guard::lost) futures) must
/// resolve before the restarted server is back — when it could grant their locks again —
/// not at their next renewal; gives the server back once it is.
///
/// # Examples
///
/// ```no_run
/// # distlock_testkit::block_on(async {
/// let pg = distlock_testkit::postgres_server().unwrap();
/// let client = distlock::Client::connect(&distlock_testkit::postgres_url(&pg)).await.unwrap();
/// let guard = client.mutex("held").lock().await.unwrap();
/// let pg = distlock_testkit::restart_losing_first(pg, vec![guard.lost()]).await;
/// # });
/// ```
pub async fn restart_losing_first<F>(mut server: Server, losses: Vec<F>) -> Server
where
    F: std::future::Future<Output = ()> + Send + 'static,
{
    use std::time::{Duration, Instant};
    let lost_at: Vec<_> = losses
        .into_iter()
        .map(|lost| {
            tokio::spawn(async move {
                lost.await;
                Instant::now()
            })
        })
        .collect();
    let (server, back_at) = tokio::task::spawn_blocking(move || {
        server.restart().unwrap_or_else(|e| panic!("{e}"));
        (server, Instant::now())
    })
    .await
    .expect("the restart thread ends");
    for lost in lost_at {
        let at = tokio::time::timeout(Duration::from_secs(1), lost)
            .await
            .expect("the guard turned Lost within a second of the restart")
            .unwrap();
        assert!(
            at < back_at,
            "the guard turned Lost {:?} after the restarted server was back",
            at - back_at
        );
    }
    server
}

/// Takes lock `name` through `url` (TTL 1.5 s, renewed every 200 ms), freezes `server`
/// with SIGSTOP and asserts the guard goes `AtRisk`, then `Lost`; thaws the server and
/// asserts a new client gets the lock only after the old holder knew, with a greater
/// token, that the stale release answers `NotHeld` and that the new holder renews.
///
/// # Examples
///
/// ```no_run
/// # distlock_testkit::block_on(async {
/// let redis = distlock_testkit::redis_server().unwrap();
/// let url = format!("redis://{}/0", redis.addr());
/// distlock_testkit::lose_to_a_paused_server(&url, &redis, "paused").await;
/// # });
/// ```
pub async fn lose_to_a_paused_server(url: &str, server: &Server, name: &str) {
    use std::time::{Duration, Instant};
    let a = distlock::Client::connect(url).await.unwrap();
    let options = distlock::LockOptions::new()
        .ttl(Duration::from_millis(1500))
        .renew_every(Duration::from_millis(200));
    let guard = a.mutex(name).lock_with(&options).await.unwrap();

    server.pause();
    let at_risk = wait_for_health(&guard, distlock::Health::AtRisk, Duration::from_secs(3)).await;
    let lost = tokio::time::timeout(Duration::from_secs(3), guard.lost()).await;
    // Nothing can be granted before the server runs again: the old holder's validity must
    // have ended by then.
    let resumed_at = Instant::now();
    server.resume();
    assert!(at_risk, "an unanswered renewal puts the lease at risk");
    assert!(lost.is_ok(), "renewals that never answer end in Lost");
    assert!(
        guard.safe_until() <= resumed_at,
        "the old holder's validity ended before anyone else could be granted the lock"
    );

    let next = take_over(url, name, guard.fencing_token(), Duration::from_secs(5)).await;
    assert_eq!(
        guard.release().await.unwrap_err().kind(),
        distlock::ErrorKind::NotHeld
    );
    next.renew().await.expect("the new holder is undisturbed");
}

/// Takes lock `name` (TTL `ttl`, renewed every 200 ms) through `url`, which must lead
/// through `proxy`; then fails the link as `mode` says and asserts the guard goes `AtRisk`
/// within 3 s and `Lost` within `ttl` + 2 s. Returns the lost guard, for the backend's test
/// to check what its server still holds and that the next holder's token is greater.
///
/// # Examples
///
/// ```no_run
/// # distlock_testkit::block_on(async {
/// let redis = distlock_testkit::redis_server().unwrap();
/// let proxy = distlock_testkit::FaultProxy::start(redis.addr()).await.unwrap();
/// let url = format!("redis://{}/0", proxy.addr());
/// let lost = distlock_testkit::lose_link(&url, &proxy, distlock_testkit::ProxyMode::Cut, "link",
///     std::time::Duration::from_millis(1500)).await;
/// # });
/// ```
pub async fn lose_link(
    url: &str,
    proxy: &FaultProxy,
    mode: ProxyMode,
    name: &str,
    ttl: std::time::Duration,
) -> distlock::Guard {
    let client = distlock::Client::connect(url).await.unwrap();
    let options = distlock::LockOptions::new()
        .ttl(ttl)
        .renew_every(std::time::Duration::from_millis(200));
    let guard = client.mutex(name).lock_with(&options).await.unwrap();
    proxy.set(mode);
    assert!(
        wait_for_health(
            &guard,
            distlock::Health::AtRisk,
            std::time::Duration::from_secs(3)
        )
        .await,
        "a failed or unanswered renewal puts the lease at risk"
    );
    tokio::time::timeout(ttl + std::time::Duration::from_secs(2), guard.lost())
        .await
        .expect("the lease is lost when it cannot be renewed");
    guard
}
