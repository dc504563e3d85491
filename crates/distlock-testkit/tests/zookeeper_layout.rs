//! The ZooKeeper layout's edges: names that look like a lock's own nodes, a mutex and a
//! semaphore asked for at once on one name, and the token `status` shows for a mutex
//! granted after a wait; each against a real ZooKeeper started for the test.

use std::time::Duration;

async fn target() -> distlock_testkit::Target {
    distlock_testkit::zookeeper_target().await
}

/// Names that would lie inside another lock's node — a semaphore's `locks` and `leases`, a
/// contender's name — are locks of their own (escaped, see the crate docs): each is held
/// beside the lock above it, which neither takes it for a semaphore nor queues behind it,
/// and `status` lists them all, with a lock nested under a semaphore.
#[test]
fn names_like_a_locks_own_nodes_are_locks_of_their_own() {
    distlock_testkit::block_on(async {
        let target = target().await;
        let (a, b) = (target.client().await, target.client().await);
        let held = |name: &'static str, client: &distlock::Client| {
            let mutex = client.mutex(name);
            async move {
                let guard = mutex.try_lock().await.unwrap();
                guard.unwrap_or_else(|| panic!("`{name}` is free"))
            }
        };
        let inner = held("job/locks", &b).await;
        let contender = held("job/lock-0000000001", &b).await;
        let job = held("job", &a).await;
        let leases = held("pool/leases", &b).await;
        let queue = held("pool/locks", &b).await;
        let permit = a.semaphore("pool", 1).try_acquire().await.unwrap();
        let permit = permit.expect("`pool/locks` and `pool/leases` take none of `pool`'s places");
        let nested = held("pool/x", &b).await;
        let mut listed: Vec<String> = a
            .status(None)
            .await
            .unwrap()
            .into_iter()
            .map(|state| state.name)
            .collect();
        listed.sort();
        assert_eq!(
            listed,
            [
                "job",
                "job/lock-0000000001",
                "job/locks",
                "pool",
                "pool/leases",
                "pool/locks",
                "pool/x"
            ],
            "status lists every lock, one nested under a semaphore too"
        );
        for guard in [inner, contender, job, leases, queue, nested] {
            guard.release().await.unwrap();
        }
        permit.release().await.unwrap();
    });
}

/// A mutex and a semaphore asked for at once on one name are never both granted: each
/// makes its node before it reads the other's place, so the later one sees the earlier.
#[test]
fn a_mutex_and_a_semaphore_asked_at_once_on_one_name_are_never_both_granted() {
    distlock_testkit::block_on(async {
        let target = target().await;
        let (a, b) = (target.client().await, target.client().await);
        let mut refused = 0;
        for round in 0..20 {
            let name = format!("both-{round}");
            let (mutex, semaphore) = (a.mutex(&name), b.semaphore(&name, 2));
            let (locked, acquired) = tokio::join!(mutex.try_lock(), semaphore.try_acquire());
            for outcome in [locked.as_ref().err(), acquired.as_ref().err()]
                .into_iter()
                .flatten()
            {
                assert_eq!(
                    outcome.kind(),
                    distlock::ErrorKind::InvalidInput,
                    "{outcome}"
                );
                refused += 1;
            }
            let (locked, acquired) = (locked.ok().flatten(), acquired.ok().flatten());
            assert!(
                locked.is_none() || acquired.is_none(),
                "round {round}: `{name}` held as a mutex and as a semaphore at once"
            );
            if let Some(guard) = locked {
                guard.release().await.unwrap();
            }
            if let Some(permit) = acquired {
                permit.release().await.unwrap();
            }
        }
        assert!(refused >= 20, "every round refused one of them ({refused})");
    });
}

/// A mutex granted after a wait gets a token above its node's creation (the queue listing's
/// `pzxid`): its own client's `status` shows that token at once, and another client's once
/// the record with it arrives, 10 ms and a round trip after the grant.
#[test]
fn status_shows_the_token_of_a_holder_granted_after_a_wait() {
    distlock_testkit::block_on(async {
        let target = target().await;
        let (a, b) = (target.client().await, target.client().await);
        let first = a.mutex("after-wait").lock().await.unwrap();
        let waiter = tokio::spawn(async move {
            let mutex = b.mutex("after-wait");
            let guard = mutex.lock_timeout(Duration::from_secs(20)).await;
            (guard, b)
        });
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while a.status(Some("after-wait")).await.unwrap()[0]
            .waiters
            .is_empty()
        {
            assert!(
                std::time::Instant::now() < deadline,
                "the waiter never queued"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let before = first.fencing_token();
        first.release().await.unwrap();
        let (next, b) = waiter.await.unwrap();
        let next = next.unwrap();
        assert!(next.fencing_token() > before);
        let shown = |states: Vec<distlock::LockState>| -> Vec<u64> {
            states[0].holders.iter().map(|h| h.fencing_token).collect()
        };
        assert_eq!(
            shown(b.status(Some("after-wait")).await.unwrap()),
            [next.fencing_token()],
            "the holder's own client shows its token before the record is written"
        );
        let deadline = std::time::Instant::now() + Duration::from_secs(2);
        loop {
            let tokens = shown(a.status(Some("after-wait")).await.unwrap());
            if tokens == [next.fencing_token()] {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "status shows {tokens:?}, the holder has {}",
                next.fencing_token()
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        next.release().await.unwrap();
    });
}
