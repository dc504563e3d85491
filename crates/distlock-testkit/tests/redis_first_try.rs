//! The conformance tests a client with `first_try=commands` passes on a real Redis: every
//! one but those that read a fresh grant's fencing token back from the store (`status`
//! right after a grant, breaking or adopting a grant by its token), which such a grant's
//! record holds only from its first renewal or note (see `RedisConfig::first_try_commands`),
//! and the capability declaration, which the default client's suite checks. The process
//! suite runs in full.

async fn target() -> distlock_testkit::Target {
    let redis = distlock_testkit::redis_server().unwrap_or_else(|e| panic!("{e}"));
    let url = format!("redis://{}/0?first_try=commands", redis.addr());
    distlock_testkit::Target::new(url).keep(redis)
}

distlock_testkit::conformance_suite!(@tests target;
    mutual_exclusion_across_tasks,
    try_lock_when_held_returns_none,
    ttl_expiry_frees_the_lock,
    stale_holder_cannot_release_or_renew,
    fencing_tokens_strictly_increase,
    fencing_tokens_increase_in_grant_order_for_every_kind,
    cancelled_acquire_leaves_nothing,
    dropped_guard_is_released,
    reentrant_holds_nest_by_owner,
    bad_input_is_rejected,
    max_hold_stops_renewal,
    multi_lock_is_all_or_nothing,
    multi_locks_in_any_order_do_not_deadlock,
    template_releases_after_success_error_panic_and_drop,
    template_cancels_or_signals_on_loss,
    template_tells_deep_code_its_token,
    job_at_least_keeps_the_name_after_a_quick_run,
    job_at_most_cancels_the_body_before_the_release,
    notes_are_fenced_and_stamped_by_the_store,
    job_once_per_skips_until_the_window_passes,
    election_terms_increase_and_observers_follow,
    election_run_stops_at_the_loss_and_requeues,
    election_run_ends_before_a_close_releases,
    election_hands_over_to_a_chosen_candidate,
    rwlock_readers_share_and_writers_exclude,
    rwlock_waiting_writer_blocks_new_readers,
    semaphore_never_exceeds_its_permits,
    fair_mode_grants_in_arrival_order,
    breaking_without_a_token_breaks_every_holder,
    renewal_keeps_the_lock,
    lost_fires_after_takeover,
    semaphore_permits_of_a_crashed_holder_return,
);
distlock_testkit::process_suite!(target);
