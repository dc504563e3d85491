//! The conformance suite against the memory backend.

async fn target() -> distlock_testkit::Target {
    distlock_testkit::Target::new("memory://conformance")
}

distlock_testkit::conformance_suite!(target, liveness = Lease);

/// The memory backend in session mode, whose declared liveness picks the session suite: the
/// core's session path is proven on the backend every build has.
mod session {
    async fn target() -> distlock_testkit::Target {
        distlock_testkit::memory_session_target()
    }

    distlock_testkit::conformance_suite!(target, liveness = Session, lacks = [adopt]);
}
