//! The conformance suites (session and general), cross-process tests and process faults
//! against a real etcd started for each test.

async fn target() -> distlock_testkit::Target {
    distlock_testkit::etcd_target().await
}

distlock_testkit::conformance_suite!(target);
distlock_testkit::process_suite!(target);
