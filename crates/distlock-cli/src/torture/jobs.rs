//! The job scheme's worker: each round takes the job's lock (waiting, as the other
//! schemes' workers do), then runs the critical section as the job's body under
//! [`Job::run_holding`](distlock::Job::run_holding), which writes the run record, skips a
//! run that comes too soon for `once_per`, and keeps the lock until `at_least` after the
//! grant.
//!
//! A run is recorded as a hold from its grant on once the job lets its body run: a grant
//! that `run_holding` finds too soon (and releases before it returns, so a record of its
//! end would come late) is recorded as an acquire that got no run. Mutual exclusion of
//! those brief grants is what the `distlock` scheme tortures.

use std::cell::Cell;
use std::time::{Duration, SystemTime};

use distlock::{ErrorKind, Held, JobOutcome, Result};
use distlock_check::history::{What, instant_ns, monotonic_ns};

use super::record::Recorder;
use super::resource::Writer;
use super::scheme::{close_client, waiting_until};
use super::steps::{self, Orders};
use super::worker::{Section, Stop, Task, acquire_failed, interrupted};
use crate::location::open_client;

/// What a worker records of a grant too soon for `once_per`.
const SKIPPED: &str = "skipped: the last run that succeeded started less than once_per ago";

/// Runs the job until the run's end.
pub(super) async fn run_jobs(
    task: &Task,
    orders: &Orders,
    recorder: &Recorder,
    resource: &mut Writer,
) -> Result<()> {
    let client = open_client(&task.url).await?;
    let mut job = client.job(task.name.as_str());
    if let Some(at_least) = task.at_least {
        job = job.at_least(at_least);
    }
    if let Some(once_per) = task.once_per {
        job = job.once_per(once_per);
    }
    let mutex = client.mutex(task.name.as_str());
    let me = task.worker;
    let section = Section {
        task,
        orders,
        recorder,
    };
    // The client is closed however the loop ends (see `close_client`).
    let ran: Result<()> = async {
        while monotonic_ns() < task.until && !orders.stopped() {
            recorder.record(me, What::Acquire);
            let options = waiting_until(task.until).ttl(task.ttl).fair(task.fair);
            let acquired = tokio::select! {
                acquired = mutex.lock_with(&options) => acquired,
                () = orders.stop_ordered() => Err(interrupted()),
            };
            let guard = match acquired {
                Ok(guard) => guard,
                Err(err) => {
                    acquire_failed(recorder, me, err).await?;
                    continue;
                }
            };
            let granted_at = monotonic_ns();
            let granted = What::Granted {
                token: guard.fencing_token(),
                safe_until: instant_ns(guard.safe_until()),
            };
            orders.at(steps::AFTER_GRANT, recorder, me);
            let began = Cell::new(false);
            let ran = job
                .run_holding(guard, async |held: &Held| {
                    // A run is a hold from the grant on, recorded once the job lets the body
                    // run: a grant found too soon is no run.
                    recorder.record_at(me, granted_at, granted);
                    began.set(true);
                    body(held, &section, resource).await
                })
                .await;
            let outcome = match ran {
                // --scheme job needs --at-least: each run keeps its lock.
                Ok(JobOutcome::Ran(())) => "kept",
                Err(Stop::Section(err)) => return Err(err),
                Err(Stop::Store(err))
                    if began.get()
                        && matches!(err.kind(), ErrorKind::NotHeld | ErrorKind::LockLost) =>
                {
                    "fail"
                }
                Err(Stop::Store(_)) if began.get() => "unknown",
                Ok(not_run) => {
                    // Too soon (no run): asked again once the window is over.
                    let error = SKIPPED.to_owned();
                    recorder.record(me, What::AcquireFailed { error });
                    let next_at = match not_run {
                        JobOutcome::TooSoon { next_at, .. } => next_at,
                        _ => SystemTime::now(),
                    };
                    let left = next_at
                        .duration_since(SystemTime::now())
                        .unwrap_or_default();
                    let run_left = Duration::from_nanos(task.until.saturating_sub(monotonic_ns()));
                    tokio::time::sleep(left.min(run_left)).await;
                    continue;
                }
                Err(Stop::Store(err)) => {
                    // Refused before the body ran (the run record could not be read, or the
                    // grant went first): no run.
                    let error = err.to_string();
                    recorder.record(me, What::AcquireFailed { error });
                    let lost = matches!(err.kind(), ErrorKind::NotHeld | ErrorKind::LockLost);
                    if !(lost || err.is_temporary()) {
                        return Err(err);
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            recorder.record(
                me,
                What::Released {
                    outcome: outcome.into(),
                },
            );
        }
        Ok(())
    }
    .await;
    close_client(&client).await;
    ran
}

/// The job's body: the critical section, watched; `Release` once the worker acts no more.
async fn body(
    held: &Held,
    section: &Section<'_>,
    resource: &mut Writer,
) -> std::result::Result<(), Stop> {
    let token = held.fencing_token();
    let done = section.watched(held, token, None, resource).await;
    done.map_err(Stop::Section)?;
    section.released();
    Ok(())
}
