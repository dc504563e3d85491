//! The `distlock` command on SQLite, the default, checked as on every other backend.

mod common;
mod elected;
mod guarded;
mod waits;

fn url(state: &std::path::Path) -> String {
    format!("sqlite://{}", state.join("locks.db").display())
}

#[test]
fn runs_guard_commands_and_status_shows_the_holder() {
    let state = tempfile::tempdir().unwrap();
    guarded::runs_guard_commands(&url(state.path()), state.path());
}

/// `run --at-least` leaves its lock in the database after it exits.
#[test]
fn at_least_keeps_the_lock_after_the_command() {
    let state = tempfile::tempdir().unwrap();
    guarded::at_least_keeps_the_lock_after_the_command(&url(state.path()), state.path(), true);
    guarded::once_per_skips_a_run_too_soon(&url(state.path()), state.path());
}

#[test]
fn the_demo_never_oversells_under_the_lock() {
    let state = tempfile::tempdir().unwrap();
    guarded::demo_never_oversells(&url(state.path()), state.path());
}

/// Ctrl-C (and SIGTERM, SIGHUP) while `distlock run` waits: it withdraws its request before
/// it exits with 128 + the signal, so no queue entry is left behind.
#[test]
fn a_run_interrupted_while_it_waits_leaves_no_queue_entry() {
    let state = tempfile::tempdir().unwrap();
    waits::interrupted_waits_leave_no_queue_entry(&url(state.path()), state.path());
}

/// `run --shared`, `--exclusive`, `--permits N --of M` and `--max-hold`.
#[test]
fn runs_take_every_kind_of_lock() {
    let state = tempfile::tempdir().unwrap();
    guarded::runs_take_every_kind_of_lock(&url(state.path()), state.path());
}

/// `elect` and `leader` on the default store; a frozen `elect --requeue` leads again.
#[test]
fn elect_runs_the_leader_and_leader_shows_it() {
    let state = tempfile::tempdir().unwrap();
    let url = url(state.path());
    elected::elect_leads_and_leader_shows_it(&url, state.path());
    elected::requeued_leader_runs_again_after_a_loss(
        &url,
        state.path(),
        std::time::Duration::from_secs(3),
    );
}
