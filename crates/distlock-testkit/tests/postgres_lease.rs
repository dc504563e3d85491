//! The conformance suite, cross-process tests and process faults against a real PostgreSQL
//! in lease mode, started for each test; and what only PostgreSQL's URLs have.

async fn target() -> distlock_testkit::Target {
    let pg = distlock_testkit::postgres_server().unwrap_or_else(|e| panic!("{e}"));
    let url = format!("{}?mode=lease", distlock_testkit::postgres_url(&pg));
    distlock_testkit::Target::new(url).keep(pg)
}

distlock_testkit::conformance_suite!(target, liveness = Lease);
distlock_testkit::process_suite!(target);

#[test]
fn passwords_stay_out_of_errors_and_debug_output() {
    distlock_testkit::block_on(async {
        let pg = distlock_testkit::postgres_server().unwrap_or_else(|e| panic!("{e}"));
        let url = format!("{}?mode=lease", distlock_testkit::postgres_url(&pg));
        distlock_testkit::passwords_stay_hidden(&url).await;
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

use std::time::Duration;

use distlock::Health;
use sqlx::{Connection, Row};

fn lease_url(addr: std::net::SocketAddr) -> String {
    format!(
        "postgres://postgres:{}@{addr}/postgres?mode=lease",
        distlock_testkit::DATABASE_PASSWORD
    )
}

#[test]
fn database_paused_past_the_ttl_puts_the_lease_at_risk_then_loses_it() {
    distlock_testkit::block_on(async {
        let pg = distlock_testkit::postgres_server().unwrap_or_else(|e| panic!("{e}"));
        distlock_testkit::lose_to_a_paused_server(&lease_url(pg.addr()), &pg, "paused").await;
    });
}

#[test]
fn database_restart_keeps_leases_and_never_grants_twice() {
    distlock_testkit::block_on(async {
        let mut pg = distlock_testkit::postgres_server().unwrap_or_else(|e| panic!("{e}"));
        let url = lease_url(pg.addr());
        let a = distlock::Client::connect(&url).await.unwrap();
        let b = distlock::Client::connect(&url).await.unwrap();
        let held = a.mutex("restart").lock().await.unwrap();

        pg.restart().unwrap_or_else(|e| panic!("{e}"));

        // The lease is a row: it survived, so the holder renews and nobody else gets in.
        tokio::time::timeout(Duration::from_secs(10), async {
            while held.renew().await.is_err() {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
        .await
        .expect("the holder renews once the database is back");
        assert_eq!(held.health(), Health::Held);
        assert!(b.mutex("restart").try_lock().await.unwrap().is_none());

        let first = held.fencing_token();
        held.release().await.unwrap();
        let next = b.mutex("restart").lock().await.unwrap();
        assert!(next.fencing_token() > first);
    });
}

/// A client whose link to PostgreSQL fails as `mode` says: its guard goes AtRisk, then
/// Lost while the database still has the lease, and the next holder's token is greater.
async fn link_failure_is_noticed_before_the_lease_ends(mode: distlock_testkit::ProxyMode) {
    let pg = distlock_testkit::postgres_server().unwrap_or_else(|e| panic!("{e}"));
    let proxy = distlock_testkit::FaultProxy::start(pg.addr())
        .await
        .unwrap();
    let mut db = sqlx::PgConnection::connect(&distlock_testkit::postgres_url(&pg))
        .await
        .unwrap();
    let guard = distlock_testkit::lose_link(
        &lease_url(proxy.addr()),
        &proxy,
        mode,
        "link",
        Duration::from_secs(3),
    )
    .await;
    let lost_at = std::time::Instant::now();

    // The lease row stays until someone purges it; how long it had left when we looked,
    // plus how long looking took, is how long it had left when the guard was lost.
    let left_ms: i64 = sqlx::query(
        "SELECT expires_at_ms - (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT
         FROM distlock_lease WHERE name = 'link'",
    )
    .fetch_one(&mut db)
    .await
    .unwrap()
    .get(0);
    let left_at_loss = left_ms + lost_at.elapsed().as_millis() as i64;
    assert!(
        left_at_loss > 0,
        "the guard was Lost before the lease ended in the database ({left_at_loss} ms)"
    );
    let _next = distlock_testkit::take_over(
        &lease_url(pg.addr()),
        "link",
        guard.fencing_token(),
        Duration::from_secs(3),
    )
    .await;
}

#[test]
fn a_client_cut_off_goes_at_risk_then_lost_before_the_lease_ends() {
    distlock_testkit::block_on(link_failure_is_noticed_before_the_lease_ends(
        distlock_testkit::ProxyMode::Cut,
    ));
}

#[test]
fn a_black_holed_client_goes_at_risk_then_lost_before_the_lease_ends() {
    distlock_testkit::block_on(link_failure_is_noticed_before_the_lease_ends(
        distlock_testkit::ProxyMode::BlackHole,
    ));
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
        let server = distlock_testkit::postgres_server().unwrap_or_else(|e| panic!("{e}"));
        distlock_testkit::a_hung_server_bounds_every_call(&lease_url(server.addr()), &server).await;
    });
}
