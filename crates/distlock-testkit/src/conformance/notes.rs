//! A lock's note (a job's run record): written only under a live grant, stamped with the
//! store's clock, with a quiet window the store measures; and `once_per` on top of it.

use std::time::{Duration, SystemTime};

use distlock::backend::{MAX_NOTE_LEN, backend_of, grant_of};
use distlock::{Error, ErrorKind, JobOutcome, RunState};

use super::{Target, eventually, expect_kind, unique};

/// What a store that counts quiet windows in whole seconds (etcd) may add to one.
const SECOND_ROUNDING: Duration = Duration::from_secs(1);

/// A note is written under a live grant and refused (`NotHeld`) under one released; it
/// reads back with its token, a time on the store's clock near this machine's (where the
/// store has a clock) and a quiet window that the store counts down to nothing.
///
/// # Examples
///
/// ```
/// # distlock_testkit::block_on(async {
/// distlock_testkit::conformance::notes_are_fenced_and_stamped_by_the_store(&distlock_testkit::Target::new("memory://doc")).await;
/// # });
/// ```
pub async fn notes_are_fenced_and_stamped_by_the_store(target: &Target) {
    let name = unique("note");
    let client = target.client().await;
    let backend = backend_of(&client);
    assert_eq!(backend.read_note(&name).await.unwrap(), None, "no note yet");

    let guard = client.mutex(&name).lock().await.unwrap();
    let token = guard.fencing_token();
    let before = SystemTime::now();
    let written = backend
        .write_note(grant_of(&guard), token, "first", None)
        .await
        .unwrap();
    if let Some(at) = written {
        let at = SystemTime::UNIX_EPOCH + Duration::from_millis(at);
        let near = |a: SystemTime, b: SystemTime| {
            a.duration_since(b)
                .or_else(|_| b.duration_since(a))
                .unwrap()
                < Duration::from_secs(5)
        };
        assert!(
            near(at, before),
            "the store's clock is near this machine's: {at:?}"
        );
    }
    let long = "n".repeat(MAX_NOTE_LEN);
    let quiet = Duration::from_millis(1_500);
    backend
        .write_note(grant_of(&guard), token, &long, Some(quiet))
        .await
        .unwrap();
    let note = backend.read_note(&name).await.unwrap().expect("a note");
    assert_eq!(
        (note.value.as_str(), note.fencing_token),
        (long.as_str(), token)
    );
    let left = note.quiet_for.expect("a quiet window");
    // etcd counts a window down in whole seconds, rounded up.
    assert!(
        left <= quiet + SECOND_ROUNDING && !left.is_zero(),
        "{left:?}"
    );
    let too_long = "n".repeat(MAX_NOTE_LEN + 1);
    let refused = backend
        .write_note(grant_of(&guard), token, &too_long, None)
        .await;
    expect_kind(refused, ErrorKind::InvalidInput, "a note past MAX_NOTE_LEN");

    let stale = grant_of(&guard).clone();
    guard.release().await.unwrap();
    let refused = backend.write_note(&stale, token, "late", None).await;
    expect_kind(refused, ErrorKind::NotHeld, "a note under a released grant");
    let ended = eventually(Duration::from_secs(10), || async {
        let note = backend
            .read_note(&name)
            .await
            .unwrap()
            .expect("the note stays");
        note.quiet_for.is_none()
    })
    .await;
    assert!(ended, "the quiet window ends");
    let note = backend.read_note(&name).await.unwrap().unwrap();
    assert_eq!(note.value, long, "the late write changed nothing");
}

/// `once_per` skips a job (`TooSoon`, with the last success and when it may run next)
/// until the window after its last success has passed, on the store's clock; a failed
/// run in between leaves the window; `job_status` shows each run.
///
/// # Examples
///
/// ```
/// # distlock_testkit::block_on(async {
/// distlock_testkit::conformance::job_once_per_skips_until_the_window_passes(&distlock_testkit::Target::new("memory://doc")).await;
/// # });
/// ```
pub async fn job_once_per_skips_until_the_window_passes(target: &Target) {
    let name = unique("job-once-per");
    let (client, other) = (target.client().await, target.client().await);
    let once_per = Duration::from_millis(2_000);
    assert_eq!(client.job_status(&name).await.unwrap(), None);

    let first_started = std::time::Instant::now();
    let first = client
        .job(&name)
        .once_per(once_per)
        .run(async |held| Ok::<_, Error>(held.fencing_token()))
        .await
        .unwrap();
    let JobOutcome::Ran(token) = first else {
        panic!("the first run runs: {first:?}");
    };
    let status = other.job_status(&name).await.unwrap().expect("a record");
    assert_eq!(status.state, RunState::Succeeded);
    assert_eq!(status.fencing_token, token);
    assert!(!status.holder.is_empty(), "the record names its holder");
    assert_eq!(status.pid, std::process::id());
    assert!(
        status
            .quiet_for
            .is_some_and(|q| q <= once_per + SECOND_ROUNDING)
    );
    assert_eq!(status.last_success, status.started);
    if status.started.is_some() {
        assert!(status.finished >= status.started);
    }

    let skipped = other
        .job(&name)
        .once_per(once_per)
        .run(async |_| Ok::<_, Error>(0))
        .await
        .unwrap();
    let JobOutcome::TooSoon {
        last_success,
        next_at,
    } = skipped
    else {
        panic!("within once_per the job is too soon: {skipped:?}");
    };
    assert_eq!(last_success, status.last_success);
    assert!(next_at <= SystemTime::now() + once_per + SECOND_ROUNDING);

    // A run without once_per may run in the window; its failure leaves the window.
    let failed = other
        .job(&name)
        .run(async |_| Err::<u64, _>(Error::new(ErrorKind::Backend, "the job failed")))
        .await;
    assert_eq!(failed.unwrap_err().kind(), ErrorKind::Backend);
    let status = other.job_status(&name).await.unwrap().expect("a record");
    assert_eq!(status.state, RunState::Failed);
    assert!(status.fencing_token > token);
    assert!(status.quiet_for.is_some(), "a failure leaves the window");
    let still = client
        .job(&name)
        .once_per(once_per)
        .run(async |_| Ok::<_, Error>(0))
        .await;
    assert!(matches!(still, Ok(JobOutcome::TooSoon { .. })), "{still:?}");

    let ran_again = eventually(Duration::from_secs(15), || async {
        let run = client
            .job(&name)
            .once_per(once_per)
            .run(async |_| Ok::<_, Error>(1))
            .await;
        matches!(run, Ok(JobOutcome::Ran(1)))
    })
    .await;
    assert!(ran_again, "the job runs again once the window has passed");
    assert!(
        first_started.elapsed() >= once_per,
        "ran again {:?} after the first success began",
        first_started.elapsed()
    );

    let refused = client
        .job(&name)
        .once_per(Duration::ZERO)
        .run(async |_| Ok::<_, Error>(()))
        .await;
    expect_kind(refused, ErrorKind::InvalidInput, "once_per 0s");
}
