//! Leader elections: one leader at a time, terms that strictly increase, observers that
//! follow each change, and a leader's work stopped at its loss.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use distlock::{Error, ErrorKind, LeaderInfo, LockOptions};

use super::{Target, expect_kind, unique};

/// How soon an observer sees a change of leader.
const OBSERVED_WITHIN: Duration = Duration::from_secs(1);

/// The first leader leads until it resigns, with its identity, proclaimed value and term
/// shown to every client; a waiting candidate then wins with a greater term; an observer
/// sees each change within a second; bad identities are `InvalidInput` and a campaign
/// past its wait is `Timeout`.
///
/// # Examples
///
/// ```
/// # distlock_testkit::block_on(async {
/// distlock_testkit::conformance::election_terms_increase_and_observers_follow(&distlock_testkit::Target::new("memory://doc")).await;
/// # });
/// ```
pub async fn election_terms_increase_and_observers_follow(target: &Target) {
    let name = unique("election");
    let (a, b, watcher) = (
        target.client().await,
        target.client().await,
        target.client().await,
    );
    let observed = watcher
        .election(&name)
        .observe_every(Duration::from_millis(100));
    let mut seen = observed.observe().await.unwrap();
    assert!(seen.borrow().is_none(), "nobody leads yet");

    let first = a.election(&name).identity("a").campaign().await.unwrap();
    let seen_first = shown(&mut seen, "the first leader", |l| l.term == first.term()).await;
    assert_eq!(seen_first.identity, "a");
    assert_eq!(seen_first.value, None);

    let second = {
        let election = b.election(&name).identity("b");
        tokio::spawn(async move { election.campaign().await })
    };
    first.proclaim("10.0.0.7:8080").await.unwrap();
    let proclaimed = shown(&mut seen, "the proclaimed value", |l| l.value.is_some()).await;
    assert_eq!(proclaimed.value.as_deref(), Some("10.0.0.7:8080"));
    assert_eq!(proclaimed.term, first.term());
    let read = b.election(&name).leader().await.unwrap().expect("a leader");
    assert_eq!((read.identity.as_str(), read.term), ("a", first.term()));
    assert!(
        !second.is_finished(),
        "a second candidate waits while one leads"
    );

    let first_term = first.term();
    first.resign().await.unwrap();
    let second = tokio::time::timeout(Duration::from_secs(10), second)
        .await
        .expect("the waiting candidate wins after the resignation")
        .unwrap()
        .unwrap();
    assert!(second.term() > first_term, "terms strictly increase");
    let seen_second = shown(&mut seen, "the second leader", |l| l.term == second.term()).await;
    assert_eq!(seen_second.identity, "b");
    assert_eq!(
        seen_second.value, None,
        "a new leader starts without a value"
    );
    let late = second.proclaim("x".repeat(distlock::MAX_PROCLAIM_LEN + 1));
    expect_kind(
        late.await,
        ErrorKind::InvalidInput,
        "a value too long to keep",
    );

    for identity in ["", "a\nb", &"i".repeat(distlock::MAX_IDENTITY_LEN + 1)] {
        let refused = a.election(&name).identity(identity).campaign().await;
        expect_kind(refused, ErrorKind::InvalidInput, "a bad identity");
    }
    let impatient = a
        .election(&name)
        .with_options(LockOptions::new().wait(Duration::from_millis(200)))
        .campaign()
        .await;
    expect_kind(impatient, ErrorKind::Timeout, "a campaign past its wait");
    let reentrant = a
        .election(&name)
        .with_options(LockOptions::new().reentrant(a.new_owner()))
        .campaign()
        .await;
    expect_kind(reentrant, ErrorKind::InvalidInput, "a reentrant election");

    second.resign().await.unwrap();
    let gone = tokio::time::timeout(OBSERVED_WITHIN * 2, seen.wait_for(Option::is_none)).await;
    assert!(gone.is_ok(), "the observer sees that nobody leads");
    assert_eq!(a.election(&name).leader().await.unwrap(), None);

    let (identity, value) = (
        "i".repeat(distlock::MAX_IDENTITY_LEN),
        "v".repeat(distlock::MAX_PROCLAIM_LEN),
    );
    let longest = a
        .election(&name)
        .identity(&identity)
        .campaign()
        .await
        .unwrap();
    longest.proclaim(value.clone()).await.unwrap();
    let read = b.election(&name).leader().await.unwrap().expect("a leader");
    assert_eq!(
        (read.identity, read.value),
        (identity, Some(value)),
        "kept whole"
    );
    longest.resign().await.unwrap();
}

/// `run` stops the leader's work when its leadership is lost (here at its `max_hold`),
/// campaigns again with `requeue` and runs the work anew under a greater term; it resigns
/// once the work returns.
///
/// # Examples
///
/// ```
/// # distlock_testkit::block_on(async {
/// distlock_testkit::conformance::election_run_stops_at_the_loss_and_requeues(&distlock_testkit::Target::new("memory://doc")).await;
/// # });
/// ```
pub async fn election_run_stops_at_the_loss_and_requeues(target: &Target) {
    let name = unique("election-run");
    let client = target.client().await;
    let options = LockOptions::new()
        .ttl(Duration::from_millis(300))
        .max_hold(Duration::from_millis(600));
    let runs = AtomicU32::new(0);
    let terms = std::sync::Mutex::new(Vec::new());
    let ran = tokio::time::timeout(
        Duration::from_secs(20),
        client
            .election(&name)
            .identity("worker")
            .with_options(options)
            .requeue(true)
            .run(async |leading| {
                terms.lock().unwrap().push(leading.term());
                if runs.fetch_add(1, Ordering::SeqCst) == 0 {
                    // The first term works until it is stopped at the loss.
                    tokio::time::sleep(Duration::from_secs(60)).await;
                }
                Ok::<_, Error>(leading.term())
            }),
    )
    .await
    .expect("run ends once the second term's work returns")
    .unwrap();
    let terms = terms.into_inner().unwrap();
    assert_eq!(terms.len(), 2, "the work ran once per term: {terms:?}");
    assert!(terms[1] > terms[0], "the second term is greater: {terms:?}");
    assert_eq!(ran, terms[1]);
    assert_eq!(
        client.election(&name).leader().await.unwrap(),
        None,
        "run resigned after the work returned"
    );

    let election = client.election(&name).with_options(
        LockOptions::new()
            .ttl(Duration::from_millis(300))
            .max_hold(Duration::from_millis(600)),
    );
    let once = election.run(async |_| {
        tokio::time::sleep(Duration::from_secs(60)).await;
        Ok::<_, Error>(())
    });
    let lost = tokio::time::timeout(Duration::from_secs(20), once)
        .await
        .expect("without requeue, run ends at the loss");
    expect_kind(
        lost,
        ErrorKind::LockLost,
        "a lost leadership without requeue",
    );
}

/// `Client::close` during `Election::run` (with `requeue`): the leader's work is stopped
/// before its grant is released (it was still held when the work ended), `run` fails with
/// `LockLost` and campaigns no more, and another candidate is elected.
///
/// # Examples
///
/// ```
/// # distlock_testkit::block_on(async {
/// distlock_testkit::conformance::election_run_ends_before_a_close_releases(&distlock_testkit::Target::new("memory://doc")).await;
/// # });
/// ```
pub async fn election_run_ends_before_a_close_releases(target: &Target) {
    let name = unique("election-close");
    let (client, other) = (target.client().await, target.client().await);
    let (started, held_at_end) = (tokio::sync::Notify::new(), AtomicU32::new(0));
    let election = client.election(&name).identity("closing").requeue(true);
    let run = election.run(async |leading| {
        // Marks, as the work is dropped, whether the grant was still held then.
        struct AtEnd<'a>(&'a distlock::Leadership, &'a AtomicU32);
        impl Drop for AtEnd<'_> {
            fn drop(&mut self) {
                let held = u32::from(self.0.health().is_valid()) + 1;
                self.1.store(held, Ordering::SeqCst);
            }
        }
        let _at_end = AtEnd(leading, &held_at_end);
        started.notify_one();
        tokio::time::sleep(Duration::from_secs(60)).await;
        Ok::<_, Error>(())
    });
    let closer = async {
        started.notified().await;
        client.close().await
    };
    let (ran, closed) =
        tokio::time::timeout(Duration::from_secs(20), async { tokio::join!(run, closer) })
            .await
            .expect("close stops the run");
    closed.unwrap();
    expect_kind(ran, ErrorKind::LockLost, "a run its client closed");
    assert_eq!(
        held_at_end.load(Ordering::SeqCst),
        2,
        "the work ended while the grant was still held"
    );
    let next = other.election(&name).identity("next");
    let leading = tokio::time::timeout(Duration::from_secs(10), next.campaign())
        .await
        .expect("another candidate is elected")
        .unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let leader = next.leader().await.unwrap().map(|l| l.identity);
    assert_eq!(
        leader.as_deref(),
        Some("next"),
        "the closed run campaigned no more"
    );
    leading.resign().await.unwrap();
}

/// The leader `seen` shows once it is `wanted` (`what`, seen within [`OBSERVED_WITHIN`]).
pub(super) async fn shown(
    seen: &mut tokio::sync::watch::Receiver<Option<LeaderInfo>>,
    what: &str,
    wanted: impl Fn(&LeaderInfo) -> bool,
) -> LeaderInfo {
    let found = tokio::time::timeout(
        OBSERVED_WITHIN,
        seen.wait_for(|l| l.as_ref().is_some_and(&wanted)),
    )
    .await
    .unwrap_or_else(|_| panic!("{what} is observed within {OBSERVED_WITHIN:?}"))
    .expect("the observer runs")
    .clone();
    found.unwrap_or_else(|| unreachable!("wait_for found a leader"))
}

/// A leader hands over to a chosen candidate ahead of one that waited longer: the chosen
/// one leads with a greater term, the other still waits; a hand-over nobody takes lapses,
/// the leadership is resigned and the waiting candidate wins.
///
/// # Examples
///
/// ```
/// # distlock_testkit::block_on(async {
/// distlock_testkit::conformance::election_hands_over_to_a_chosen_candidate(&distlock_testkit::Target::new("memory://doc")).await;
/// # });
/// ```
pub async fn election_hands_over_to_a_chosen_candidate(target: &Target) {
    let name = unique("hand-over");
    let (a, b, c) = (
        target.client().await,
        target.client().await,
        target.client().await,
    );
    let first = a.election(&name).identity("a").campaign().await.unwrap();
    let waiting = {
        let election = c.election(&name).identity("c");
        tokio::spawn(async move { election.campaign().await })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    let chosen = {
        let election = b
            .election(&name)
            .identity("b")
            .accepts_hand_overs(true)
            .observe_every(Duration::from_millis(50));
        tokio::spawn(async move { election.campaign().await })
    };
    let first_term = first.term();
    tokio::time::timeout(
        Duration::from_secs(10),
        first.hand_over_to("b", Duration::from_secs(5)),
    )
    .await
    .expect("the chosen candidate takes it within the window")
    .unwrap();
    let second = tokio::time::timeout(Duration::from_secs(5), chosen)
        .await
        .expect("the chosen candidate leads")
        .unwrap()
        .unwrap();
    assert!(second.term() > first_term, "terms strictly increase");
    assert_eq!(second.identity(), "b");
    let shown = c.election(&name).leader().await.unwrap().expect("a leader");
    assert_eq!((shown.identity.as_str(), shown.term), ("b", second.term()));
    assert!(!waiting.is_finished(), "the other candidate still waits");

    let lapsed = second
        .hand_over_to("nobody", Duration::from_millis(300))
        .await;
    expect_kind(lapsed, ErrorKind::Timeout, "a hand-over nobody takes");
    let third = tokio::time::timeout(Duration::from_secs(10), waiting)
        .await
        .expect("the waiting candidate wins once the leadership is resigned")
        .unwrap()
        .unwrap();
    assert_eq!(third.identity(), "c");
    third.resign().await.unwrap();
}
