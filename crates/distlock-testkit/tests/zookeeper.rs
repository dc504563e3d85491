//! The conformance suites (session and general), cross-process tests and process faults
//! against a real ZooKeeper started for each test.

async fn target() -> distlock_testkit::Target {
    distlock_testkit::zookeeper_target().await
}

distlock_testkit::conformance_suite!(target, liveness = Session, lacks = [adopt]);
distlock_testkit::process_suite!(target, lacks = [adopt]);

use std::time::Duration;

use distlock::Health;
use zookeeper_client as zk;

/// A holder whose node an operator deletes learns it through the watch on its own node and
/// turns `Lost` alone (its other guards, in the same live session, stay held); the next
/// holder's token is greater.
#[test]
fn a_holder_whose_node_is_deleted_by_hand_turns_lost_alone() {
    distlock_testkit::block_on(async {
        let server = distlock_testkit::zookeeper_server().unwrap_or_else(|e| panic!("{e}"));
        let url = format!("zk://{}/ops?session_timeout=2s", server.addr());
        distlock_testkit::a_holder_deleted_by_hand_turns_lost_alone(&url, || async {
            let operator = zk::Client::connect(&server.addr().to_string())
                .await
                .unwrap();
            let nodes = operator.list_children("/ops/held").await.unwrap();
            assert_eq!(nodes.len(), 1, "{nodes:?}");
            operator
                .delete(&format!("/ops/held/{}", nodes[0]), None)
                .await
                .unwrap();
        })
        .await;
    });
}

/// The server frozen (SIGSTOP) under a held lock: the guard goes `AtRisk`, then `Lost`
/// before the server runs again; the next holder's token is greater.
#[test]
fn a_paused_server_puts_the_guard_at_risk_then_lost() {
    distlock_testkit::block_on(async {
        let server = distlock_testkit::zookeeper_server().unwrap_or_else(|e| panic!("{e}"));
        let url = format!("zk://{}/faults?session_timeout=1500ms", server.addr());
        distlock_testkit::lose_to_a_paused_server(&url, &server, "paused").await;
    });
}

/// A client whose link goes silent (the proxy black-holes it): its guard goes `AtRisk`,
/// then `Lost` — before the server expires the session and deletes its node, as a watch
/// from another client sees — and the next holder's token is greater.
#[test]
fn a_client_cut_off_is_lost_before_the_server_expires_its_session() {
    distlock_testkit::block_on(async {
        let server = distlock_testkit::zookeeper_server().unwrap_or_else(|e| panic!("{e}"));
        let proxy = distlock_testkit::FaultProxy::start(server.addr())
            .await
            .unwrap();
        let through = format!("zk://{}/faults?session_timeout=1500ms", proxy.addr());
        let direct = format!("zk://{}/faults", server.addr());
        let client = distlock::Client::connect(&through).await.unwrap();
        let guard = client.mutex("cut").lock().await.unwrap();
        let observer = zk::Client::connect(&server.addr().to_string())
            .await
            .unwrap();
        let nodes = observer.list_children("/faults/cut").await.unwrap();
        let (stat, watcher) = observer
            .check_and_watch_stat(&format!("/faults/cut/{}", nodes[0]))
            .await
            .unwrap();
        assert!(stat.is_some());
        let deleted = tokio::spawn(async move {
            let event = watcher.changed().await;
            assert_eq!(event.event_type, zk::EventType::NodeDeleted);
            std::time::Instant::now()
        });
        distlock_testkit::a_cut_off_holder_is_lost_before_the_store_lets_go(
            &guard, &proxy, &direct, deleted,
        )
        .await;
    });
}

/// With `user:password` in the URL every node a client creates belongs to that digest
/// identity: a client with another password, or none, can neither queue under the lock nor
/// create new locks under the base, and gets a clear error that shows no password.
#[test]
fn digest_credentials_guard_the_nodes_and_never_show() {
    distlock_testkit::block_on(async {
        let server = distlock_testkit::zookeeper_server().unwrap_or_else(|e| panic!("{e}"));
        let hosts = server.addr().to_string();
        let owner = distlock::Client::connect(&format!("zk://app:s3cr%40t@{hosts}/secure"))
            .await
            .unwrap();
        let guard = owner.mutex("jobs/x").lock().await.unwrap();
        assert!(!format!("{owner:?}").contains("s3cr"));

        for url in [
            format!("zk://app:wr%3Ang@{hosts}/secure"),
            format!("zk://{hosts}/secure"),
        ] {
            let intruder = distlock::Client::connect(&url).await.unwrap();
            for name in ["jobs/x", "jobs/y"] {
                let err = intruder.mutex(name).try_lock().await.unwrap_err();
                assert_eq!(
                    err.kind(),
                    distlock::ErrorKind::InvalidInput,
                    "{url} {name}: {err}"
                );
                let shown = format!("{err} {err:?}");
                for secret in ["s3cr", "wr:ng", "wr%3Ang"] {
                    assert!(!shown.contains(secret), "{shown}");
                }
            }
        }
        assert_eq!(guard.health(), Health::Held);
        guard.release().await.unwrap();
    });
}

/// `zks://` reaches the server's TLS port when `tls_ca` is the authority of its
/// certificate; another authority is refused, and no output shows the password.
#[test]
fn tls_with_the_servers_authority_works_and_another_is_refused() {
    distlock_testkit::block_on(async {
        let dirs = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let certs = distlock_testkit::TestCertificates::make(dirs.0.path()).unwrap();
        let stranger = distlock_testkit::TestCertificates::make(dirs.1.path()).unwrap();
        let (_server, secure) =
            distlock_testkit::zookeeper_tls_server(&certs).unwrap_or_else(|e| panic!("{e}"));
        let url = |ca: &std::path::Path| {
            format!(
                "zks://app:s3cret@{secure}/tls?session_timeout=2s&tls_ca={}",
                ca.display()
            )
        };

        let client = distlock::Client::connect(&url(&certs.ca)).await.unwrap();
        let guard = client.mutex("over-tls").lock().await.unwrap();
        assert_eq!(
            client.status(Some("over-tls")).await.unwrap()[0]
                .holders
                .len(),
            1
        );
        guard.release().await.unwrap();

        let err = distlock::Client::connect(&url(&stranger.ca))
            .await
            .unwrap_err();
        assert_eq!(err.kind(), distlock::ErrorKind::Unavailable, "{err}");
        assert!(err.to_string().contains("TLS"), "{err}");
        let missing = distlock::Client::connect(&url(std::path::Path::new("/nonexistent/ca.pem")))
            .await
            .unwrap_err();
        assert_eq!(
            missing.kind(),
            distlock::ErrorKind::InvalidInput,
            "{missing}"
        );
        for shown in [format!("{err} {err:?}"), format!("{missing} {missing:?}")] {
            assert!(!shown.contains("s3cret"), "{shown}");
        }
    });
}

/// Curator's and kazoo's contenders show in `status` as foreign holders and waiters, in
/// queue order, and exclude distlock as their own would.
#[test]
fn status_shows_curator_and_kazoo_contenders() {
    distlock_testkit::block_on(async {
        let server = distlock_testkit::zookeeper_server().unwrap_or_else(|e| panic!("{e}"));
        let peer = zk::Client::connect(&server.addr().to_string())
            .await
            .unwrap();
        let open = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
        peer.mkdir("/peers/shared", &open).await.unwrap();
        let contender = zk::CreateMode::EphemeralSequential.with_acls(zk::Acls::anyone_all());
        let curator = "/peers/shared/_c_0f8fad5b-d9cb-469f-a165-70867728950e-lock-";
        peer.create(curator, b"10.0.0.7", &contender).await.unwrap();
        let kazoo = "/peers/shared/6fa459eaee8a__lock__";
        peer.create(kazoo, b"worker-3", &contender).await.unwrap();

        let client = distlock::Client::connect(&format!("zk://{}/peers", server.addr()))
            .await
            .unwrap();
        assert!(client.mutex("shared").try_lock().await.unwrap().is_none());
        let state = &client.status(Some("shared")).await.unwrap()[0];
        assert_eq!(state.holders.len(), 1);
        assert!(state.holders[0].owner.contains("-lock-"), "{state:?}");
        assert_eq!(state.holders[0].meta.host, "10.0.0.7");
        assert_eq!(state.waiters.len(), 1);
        assert!(state.waiters[0].owner.contains("__lock__"), "{state:?}");
        let all = client.status(None).await.unwrap();
        assert_eq!(all.len(), 1, "{all:?}");
        assert_eq!(all[0].name, "shared");
        assert!(
            !state.holders[0].no_expiry,
            "an ephemeral node ends with its session"
        );

        // A persistent contender (a program that made its node by hand) ends with no
        // session: status says it has no expiry.
        peer.mkdir("/peers/stuck", &open).await.unwrap();
        let persistent = zk::CreateMode::PersistentSequential.with_acls(zk::Acls::anyone_all());
        let stuck = "/peers/stuck/_c_1f8fad5b-d9cb-469f-a165-70867728950e-lock-";
        peer.create(stuck, b"10.0.0.8", &persistent).await.unwrap();
        let state = &client.status(Some("stuck")).await.unwrap()[0];
        assert_eq!(state.holders.len(), 1, "{state:?}");
        assert!(state.holders[0].no_expiry, "{state:?}");
        assert_eq!(state.holders[0].remaining_ms, None);
    });
}

/// An acquire dropped at any point — before, during or after its node's create, while it
/// waits — leaves no node behind: the core cancels it and the backend finds the node by
/// its unique prefix if the create's answer never came.
#[test]
fn acquires_dropped_at_any_point_leave_no_node() {
    distlock_testkit::block_on(async {
        let server = distlock_testkit::zookeeper_server().unwrap_or_else(|e| panic!("{e}"));
        let url = format!("zk://{}/drops", server.addr());
        let holder = distlock::Client::connect(&url).await.unwrap();
        let waiter = distlock::Client::connect(&url).await.unwrap();
        let guard = holder.mutex("held").lock().await.unwrap();
        for step in 0..60u64 {
            let patience = Duration::from_micros(step * 50);
            let _ = tokio::time::timeout(patience, waiter.mutex("held").lock()).await;
        }
        let observer = zk::Client::connect(&server.addr().to_string())
            .await
            .unwrap();
        let settled = async {
            loop {
                let nodes = observer.list_children("/drops/held").await.unwrap();
                if nodes.len() == 1 {
                    return nodes;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        };
        let nodes = tokio::time::timeout(Duration::from_secs(10), settled)
            .await
            .expect("every dropped acquire's node is deleted within 10 s");
        assert_eq!(nodes.len(), 1, "only the holder's node is left");
        guard.release().await.unwrap();
        let next = waiter
            .mutex("held")
            .lock_timeout(Duration::from_secs(5))
            .await
            .expect("no orphan node holds the lock for nobody");
        next.release().await.unwrap();
    });
}

/// Readers granted together, when the writer ahead of them leaves, each get a token of
/// their own, stamped at grant: above the writer's before them, below the writer's after
/// them, and what `status` shows for each.
#[test]
fn readers_granted_together_get_tokens_of_their_own_in_grant_order() {
    distlock_testkit::block_on(async {
        let server = distlock_testkit::zookeeper_server().unwrap_or_else(|e| panic!("{e}"));
        let url = format!("zk://{}/tokens", server.addr());
        let mut clients = Vec::new();
        for _ in 0..4 {
            clients.push(distlock::Client::connect(&url).await.unwrap());
        }
        let first = clients[0].rwlock("rw").write().await.unwrap();
        let mut readers = Vec::new();
        for client in &clients[1..3] {
            let client = client.clone();
            readers.push(tokio::spawn(async move {
                client.rwlock("rw").read().await.unwrap()
            }));
        }
        let observer = zk::Client::connect(&server.addr().to_string())
            .await
            .unwrap();
        let queued = async {
            while observer.list_children("/tokens/rw").await.unwrap().len() < 3 {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        };
        tokio::time::timeout(Duration::from_secs(5), queued)
            .await
            .unwrap();
        let last = {
            let client = clients[3].clone();
            tokio::spawn(async move { client.rwlock("rw").write().await.unwrap() })
        };
        let queued = async {
            while observer.list_children("/tokens/rw").await.unwrap().len() < 4 {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        };
        tokio::time::timeout(Duration::from_secs(5), queued)
            .await
            .unwrap();

        let before = first.fencing_token();
        first.release().await.unwrap();
        let mut granted = Vec::new();
        for reader in readers {
            granted.push(
                tokio::time::timeout(Duration::from_secs(5), reader)
                    .await
                    .unwrap()
                    .unwrap(),
            );
        }
        let tokens: Vec<u64> = granted.iter().map(|g| g.fencing_token()).collect();
        assert_ne!(tokens[0], tokens[1], "each reader has a token of its own");
        assert!(
            tokens.iter().all(|t| *t > before),
            "{tokens:?} after {before}"
        );
        let state = &clients[0].status(Some("rw")).await.unwrap()[0];
        let mut shown: Vec<u64> = state.holders.iter().map(|h| h.fencing_token).collect();
        let mut expected = tokens.clone();
        shown.sort_unstable();
        expected.sort_unstable();
        assert_eq!(shown, expected, "status shows each reader's token");
        for reader in granted {
            reader.release().await.unwrap();
        }
        let after = tokio::time::timeout(Duration::from_secs(5), last)
            .await
            .unwrap()
            .unwrap();
        assert!(tokens.iter().all(|t| after.fencing_token() > *t));
        after.release().await.unwrap();
    });
}

/// A release whose delete gets no answer (the link black-holed, the release given up after
/// its operation timeout) is made again once the session answers: the node does not hold
/// the lock for nobody while the session lives on.
#[test]
fn a_release_without_an_answer_is_made_again_once_the_link_is_back() {
    distlock_testkit::block_on(async {
        let server = distlock_testkit::zookeeper_server().unwrap_or_else(|e| panic!("{e}"));
        let proxy = distlock_testkit::FaultProxy::start(server.addr())
            .await
            .unwrap();
        let through = format!("zk://{}/later?session_timeout=6s", proxy.addr());
        let client = distlock::Client::connect(&through).await.unwrap();
        let options = distlock::LockOptions::new().op_timeout(Duration::from_millis(200));
        let guard = client.mutex("held").lock_with(&options).await.unwrap();

        proxy.set(distlock_testkit::ProxyMode::BlackHole);
        assert!(guard.release().await.is_err(), "the release got no answer");
        tokio::time::sleep(Duration::from_millis(300)).await;
        proxy.set(distlock_testkit::ProxyMode::Pass);

        let direct = distlock::Client::connect(&format!("zk://{}/later", server.addr()))
            .await
            .unwrap();
        let next = direct
            .mutex("held")
            .lock_timeout(Duration::from_secs(5))
            .await
            .expect("the release is made again once the session answers");
        next.release().await.unwrap();
        assert_eq!(
            client.status(Some("held")).await.unwrap()[0].holders.len(),
            0
        );
    });
}

/// A client connected on one runtime serves on the next after the first ended: its
/// session, heartbeats and watches do not live on the runtime that connected it. A guard
/// taken on the second runtime stays held past the session timeout.
#[test]
fn a_client_outlives_the_runtime_that_connected_it() {
    let server = distlock_testkit::zookeeper_server().unwrap_or_else(|e| panic!("{e}"));
    let url = format!("zk://{}/runtimes?session_timeout=1s", server.addr());
    let first = tokio::runtime::Runtime::new().unwrap();
    let client = first.block_on(async {
        let client = distlock::Client::connect(&url).await.unwrap();
        client
            .mutex("x")
            .lock()
            .await
            .unwrap()
            .release()
            .await
            .unwrap();
        client
    });
    drop(first);
    let second = tokio::runtime::Runtime::new().unwrap();
    second.block_on(async {
        let guard = client.mutex("x").lock().await.unwrap();
        tokio::time::sleep(Duration::from_millis(2500)).await;
        assert_eq!(
            guard.health(),
            Health::Held,
            "held past the session timeout"
        );
        guard.release().await.unwrap();
    });
}

/// Names a user may pick, stored as ZooKeeper paths or escaped: each is a lock of its own,
/// and `status` gives each name back as it was.
#[test]
fn odd_names_are_locks_of_their_own_and_status_gives_them_back() {
    distlock_testkit::block_on(async {
        let server = distlock_testkit::zookeeper_server().unwrap_or_else(|e| panic!("{e}"));
        let url = format!("zk://{}/names", server.addr());
        distlock_testkit::odd_names_are_locks_of_their_own(&url).await;
    });
}

/// A server that hangs (SIGSTOP) mid-call: an acquire returns within its wait, a release
/// within its operation timeout.
#[test]
fn a_hung_server_bounds_every_call_by_its_deadline() {
    distlock_testkit::block_on(async {
        let server = distlock_testkit::zookeeper_server().unwrap_or_else(|e| panic!("{e}"));
        let url = format!("zk://{}/hung?session_timeout=10s", server.addr());
        distlock_testkit::a_hung_server_bounds_every_call(&url, &server).await;
    });
}

/// Durations no session can have are refused with the URL's rule, never a panic.
#[test]
fn session_timeouts_out_of_range_are_refused() {
    distlock_testkit::block_on(async {
        for timeout in ["300000000000y", "1ns", "0s", "-1s", "soon", ""] {
            let url = format!("zk://127.0.0.1:1/x?session_timeout={timeout}");
            let err = distlock::Client::connect(&url).await.unwrap_err();
            assert_eq!(
                err.kind(),
                distlock::ErrorKind::InvalidInput,
                "{timeout}: {err}"
            );
            assert!(err.to_string().contains("session_timeout"), "{err}");
        }
    });
}

/// A semaphore request at the head of the queue, waiting for room, whose lease node
/// someone deletes keeps its place: it makes its lease again and is granted before the
/// request queued behind it (a smaller fencing token), not sent to the back.
#[test]
fn a_semaphore_waiter_whose_lease_is_deleted_keeps_its_place() {
    distlock_testkit::block_on(async {
        let server = distlock_testkit::zookeeper_server().unwrap_or_else(|e| panic!("{e}"));
        let url = format!("zk://{}/sem", server.addr());
        let operator = zk::Client::connect(&server.addr().to_string())
            .await
            .unwrap();
        let children = |dir: &'static str| {
            let operator = operator.clone();
            async move { operator.list_children(dir).await.unwrap_or_default() }
        };
        let until = |dir: &'static str, count: usize| async move {
            let deadline = std::time::Instant::now() + Duration::from_secs(10);
            while children(dir).await.len() < count {
                assert!(
                    std::time::Instant::now() < deadline,
                    "{dir} never had {count} children"
                );
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        };
        let holder = distlock::Client::connect(&url).await.unwrap();
        let held = holder.semaphore("s", 2).acquire_many(2).await.unwrap();
        let acquire = |url: String| {
            tokio::spawn(async move {
                let client = distlock::Client::connect(&url).await.unwrap();
                let semaphore = client.semaphore("s", 2);
                let permit = tokio::time::timeout(Duration::from_secs(20), semaphore.acquire());
                let permit = permit.await;
                let permit = permit.expect("granted in time").unwrap();
                let token = permit.fencing_token();
                permit.release().await.unwrap();
                token
            })
        };
        let first = acquire(url.clone());
        until("/sem/s/leases", 3).await;
        let second = acquire(url.clone());
        until("/sem/s/locks", 2).await;

        let mut leases = children("/sem/s/leases").await;
        leases.sort_by_key(|lease| lease[lease.len() - 10..].to_owned());
        let newest = leases.last().expect("the first waiter's lease");
        operator
            .delete(&format!("/sem/s/leases/{newest}"), None)
            .await
            .unwrap();
        // It makes its lease again, from the head of the queue.
        until("/sem/s/leases", 3).await;
        held.release().await.unwrap();
        let (first, second) = (first.await.unwrap(), second.await.unwrap());
        assert!(
            first < second,
            "the waiter whose lease went was granted after the one behind it ({first} > {second})"
        );
    });
}

/// An observer hears of each change of leader from ZooKeeper's watches on the lock's node
/// and its note, not only from its polling.
#[test]
fn observers_are_told_of_each_change_by_zookeepers_watches() {
    distlock_testkit::block_on(async {
        let server = distlock_testkit::zookeeper_server().unwrap_or_else(|e| panic!("{e}"));
        let url = format!("zk://{}/observed", server.addr());
        distlock_testkit::observers_hear_each_change_within_a_second(&url).await;
    });
}
