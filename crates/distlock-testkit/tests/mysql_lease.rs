//! The conformance suite, cross-process tests and faults against a real MariaDB in lease
//! mode, started for each test; and what only MySQL's URLs have.

use std::time::Duration;

use distlock::LockOptions;

async fn target() -> distlock_testkit::Target {
    let db = distlock_testkit::mariadb_server().unwrap_or_else(|e| panic!("{e}"));
    let url = format!("{}?mode=lease", distlock_testkit::mariadb_url(&db));
    distlock_testkit::Target::new(url).keep(db)
}

distlock_testkit::conformance_suite!(target, liveness = Lease);
distlock_testkit::process_suite!(target);

fn lease_url(addr: std::net::SocketAddr) -> String {
    format!(
        "mysql://distlock:{}@{addr}/distlock?mode=lease",
        distlock_testkit::DATABASE_PASSWORD
    )
}

#[test]
fn passwords_stay_out_of_errors_and_debug_output() {
    distlock_testkit::block_on(async {
        let server = distlock_testkit::mariadb_server().unwrap_or_else(|e| panic!("{e}"));
        let url = format!("{}?mode=lease", distlock_testkit::mariadb_url(&server));
        distlock_testkit::passwords_stay_hidden(&url).await;
        let mariadb = url.replacen("mysql://", "mariadb://", 1);
        distlock::Client::connect(&mariadb)
            .await
            .expect("mariadb:// is the same backend");
    });
}

#[test]
fn database_paused_past_the_ttl_puts_the_lease_at_risk_then_loses_it() {
    distlock_testkit::block_on(async {
        let server = distlock_testkit::mariadb_server().unwrap_or_else(|e| panic!("{e}"));
        distlock_testkit::lose_to_a_paused_server(&lease_url(server.addr()), &server, "paused")
            .await;
    });
}

#[test]
fn database_restart_keeps_leases_and_tokens_keep_increasing() {
    distlock_testkit::block_on(async {
        let mut server = distlock_testkit::mariadb_server().unwrap_or_else(|e| panic!("{e}"));
        let url = lease_url(server.addr());
        let a = distlock::Client::connect(&url).await.unwrap();
        let options = LockOptions::new()
            .ttl(Duration::from_secs(10))
            .renew_every(Duration::from_millis(300));
        let guard = a.mutex("restart").lock_with(&options).await.unwrap();
        server.restart().unwrap_or_else(|e| panic!("{e}"));
        let b = distlock::Client::connect(&url).await.unwrap();
        assert!(
            b.mutex("restart").try_lock().await.unwrap().is_none(),
            "the lease row survived the restart"
        );
        tokio::time::sleep(Duration::from_millis(1_000)).await;
        guard
            .renew()
            .await
            .expect("the holder renews after the restart");
        let token = guard.fencing_token();
        guard.release().await.unwrap();
        let next = b
            .mutex("restart")
            .lock_timeout(Duration::from_secs(3))
            .await
            .unwrap();
        assert!(next.fencing_token() > token);
    });
}

#[test]
fn a_client_cut_off_loses_its_lease_before_it_ends() {
    distlock_testkit::block_on(async {
        let server = distlock_testkit::mariadb_server().unwrap_or_else(|e| panic!("{e}"));
        let proxy = distlock_testkit::FaultProxy::start(server.addr())
            .await
            .unwrap();
        let guard = distlock_testkit::lose_link(
            &lease_url(proxy.addr()),
            &proxy,
            distlock_testkit::ProxyMode::Cut,
            "cut",
            Duration::from_secs(2),
        )
        .await;
        let _next = distlock_testkit::take_over(
            &lease_url(server.addr()),
            "cut",
            guard.fencing_token(),
            Duration::from_secs(4),
        )
        .await;
    });
}

#[test]
fn paused_writes_hold_back_this_client_alone() {
    distlock_testkit::block_on(async {
        distlock_testkit::conformance::paused_writes_hold_back_this_client_alone(&target().await)
            .await;
    });
}

/// A server that hangs (SIGSTOP) mid-wait and mid-call: a wait returns within its deadline,
/// a release within its operation timeout, status and forget within theirs.
#[test]
fn a_hung_server_bounds_every_call_by_its_deadline() {
    distlock_testkit::block_on(async {
        let server = distlock_testkit::mariadb_server().unwrap_or_else(|e| panic!("{e}"));
        distlock_testkit::a_hung_server_bounds_every_call(&lease_url(server.addr()), &server).await;
    });
}
