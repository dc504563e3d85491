//! The conformance suite and cross-process tests against a real Redis Cluster of three
//! primaries, and a failover under a held lock (primaries with replicas).

use std::time::{Duration, Instant};

use distlock::{Health, LockOptions};

async fn target() -> distlock_testkit::Target {
    let cluster = distlock_testkit::redis_cluster(3, 0).unwrap_or_else(|e| panic!("{e}"));
    distlock_testkit::Target::new(cluster.url()).keep(cluster)
}

distlock_testkit::conformance_suite!(target, liveness = Lease);
distlock_testkit::process_suite!(target);

/// The cluster with `first_try=commands` (see `redis_first_try.rs`): its four commands go
/// to the lock's slot as one pipeline.
mod first_try {
    async fn target() -> distlock_testkit::Target {
        let cluster = distlock_testkit::redis_cluster(3, 0).unwrap_or_else(|e| panic!("{e}"));
        let url = cluster.url();
        let joint = if url.contains('?') { '&' } else { '?' };
        distlock_testkit::Target::new(format!("{url}{joint}first_try=commands")).keep(cluster)
    }

    distlock_testkit::conformance_suite!(@tests target;
        mutual_exclusion_across_tasks,
        fencing_tokens_strictly_increase,
        fencing_tokens_increase_in_grant_order_for_every_kind,
        cancelled_acquire_leaves_nothing,
        rwlock_waiting_writer_blocks_new_readers,
        fair_mode_grants_in_arrival_order,
        notes_are_fenced_and_stamped_by_the_store,
    );
}

/// A primary holding a lock is killed and its replica promoted. The guard goes at risk
/// while renewals fail; it never reads `Held` past its `safe_until` without a renewal that
/// moved it. Afterwards it is either still held — the replica had the lock (replication is
/// asynchronous but fast) and renewals resumed on it — and then nobody else gets the lock, or
/// lost, and then the next holder's token is greater.
#[test]
fn a_primary_killed_under_a_held_lock_is_failed_over_and_the_guard_tells() {
    distlock_testkit::block_on(async {
        let mut cluster = distlock_testkit::redis_cluster(3, 1).unwrap_or_else(|e| panic!("{e}"));
        let (holder, other) = (
            distlock::Client::connect(&cluster.url()).await.unwrap(),
            distlock::Client::connect(&cluster.url()).await.unwrap(),
        );
        let ttl = LockOptions::new().ttl(Duration::from_secs(4));
        let guard = holder.mutex("job").lock_with(&ttl).await.unwrap();
        let token = guard.fencing_token();
        let primary = cluster
            .primary_of("job")
            .expect("a primary serves the lock's slot");
        cluster.nodes[primary].kill();

        let mut seen = Vec::new();
        let end = Instant::now() + Duration::from_secs(10);
        while Instant::now() < end {
            let health = guard.health();
            if health == Health::Held {
                assert!(
                    Instant::now() <= guard.safe_until(),
                    "the guard read Held past its safe_until"
                );
            }
            if seen.last() != Some(&health) {
                seen.push(health);
            }
            if health == Health::Lost {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        eprintln!("the guard went through {seen:?}");
        assert!(
            seen.contains(&Health::AtRisk) || seen.contains(&Health::Lost),
            "{seen:?}"
        );
        let wait = LockOptions::new().wait(Duration::from_secs(10));
        match guard.health() {
            Health::Lost => {
                let next = other.mutex("job").lock_with(&wait).await.unwrap();
                assert!(next.fencing_token() > token);
            }
            health => {
                assert!(health.is_valid(), "{health:?}");
                assert!(other.mutex("job").try_lock().await.unwrap().is_none());
                guard.release().await.unwrap();
                let next = other.mutex("job").lock_with(&wait).await.unwrap();
                assert!(next.fencing_token() > token);
            }
        }
    });
}

#[test]
fn a_redis_url_naming_one_cluster_node_is_used_as_the_cluster() {
    distlock_testkit::block_on(async {
        let cluster = distlock_testkit::redis_cluster(3, 0).unwrap_or_else(|e| panic!("{e}"));
        let url = format!("redis://{}", cluster.nodes[0].addr());
        let client = distlock::Client::connect(&url).await.unwrap();
        let names = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta"];
        let served: std::collections::BTreeSet<_> =
            names.iter().filter_map(|n| cluster.primary_of(n)).collect();
        assert!(served.len() > 1, "the names should span primaries");
        let mut guards = Vec::new();
        for name in names {
            guards.push(client.mutex(name).lock().await.unwrap());
        }
        let states = client.status(None).await.unwrap();
        assert_eq!(states.len(), names.len(), "status walks every primary");
        for guard in guards {
            guard.release().await.unwrap();
        }
    });
}
