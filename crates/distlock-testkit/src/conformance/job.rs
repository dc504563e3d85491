//! Jobs: a body run on one replica at a time, kept for `at_least` after its grant and cut
//! off at `at_most`.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use distlock::{Error, ErrorKind, JobOutcome, LockOptions};

use super::{Liveness, Target, eventually, expect_kind, unique};

/// A job runs its body under a fenced grant and releases it after; while another holds its
/// name it reports `Busy` with that holder, without running; bad spans and a reentrant
/// owner are `InvalidInput`.
///
/// # Examples
///
/// ```
/// # distlock_testkit::block_on(async {
/// distlock_testkit::conformance::job_runs_once_and_reports_who_is_busy(&distlock_testkit::Target::new("memory://doc")).await;
/// # });
/// ```
pub async fn job_runs_once_and_reports_who_is_busy(target: &Target) {
    let name = unique("job");
    let (client, other) = (target.client().await, target.client().await);
    let job = client.job(&name);

    let ran = job
        .run(async |held| Ok::<_, Error>(held.fencing_token()))
        .await
        .unwrap();
    let JobOutcome::Ran(first_token) = ran else {
        panic!("a free job runs: {ran:?}");
    };
    assert!(first_token > 0);

    let holding = other.mutex(&name).lock().await.unwrap();
    let body_ran = AtomicBool::new(false);
    let busy = job
        .run(async |_| {
            body_ran.store(true, Ordering::SeqCst);
            Ok::<_, Error>(())
        })
        .await
        .unwrap();
    assert!(!body_ran.load(Ordering::SeqCst), "a busy job runs nothing");
    let JobOutcome::Busy { holder, until } = busy else {
        panic!("a held job is busy: {busy:?}");
    };
    let holder = holder.expect("the busy outcome names the holder");
    assert_eq!(holder.fencing_token, holding.fencing_token());
    assert!(holder.fencing_token > first_token);
    match client.capabilities().liveness {
        Liveness::Lease => assert!(until.is_some(), "a lease's end is known"),
        Liveness::Session => {}
    }
    holding.release().await.unwrap();

    let second = job
        .run(async |held| Ok::<_, Error>(held.fencing_token()))
        .await;
    assert!(matches!(second, Ok(JobOutcome::Ran(t)) if t > holder.fencing_token));

    let ms = Duration::from_millis;
    let years = Duration::from_secs(11 * 366 * 86_400);
    let bad = [
        client.job(&name).at_least(Duration::ZERO),
        client.job(&name).at_most(Duration::from_nanos(10)),
        client.job(&name).at_most(years),
        client.job(&name).at_least(ms(500)).at_most(ms(100)),
        client
            .job(&name)
            .with_options(LockOptions::new().reentrant(client.new_owner())),
        client
            .job(&name)
            .with_options(LockOptions::new().ttl(ms(1))),
    ];
    for job in bad {
        let refused = job.run(async |_| Ok::<_, Error>(())).await;
        let err = expect_kind(refused, ErrorKind::InvalidInput, "a job with bad input");
        assert!(!err.to_string().is_empty());
    }
}

/// `at_least` keeps the name taken until the grant plus the span however quickly the body
/// ends, and no longer: another replica finds it busy, then takes it. Where grants have
/// leases the store keeps it, so the replica that ran may close at once.
///
/// # Examples
///
/// ```
/// # distlock_testkit::block_on(async {
/// distlock_testkit::conformance::job_at_least_keeps_the_name_after_a_quick_run(&distlock_testkit::Target::new("memory://doc")).await;
/// # });
/// ```
pub async fn job_at_least_keeps_the_name_after_a_quick_run(target: &Target) {
    let name = unique("job-at-least");
    let at_least = Duration::from_millis(1_500);
    let (client, other) = (target.client().await, target.client().await);
    let started = Instant::now();
    let ran = client
        .job(&name)
        .at_least(at_least)
        .run(async |_| Ok::<_, Error>(()))
        .await
        .unwrap();
    assert_eq!(ran, JobOutcome::Ran(()));
    assert!(
        started.elapsed() < at_least,
        "the run does not wait for at_least"
    );
    if client.capabilities().detachable {
        // The store keeps it: the replica that ran may go.
        client.close().await.unwrap();
    }
    let again = other
        .job(&name)
        .run(async |_| Ok::<_, Error>(()))
        .await
        .unwrap();
    assert!(
        matches!(again, JobOutcome::Busy { .. }),
        "within at_least another replica finds it busy: {again:?}"
    );
    let freed = eventually(Duration::from_secs(15), || async {
        match other.mutex(&name).try_lock().await {
            Ok(Some(guard)) => guard.release().await.is_ok(),
            _ => false,
        }
    })
    .await;
    assert!(freed, "the name is free once at_least has passed");
    assert!(
        started.elapsed() >= at_least,
        "freed after {:?}, before at_least {at_least:?}",
        started.elapsed()
    );
}

/// `at_most` cancels a body that runs too long (`Timeout`), and the grant goes only after
/// the body has been dropped.
///
/// # Examples
///
/// ```
/// # distlock_testkit::block_on(async {
/// distlock_testkit::conformance::job_at_most_cancels_the_body_before_the_release(&distlock_testkit::Target::new("memory://doc")).await;
/// # });
/// ```
pub async fn job_at_most_cancels_the_body_before_the_release(target: &Target) {
    let name = unique("job-at-most");
    let (client, other) = (target.client().await, target.client().await);
    let dropped_while_held = Arc::new(AtomicBool::new(false));
    let started = Instant::now();
    let outcome = {
        let dropped_while_held = Arc::clone(&dropped_while_held);
        client
            .job(&name)
            .at_most(Duration::from_millis(400))
            .run(async |held| {
                struct OnDrop(distlock::Held, Arc<AtomicBool>);
                impl Drop for OnDrop {
                    fn drop(&mut self) {
                        self.1.store(self.0.health().is_valid(), Ordering::SeqCst);
                    }
                }
                let _on_drop = OnDrop(held.clone(), dropped_while_held);
                tokio::time::sleep(Duration::from_secs(60)).await;
                Ok::<_, Error>(())
            })
            .await
    };
    let err = expect_kind(outcome, ErrorKind::Timeout, "a job past at_most");
    assert!(err.to_string().contains("at_most"), "{err}");
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(
        dropped_while_held.load(Ordering::SeqCst),
        "the body is dropped while the grant still holds"
    );
    let taken = other.mutex(&name).try_lock().await.unwrap();
    assert!(taken.is_some(), "released once the body is gone");
}
