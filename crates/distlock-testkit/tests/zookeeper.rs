//! The conformance suites (session and general), cross-process tests and process faults
//! against a real ZooKeeper started for each test.

async fn target() -> distlock_testkit::Target {
    distlock_testkit::zookeeper_target().await
}

distlock_testkit::conformance_suite!(target);
distlock_testkit::process_suite!(target);

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
        let client = distlock::Client::connect(&url).await.unwrap();
        let other = distlock::Client::connect(&url).await.unwrap();
        let guard = client.mutex("held").lock().await.unwrap();
        let bystander = client.mutex("kept").lock().await.unwrap();

        let operator = zk::Client::connect(&server.addr().to_string())
            .await
            .unwrap();
        let nodes = operator.list_children("/ops/held").await.unwrap();
        assert_eq!(nodes.len(), 1, "{nodes:?}");
        operator
            .delete(&format!("/ops/held/{}", nodes[0]), None)
            .await
            .unwrap();

        tokio::time::timeout(Duration::from_secs(5), guard.lost())
            .await
            .expect("the holder learns its node was deleted");
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
