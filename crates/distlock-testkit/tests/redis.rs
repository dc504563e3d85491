//! The conformance suite, cross-process tests and process faults against a real Redis
//! started for each test.

async fn target() -> distlock_testkit::Target {
    let redis = distlock_testkit::redis_server().unwrap_or_else(|e| panic!("{e}"));
    let url = format!("redis://{}/0", redis.addr());
    distlock_testkit::Target::new(url).keep(redis)
}

distlock_testkit::conformance_suite!(target);
distlock_testkit::process_suite!(target);
