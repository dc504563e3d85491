//! The conformance suite, cross-process tests and process faults against a real PostgreSQL
//! in lease mode, started for each test; and what only PostgreSQL's URLs have.

async fn target() -> distlock_testkit::Target {
    let pg = distlock_testkit::postgres_server().unwrap_or_else(|e| panic!("{e}"));
    let url = format!("{}?mode=lease", distlock_testkit::postgres_url(&pg));
    distlock_testkit::Target::new(url).keep(pg)
}

distlock_testkit::conformance_suite!(target);
distlock_testkit::process_suite!(target);

#[test]
fn session_mode_is_refused_until_it_exists() {
    distlock_testkit::block_on(async {
        let pg = distlock_testkit::postgres_server().unwrap_or_else(|e| panic!("{e}"));
        let err = distlock::Client::connect(&distlock_testkit::postgres_url(&pg))
            .await
            .unwrap_err();
        assert_eq!(err.kind(), distlock::ErrorKind::Unsupported);
        assert!(err.to_string().contains("mode=lease"), "{err}");
    });
}

#[test]
fn passwords_stay_out_of_errors_and_debug_output() {
    distlock_testkit::block_on(async {
        let pg = distlock_testkit::postgres_server().unwrap_or_else(|e| panic!("{e}"));
        let url = distlock_testkit::postgres_url(&pg);
        let wrong = format!(
            "{}?mode=lease",
            url.replace(distlock_testkit::DATABASE_PASSWORD, "not-the-password-xyz")
        );
        let err = distlock::Client::connect(&wrong).await.unwrap_err();
        assert!(
            !format!("{err} {err:?}").contains("not-the-password-xyz"),
            "{err:?}"
        );

        let client = distlock::Client::connect(&format!("{url}?mode=lease"))
            .await
            .unwrap();
        let shown = format!("{:?}", client.backend());
        assert!(
            !shown.contains(distlock_testkit::DATABASE_PASSWORD),
            "{shown}"
        );
    });
}

#[test]
fn fencing_survives_a_database_restart() {
    distlock_testkit::block_on(async {
        let mut pg = distlock_testkit::postgres_server().unwrap_or_else(|e| panic!("{e}"));
        let url = format!("{}?mode=lease", distlock_testkit::postgres_url(&pg));
        let first = {
            let client = distlock::Client::connect(&url).await.unwrap();
            let guard = client.mutex("restart").lock().await.unwrap();
            let token = guard.fencing_token();
            guard.release().await.unwrap();
            token
        };
        pg.restart().unwrap_or_else(|e| panic!("{e}"));
        let client = distlock::Client::connect(&url).await.unwrap();
        let guard = client.mutex("restart").lock().await.unwrap();
        assert!(guard.fencing_token() > first);
    });
}
