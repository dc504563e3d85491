//! ZooKeeper ensemble faults under a held lock: the leader killed (the session moves to
//! another member, the guard is held again, and no one else is granted the lock
//! meanwhile), and the quorum lost (the guard goes `AtRisk`, then `Lost`; once the quorum
//! is back the next holder's token is greater).

use std::time::Duration;

use distlock::Health;

/// How long the tests give the ensemble to elect a leader again.
const ELECTION: Duration = Duration::from_secs(30);

#[test]
fn the_leader_killed_under_a_held_lock_gives_no_second_holder() {
    distlock_testkit::block_on(async {
        let mut ensemble =
            distlock_testkit::zookeeper_ensemble(3).unwrap_or_else(|e| panic!("{e}"));
        let url = format!("zk://{}/ensemble?session_timeout=6s", ensemble.hosts());
        let holder = distlock::Client::connect(&url).await.unwrap();
        let other = distlock::Client::connect(&url).await.unwrap();
        let guard = holder.mutex("leader").lock().await.unwrap();

        let leader = ensemble.leader().expect("the ensemble has a leader");
        ensemble.members[leader].kill();
        let deadline = std::time::Instant::now() + ELECTION;
        let mut seen_again = false;
        while std::time::Instant::now() < deadline {
            // Whatever the guard reports, nobody else holds the lock while it is not Lost.
            if let Ok(Some(_)) = other.mutex("leader").try_lock().await {
                assert_eq!(
                    guard.health(),
                    Health::Lost,
                    "a second holder while the first was not told it lost the lock"
                );
            }
            if guard.health() == Health::Held && ensemble.wait_serving(Duration::ZERO) {
                seen_again = true;
                break;
            }
            if guard.health() == Health::Lost {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(
            seen_again || guard.health() == Health::Lost,
            "after the election the guard is held again, or lost — never silently held"
        );
        let lost_token = guard.fencing_token();
        if seen_again {
            assert!(other.mutex("leader").try_lock().await.unwrap().is_none());
            guard.release().await.unwrap();
        }
        let next =
            distlock_testkit::take_over(&url, "leader", lost_token, Duration::from_secs(15)).await;
        next.release().await.unwrap();
    });
}

#[test]
fn the_quorum_lost_puts_the_guard_at_risk_then_lost() {
    distlock_testkit::block_on(async {
        let mut ensemble =
            distlock_testkit::zookeeper_ensemble(3).unwrap_or_else(|e| panic!("{e}"));
        let url = format!("zk://{}/ensemble?session_timeout=2s", ensemble.hosts());
        let holder = distlock::Client::connect(&url).await.unwrap();
        let guard = holder.mutex("quorum").lock().await.unwrap();

        ensemble.members[0].kill();
        ensemble.members[1].kill();
        assert!(
            distlock_testkit::wait_for_health(&guard, Health::AtRisk, Duration::from_secs(5)).await,
            "a member without a quorum answers nothing: the guard is at risk"
        );
        tokio::time::timeout(Duration::from_secs(5), guard.lost())
            .await
            .expect("without a quorum the guard is lost within the session timeout");

        for member in &mut ensemble.members[..2] {
            member.restart().unwrap_or_else(|e| panic!("{e}"));
        }
        assert!(ensemble.wait_serving(ELECTION), "the quorum is back");
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
