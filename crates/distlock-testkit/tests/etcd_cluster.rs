//! etcd cluster faults under a held lock: the leader killed (the client's keep-alives move
//! to another member, and no one else is granted the lock meanwhile), and the quorum lost
//! (the guard goes `AtRisk`, then `Lost` before the lease could expire; once the quorum is
//! back the next holder's token is greater); a member that hangs under a waiter's watch
//! stream (the waiter moves to a member that serves).

use std::time::{Duration, Instant};

use distlock::Health;

/// How long the tests give the cluster to elect a leader again.
const ELECTION: Duration = Duration::from_secs(20);

#[test]
fn the_leader_killed_under_a_held_lock_gives_no_second_holder() {
    distlock_testkit::block_on(async {
        let mut cluster = distlock_testkit::etcd_cluster(3).unwrap_or_else(|e| panic!("{e}"));
        let url = format!("etcd://{}/cluster?session_ttl=6s", cluster.hosts());
        let holder = distlock::Client::connect(&url).await.unwrap();
        let other = distlock::Client::connect(&url).await.unwrap();
        let guard = holder.mutex("leader").lock().await.unwrap();
        let token = guard.fencing_token();

        let leader = cluster.leader().expect("the cluster has a leader");
        cluster.members[leader].kill();
        let deadline = Instant::now() + ELECTION;
        let mut second_holders = 0;
        let mut checks = 0;
        // Whatever the guard reports, nobody else may hold the lock while it is not Lost;
        // look for a while after the new leader serves, since the lease moves with it.
        while Instant::now() < deadline {
            checks += 1;
            if let Ok(Some(intruder)) = other.mutex("leader").try_lock().await {
                assert_eq!(
                    guard.health(),
                    Health::Lost,
                    "a second holder (token {}) while the first was not told it lost the lock",
                    intruder.fencing_token()
                );
                second_holders += 1;
                intruder.release().await.unwrap();
            }
            if guard.health() == Health::Lost
                || checks >= 30 && cluster.wait_serving(Duration::ZERO)
            {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(
            cluster.wait_serving(Duration::ZERO),
            "two members elect a leader within {ELECTION:?}"
        );
        // A 6 s lease outlives an election of a second or two: the guard is held again.
        assert!(
            distlock_testkit::wait_for_health(&guard, Health::Held, Duration::from_secs(5)).await,
            "the guard is held again once a leader serves, not {:?}",
            guard.health()
        );
        assert_eq!(second_holders, 0, "nobody else held the lock meanwhile");
        // Within a probe or two, requests go only to the members that serve: every call
        // answers, none fails on the dead member.
        tokio::time::sleep(Duration::from_secs(2)).await;
        for _ in 0..20 {
            assert!(
                other.mutex("leader").try_lock().await.unwrap().is_none(),
                "the holder's key outlived the election"
            );
        }
        guard.release().await.unwrap();
        let next =
            distlock_testkit::take_over(&url, "leader", token, Duration::from_secs(15)).await;
        next.release().await.unwrap();

        // A client that connects while a member is down speaks to the others only.
        let late = distlock::Client::connect(&url).await.unwrap();
        for _ in 0..20 {
            let guard = late.mutex("late").try_lock().await.unwrap();
            guard.expect("the lock is free").release().await.unwrap();
        }
    });
}

#[test]
fn the_quorum_lost_puts_the_guard_at_risk_then_lost() {
    distlock_testkit::block_on(async {
        let mut cluster = distlock_testkit::etcd_cluster(3).unwrap_or_else(|e| panic!("{e}"));
        let url = format!("etcd://{}/cluster?session_ttl=3s", cluster.hosts());
        let holder = distlock::Client::connect(&url).await.unwrap();
        let guard = holder.mutex("quorum").lock().await.unwrap();

        // What is left has no quorum: it answers no keep-alive, and expires no lease.
        cluster.members[0].kill();
        cluster.members[1].kill();
        assert!(
            distlock_testkit::wait_for_health(&guard, Health::AtRisk, Duration::from_secs(4)).await,
            "a member without a quorum renews no lease: the guard is at risk, not {:?}",
            guard.health()
        );
        tokio::time::timeout(Duration::from_secs(4), guard.lost())
            .await
            .expect("without a quorum the guard is lost within a lease of the last keep-alive");
        assert!(
            guard.safe_until() <= Instant::now(),
            "a lost guard is no longer safe"
        );

        for member in &mut cluster.members[..2] {
            member.restart().unwrap_or_else(|e| panic!("{e}"));
        }
        assert!(cluster.wait_serving(ELECTION), "the quorum is back");
        let next = distlock_testkit::take_over(
            &url,
            "quorum",
            guard.fencing_token(),
            Duration::from_secs(15),
        )
        .await;
        next.release().await.unwrap();
    });
}

/// A member that hangs (SIGSTOP) under a waiter's watch stream: the client stops sending to
/// it within a probe and moves its watches to a member that serves, so the waiter is still
/// granted the lock once it is released, long before the member runs again.
#[test]
fn a_waiter_whose_watch_stream_hangs_moves_to_a_member_that_serves() {
    distlock_testkit::block_on(async {
        let cluster = distlock_testkit::etcd_cluster(3).unwrap_or_else(|e| panic!("{e}"));
        let url = format!("etcd://{}/hung?session_ttl=10s", cluster.hosts());
        let holder = distlock::Client::connect(&url).await.unwrap();
        let guard = holder.mutex("watched").lock().await.unwrap();
        // The holder's own key is watched from 100 ms after its grant: let that stream open
        // first, so the next one is the waiter's.
        tokio::time::sleep(Duration::from_millis(500)).await;
        let streams = |cluster: &distlock_testkit::EtcdCluster| -> Vec<u64> {
            let counts = cluster
                .members
                .iter()
                .map(|m| distlock_testkit::etcd_watch_counts(m.addr()));
            counts.map(|c| c.expect("etcd's metrics").0).collect()
        };
        let before = streams(&cluster);
        let waiter = distlock::Client::connect(&url).await.unwrap();
        let waiting = tokio::spawn(async move {
            let guard = waiter
                .mutex("watched")
                .lock_timeout(Duration::from_secs(30))
                .await;
            (guard, Instant::now())
        });
        let deadline = Instant::now() + Duration::from_secs(10);
        let hung = loop {
            let now = streams(&cluster);
            if let Some(member) = (0..now.len()).find(|&m| now[m] > before[m]) {
                break member;
            }
            assert!(
                Instant::now() < deadline,
                "the waiter's watch stream never opened"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        cluster.members[hung].pause();
        // The holder's release may meet the hung member: a delete left unanswered is made
        // again once the holder's client reaches a member that serves.
        let _ = guard.release().await;
        let at_release = Instant::now();
        let (granted, at) = waiting.await.unwrap();
        let granted = granted.expect("the waiter is granted though its stream's member hangs");
        assert!(
            at.duration_since(at_release) < Duration::from_secs(6),
            "granted {:?} after the release",
            at.duration_since(at_release)
        );
        granted.release().await.unwrap();
        cluster.members[hung].resume();
    });
}
