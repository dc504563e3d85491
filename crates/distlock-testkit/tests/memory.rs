//! The conformance suite against the memory backend.

async fn target() -> distlock_testkit::Target {
    distlock_testkit::Target::new("memory://conformance")
}

distlock_testkit::conformance_suite!(target);
