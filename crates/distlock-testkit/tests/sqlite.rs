//! The conformance suite, cross-process tests and process faults against SQLite.

async fn target() -> distlock_testkit::Target {
    let dir = tempfile::Builder::new()
        .prefix("distlock-sqlite-")
        .tempdir()
        .expect("a temporary directory");
    let url = format!("sqlite://{}", dir.path().join("locks.db").display());
    distlock_testkit::Target::new(url).keep(dir)
}

distlock_testkit::conformance_suite!(target);
distlock_testkit::process_suite!(target);

#[test]
fn fencing_survives_reopening_the_database() {
    distlock_testkit::block_on(async {
        let target = target().await;
        let first = {
            let client = target.client().await;
            let guard = client.mutex("reopen").lock().await.unwrap();
            let token = guard.fencing_token();
            guard.release().await.unwrap();
            token
        };
        let client = target.client().await;
        let guard = client.mutex("reopen").lock().await.unwrap();
        assert!(guard.fencing_token() > first);
    });
}

#[test]
fn missing_directory_is_a_clear_error() {
    distlock_testkit::block_on(async {
        let err = distlock::Client::connect("sqlite:///no/such/dir/locks.db")
            .await
            .unwrap_err();
        assert_eq!(err.kind(), distlock::ErrorKind::InvalidInput);
        assert!(err.to_string().contains("/no/such/dir"), "{err}");
    });
}
