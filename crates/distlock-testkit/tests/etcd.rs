//! The conformance suites (session and general), cross-process tests and process faults
//! against a real etcd started for each test.

async fn target() -> distlock_testkit::Target {
    distlock_testkit::etcd_target().await
}

distlock_testkit::conformance_suite!(target);
distlock_testkit::process_suite!(target);

use std::time::{Duration, Instant};

use distlock::Health;
use distlock::etcd::etcd_client::{self, Txn, TxnOp};

/// Runs `etcdctl` against `endpoint` with `args`, returning its standard output.
fn etcdctl(endpoint: &str, args: &[&str]) -> String {
    let out = std::process::Command::new("etcdctl")
        .env("ETCDCTL_API", "3")
        .args(["--endpoints", endpoint])
        .args(args)
        .output()
        .expect("etcdctl runs (apt-get install etcd-client)");
    assert!(out.status.success(), "etcdctl {args:?}: {out:?}");
    String::from_utf8(out.stdout).unwrap()
}

/// A holder whose key an operator deletes (`etcdctl del`) learns it through the watch on
/// its own key and turns `Lost` alone (its other guards, in the same live session, stay
/// held); the next holder's token is greater.
#[test]
fn a_holder_whose_key_is_deleted_by_hand_turns_lost_alone() {
    distlock_testkit::block_on(async {
        let server = distlock_testkit::etcd_server().unwrap_or_else(|e| panic!("{e}"));
        let endpoint = server.addr().to_string();
        let url = format!("etcd://{endpoint}/ops?session_ttl=2s");
        let client = distlock::Client::connect(&url).await.unwrap();
        let other = distlock::Client::connect(&url).await.unwrap();
        let guard = client.mutex("held").lock().await.unwrap();
        let bystander = client.mutex("kept").lock().await.unwrap();

        let keys = etcdctl(&endpoint, &["get", "--prefix", "--keys-only", "ops/held/"]);
        let key = keys
            .lines()
            .find(|l| !l.is_empty())
            .expect("the holder's key");
        etcdctl(&endpoint, &["del", key]);

        tokio::time::timeout(Duration::from_secs(5), guard.lost())
            .await
            .expect("the holder learns its key was deleted");
        assert_eq!(guard.health(), Health::Lost);
        assert_eq!(bystander.health(), Health::Held, "the session lives on");
        let next = other
            .mutex("held")
            .lock_timeout(Duration::from_secs(5))
            .await
            .unwrap();
        assert!(next.fencing_token() > guard.fencing_token());
        assert!(guard.renew().await.is_err(), "once lost, always lost");
        next.release().await.unwrap();
        bystander.release().await.unwrap();
    });
}

/// The member frozen (SIGSTOP) under a held lock: the guard goes `AtRisk`, then `Lost`
/// before the member runs again; the next holder's token is greater.
#[test]
fn a_paused_member_puts_the_guard_at_risk_then_lost() {
    distlock_testkit::block_on(async {
        let server = distlock_testkit::etcd_server().unwrap_or_else(|e| panic!("{e}"));
        let url = format!("etcd://{}/faults?session_ttl=2s", server.addr());
        distlock_testkit::lose_to_a_paused_server(&url, &server, "paused").await;
    });
}

/// A client whose link goes silent (the proxy black-holes it): its guard goes `AtRisk`,
/// then `Lost` — while its key still exists on the server, which expires the lease only
/// later — and the next holder's token is greater.
#[test]
fn a_client_cut_off_is_lost_before_its_lease_expires_on_the_server() {
    distlock_testkit::block_on(async {
        let server = distlock_testkit::etcd_server().unwrap_or_else(|e| panic!("{e}"));
        let endpoint = server.addr().to_string();
        let proxy = distlock_testkit::FaultProxy::start(server.addr())
            .await
            .unwrap();
        let through = format!("etcd://{}/faults?session_ttl=2s", proxy.addr());
        let client = distlock::Client::connect(&through).await.unwrap();
        let guard = client.mutex("cut").lock().await.unwrap();

        proxy.set(distlock_testkit::ProxyMode::BlackHole);
        assert!(
            distlock_testkit::wait_for_health(&guard, Health::AtRisk, Duration::from_secs(3)).await,
            "a silent link puts the guard at risk"
        );
        tokio::time::timeout(Duration::from_secs(3), guard.lost())
            .await
            .expect("the guard is lost within the lease's TTL");
        let keys = etcdctl(
            &endpoint,
            &["get", "--prefix", "--keys-only", "faults/cut/"],
        );
        assert!(
            keys.lines().any(|l| !l.is_empty()),
            "the guard was lost while its key still held the lock on the server"
        );
        let deadline = Instant::now() + Duration::from_secs(5);
        while !etcdctl(
            &endpoint,
            &["get", "--prefix", "--keys-only", "faults/cut/"],
        )
        .trim()
        .is_empty()
        {
            assert!(Instant::now() < deadline, "etcd expires the lease");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let direct = format!("etcd://{endpoint}/faults");
        let _next =
            distlock_testkit::take_over(&direct, "cut", &guard, Duration::from_secs(5)).await;
    });
}

/// A write to etcd made in a transaction on `still_holds(&guard)` lands while the guard
/// holds, and is refused once its session expired and someone else took the lock: the safe
/// way to write to etcd under an etcd lock.
#[test]
fn a_stale_holders_guarded_write_is_refused() {
    distlock_testkit::block_on(async {
        let server = distlock_testkit::etcd_server().unwrap_or_else(|e| panic!("{e}"));
        let endpoint = server.addr().to_string();
        let proxy = distlock_testkit::FaultProxy::start(server.addr())
            .await
            .unwrap();
        let through = format!("etcd://{}/fenced?session_ttl=2s", proxy.addr());
        let stale = distlock::Client::connect(&through).await.unwrap();
        let guard = stale.mutex("account").lock().await.unwrap();
        let condition = distlock::etcd::still_holds(&guard).unwrap();
        let mut kv = etcd_client::Client::connect([endpoint.as_str()], None)
            .await
            .unwrap()
            .kv_client();
        let write = |value: &str, condition| {
            Txn::new()
                .when([condition])
                .and_then([TxnOp::put("balance", value, None)])
        };
        let first = kv.txn(write("100", condition.clone())).await.unwrap();
        assert!(first.succeeded(), "the holder's write lands");

        proxy.set(distlock_testkit::ProxyMode::BlackHole);
        tokio::time::timeout(Duration::from_secs(5), guard.lost())
            .await
            .expect("the cut-off holder is lost");
        let direct = format!("etcd://{endpoint}/fenced");
        let next =
            distlock_testkit::take_over(&direct, "account", &guard, Duration::from_secs(8)).await;
        let stale_write = kv.txn(write("1", condition)).await.unwrap();
        assert!(
            !stale_write.succeeded(),
            "the stale holder's write is refused"
        );
        let fresh = distlock::etcd::still_holds(&next).unwrap();
        assert!(kv.txn(write("120", fresh)).await.unwrap().succeeded());
        let balance = kv.get("balance", None).await.unwrap();
        assert_eq!(balance.kvs()[0].value(), b"120");
        let memory = distlock::Client::connect("memory://fenced").await.unwrap();
        let elsewhere = memory.mutex("account").lock().await.unwrap();
        let err = distlock::etcd::still_holds(&elsewhere).unwrap_err();
        assert_eq!(err.kind(), distlock::ErrorKind::InvalidInput, "{err}");
        next.release().await.unwrap();
    });
}
