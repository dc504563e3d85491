//! The `distlock` command on PostgreSQL, in both lock modes.

mod common;
mod database;

#[test]
fn demo_status_and_bench_in_session_mode() {
    let pg = distlock_testkit::postgres_server().unwrap_or_else(|e| panic!("{e}"));
    database::demo_keeps_the_shop_in_the_database(&distlock_testkit::postgres_url(&pg), "");
}

#[test]
fn demo_status_and_bench_in_lease_mode() {
    let pg = distlock_testkit::postgres_server().unwrap_or_else(|e| panic!("{e}"));
    database::demo_keeps_the_shop_in_the_database(
        &distlock_testkit::postgres_url(&pg),
        "?mode=lease",
    );
}
