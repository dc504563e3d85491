//! Scenarios a new user runs into, the same on every backend with a server: odd lock names,
//! a server that hangs mid-call, and an observer told of each change by the store.

use std::time::{Duration, Instant};

use distlock_servers::Server;

/// Names a user may pick — nested (`orders` and `orders/42`), doubled, leading and trailing
/// slashes, dots, `%`, unicode (an emoji too), spaces, names a store keeps for itself
/// (`locks`, `leases`, `lock-0000000001`), the longest allowed — are each a lock of their own,
/// all held at once by one client against `url`, and `status` gives each name back as it
/// was; once released, none is left.
///
/// # Examples
///
/// ```no_run
/// # distlock_testkit::block_on(async {
/// distlock_testkit::odd_names_are_locks_of_their_own("memory://names").await;
/// # });
/// ```
pub async fn odd_names_are_locks_of_their_own(url: &str) {
    let client = distlock::Client::connect(url).await.unwrap();
    let other = distlock::Client::connect(url).await.unwrap();
    let long = "n".repeat(distlock::MAX_NAME_LEN);
    let names = [
        "orders",
        "orders/42",
        "a//b",
        "/lead",
        "trail/",
        "..",
        ".",
        "50%",
        "%41",
        "A",
        "日本/語",
        "zookeeper",
        "x/./y",
        "sp ace",
        "lock \u{1f512}",
        "locks",
        "leases/x",
        "lock-0000000001",
        "jobs/lock-0000000001",
        long.as_str(),
    ];
    let mut guards = Vec::new();
    for name in names {
        let guard = client
            .mutex(name)
            .try_lock()
            .await
            .unwrap_or_else(|e| panic!("{name:?}: {e}"))
            .unwrap_or_else(|| panic!("{name:?} is taken by another name"));
        guards.push(guard);
    }
    for name in names {
        let taken = other.mutex(name).try_lock().await.unwrap();
        assert!(
            taken.is_none(),
            "{name:?} is held, and excludes another client"
        );
    }
    let mut shown = crate::status_names(&client).await;
    let mut expected: Vec<String> = names.iter().map(|n| n.to_string()).collect();
    shown.sort();
    expected.sort();
    assert_eq!(shown, expected);
    for guard in guards {
        guard.release().await.unwrap();
    }
    assert!(client.status(None).await.unwrap().is_empty());
}

/// `server` hangs (SIGSTOP) while a client of `url` holds a lock and another request waits
/// behind it: the waiting `lock_timeout(2s)` ends with `Timeout` within 2.3 s of its start,
/// an acquire asked after the hang returns an error within its 200 ms wait (plus 100 ms), a
/// release within its 300 ms operation timeout (plus 100 ms), `status` (an error) and
/// `forget` within their 5 s operation timeout (plus 1 s); none panics or hangs. The server
/// runs again afterwards.
///
/// # Examples
///
/// ```no_run
/// # distlock_testkit::block_on(async {
/// let server = distlock_testkit::etcd_server().unwrap();
/// let url = format!("etcd://{}/hung", server.addr());
/// distlock_testkit::a_hung_server_bounds_every_call(&url, &server).await;
/// # });
/// ```
pub async fn a_hung_server_bounds_every_call(url: &str, server: &Server) {
    let client = distlock::Client::connect(url).await.unwrap();
    let options = distlock::LockOptions::new().op_timeout(Duration::from_millis(300));
    let guard = client.mutex("held").lock_with(&options).await.unwrap();
    let behind = tokio::spawn({
        let client = client.clone();
        async move {
            let started = Instant::now();
            let waited = client
                .mutex("held")
                .lock_timeout(Duration::from_secs(2))
                .await;
            (waited.map(drop), started.elapsed())
        }
    });
    // The hang comes in the middle of that wait.
    tokio::time::sleep(Duration::from_millis(300)).await;

    server.pause();
    let started = Instant::now();
    let waited = client
        .mutex("other")
        .lock_timeout(Duration::from_millis(200))
        .await;
    assert!(waited.is_err(), "no grant from a hung server");
    assert!(
        started.elapsed() < Duration::from_millis(300),
        "the acquire took {:?}",
        started.elapsed()
    );
    let started = Instant::now();
    assert!(guard.release().await.is_err(), "no answer, no release");
    assert!(
        started.elapsed() < Duration::from_millis(400),
        "the release took {:?}",
        started.elapsed()
    );
    let (waited, took) = behind.await.expect("the waiting task ends");
    let err = waited.expect_err("no grant from a hung server");
    assert_eq!(err.kind(), distlock::ErrorKind::Timeout, "{err}");
    assert!(
        took < Duration::from_millis(2300),
        "the wait behind the holder took {took:?}"
    );
    let started = Instant::now();
    let status = client.status(Some("held")).await;
    assert!(
        started.elapsed() < Duration::from_secs(6),
        "status took {:?}",
        started.elapsed()
    );
    assert!(status.is_err(), "no status from a hung server");
    let started = Instant::now();
    let _ = client.forget(["held"]).await;
    assert!(
        started.elapsed() < Duration::from_secs(6),
        "forget took {:?}",
        started.elapsed()
    );
    server.resume();
}

/// An observer hears of each change of leader from the store's pushes, not only from its
/// polling: with a poll every minute, a new leader, its proclaimed value and its
/// resignation are each seen within a second (for a store that pushes: see
/// [`Backend::lock_news`](distlock::backend::Backend::lock_news)).
///
/// # Examples
///
/// ```no_run
/// # distlock_testkit::block_on(async {
/// distlock_testkit::observers_hear_each_change_within_a_second("etcd://127.0.0.1:2379/x").await;
/// # });
/// ```
pub async fn observers_hear_each_change_within_a_second(url: &str) {
    let (watcher, leader) = (
        distlock::Client::connect(url).await.unwrap(),
        distlock::Client::connect(url).await.unwrap(),
    );
    let observed = watcher
        .election("services/billing")
        .observe_every(Duration::from_secs(60));
    let mut seen = observed.observe().await.unwrap();
    assert!(seen.borrow().is_none());
    let within = Duration::from_secs(1);
    let wait_for = |seen: &mut tokio::sync::watch::Receiver<Option<distlock::LeaderInfo>>,
                    wanted: fn(Option<&distlock::LeaderInfo>) -> bool| {
        let mut seen = seen.clone();
        async move {
            tokio::time::timeout(within, seen.wait_for(|l| wanted(l.as_ref())))
                .await
                .is_ok()
        }
    };
    let started = Instant::now();
    let leading = leader
        .election("services/billing")
        .identity("billing-1")
        .campaign()
        .await
        .unwrap();
    let named = |l: Option<&distlock::LeaderInfo>| l.is_some_and(|l| l.identity == "billing-1");
    assert!(
        wait_for(&mut seen, named).await,
        "the new leader within a second"
    );
    leading.proclaim("ready").await.unwrap();
    let ready =
        |l: Option<&distlock::LeaderInfo>| l.is_some_and(|l| l.value.as_deref() == Some("ready"));
    assert!(
        wait_for(&mut seen, ready).await,
        "its value within a second"
    );
    leading.resign().await.unwrap();
    assert!(
        wait_for(&mut seen, |l| l.is_none()).await,
        "its resignation within a second"
    );
    assert!(started.elapsed() < Duration::from_secs(10));
}
