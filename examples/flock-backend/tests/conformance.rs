//! The flock backend passes the suites its capabilities select: leases, mutexes without a
//! fair queue, fencing, breaking; and the process suite, its helpers registering it first.

async fn target() -> distlock_testkit::Target {
    distlock_flock_example::install();
    let dir = tempfile::tempdir().expect("a temporary directory");
    let url = format!("flock://{}", dir.path().display());
    distlock_testkit::Target::new(url).keep(dir)
}

distlock_testkit::conformance_suite!(
    target,
    liveness = Lease,
    lacks = [rwlock, semaphore, fair, notes, adopt]
);

mod processes {
    use super::target;

    distlock_testkit::process_suite!(
        target,
        install = distlock_flock_example::install,
        lacks = [notes, adopt]
    );
}

/// A URL the backend cannot use is refused with the reason, naming no secret.
#[test]
fn bad_urls_are_refused() {
    distlock_testkit::block_on(async {
        distlock_flock_example::install();
        for (url, why) in [
            ("flock://host/locks", "directory of this machine"),
            ("flock:///tmp/x?ttl=1s", "unknown parameter `ttl`"),
        ] {
            let err = distlock::Client::connect(url).await.unwrap_err();
            assert!(err.to_string().contains(why), "{url}: {err}");
        }
    });
}
