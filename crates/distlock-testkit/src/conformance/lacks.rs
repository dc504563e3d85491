//! What a backend declares to the suite: how its grants live and what it lacks, checked
//! against its own capabilities, and each lack refused as `Unsupported`.

use std::time::Duration;

use distlock::backend::{Liveness, backend_of};
use distlock::{ErrorKind, LockOptions};

use super::{Target, expect_kind, unique};

/// A capability a backend may lack, as [`conformance_suite!`](crate::conformance_suite)'s
/// `lacks = [...]` names it. Every other capability in this list the backend must have.
///
/// # Examples
///
/// ```
/// use distlock_testkit::conformance::Lack;
/// assert_eq!(Lack::ALL.len(), 6);
/// assert!(Lack::ALL.contains(&Lack::force_release));
/// ```
#[allow(non_camel_case_types)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lack {
    /// Shared read/write locks.
    rwlock,
    /// Counting semaphores.
    semaphore,
    /// FIFO grants with `fair`.
    fair,
    /// Breaking another holder's grant.
    force_release,
    /// Each lock's note (a job's run record: `once_per`, `job_status`).
    notes,
    /// Handing an exclusive grant to another process (`Guard::hand_off`, `Client::adopt`).
    adopt,
}

impl Lack {
    /// Every capability a backend may declare it lacks.
    pub const ALL: [Lack; 6] = [
        Lack::rwlock,
        Lack::semaphore,
        Lack::fair,
        Lack::force_release,
        Lack::notes,
        Lack::adopt,
    ];

    /// Whether `capabilities` has this capability.
    ///
    /// # Examples
    ///
    /// ```
    /// use distlock_testkit::conformance::Lack;
    /// let caps = distlock::backend::Capabilities::lease();
    /// assert!(!Lack::rwlock.is_in(&caps));
    /// ```
    pub fn is_in(self, capabilities: &distlock::backend::Capabilities) -> bool {
        match self {
            Lack::rwlock => capabilities.rwlock,
            Lack::semaphore => capabilities.semaphore,
            Lack::fair => capabilities.fair,
            Lack::force_release => capabilities.force_release,
            Lack::notes => capabilities.notes,
            Lack::adopt => capabilities.adopt,
        }
    }
}

/// Checks the target's backend is as its test file declares: its grants live by
/// `liveness` (with a session channel exactly when that is `Session`), it lacks each of
/// `lacks` and has every other capability [`Lack::ALL`] names, and it hands out fencing
/// tokens (every backend must).
///
/// # Examples
///
/// ```
/// # distlock_testkit::block_on(async {
/// use distlock_testkit::conformance::{Liveness, declaration_matches};
/// let target = distlock_testkit::Target::new("memory://doc-declared");
/// declaration_matches(&target, Liveness::Lease, &[]).await;
/// # });
/// ```
pub async fn declaration_matches(target: &Target, liveness: Liveness, lacks: &[Lack]) {
    let client = target.client().await;
    let caps = client.capabilities();
    let scheme = client.scheme();
    assert_eq!(
        caps.liveness, liveness,
        "the {scheme} backend's grants live by {:?}; its test file declares {liveness:?}",
        caps.liveness
    );
    assert_eq!(
        backend_of(&client).session().is_some(),
        liveness == Liveness::Session,
        "{scheme} declares {liveness:?} liveness: it has a session channel exactly when that is Session",
    );
    assert!(
        caps.fencing,
        "the {scheme} backend hands out no fencing tokens"
    );
    for lack in Lack::ALL {
        let declared_lacking = lacks.contains(&lack);
        assert_eq!(
            lack.is_in(&caps),
            !declared_lacking,
            "the {scheme} backend {} {lack:?}, but its test file {} it among what it lacks",
            if lack.is_in(&caps) { "has" } else { "lacks" },
            if declared_lacking {
                "names"
            } else {
                "does not name"
            },
        );
    }
}

/// Checks the target's backend refuses what it lacks with `Unsupported`, before anything
/// reaches the store: a read lock, a semaphore permit, a fair wait, a break of another's
/// grant (which stays held).
///
/// # Examples
///
/// ```no_run
/// # distlock_testkit::block_on(async {
/// use distlock_testkit::conformance::{Lack, refuses_what_it_lacks};
/// let target = distlock_testkit::Target::new("redlock://127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003");
/// refuses_what_it_lacks(&target, Lack::rwlock).await;
/// # });
/// ```
pub async fn refuses_what_it_lacks(target: &Target, lack: Lack) {
    let name = unique("lacks");
    let client = target.client().await;
    let quick = LockOptions::new().wait(Duration::from_secs(1));
    match lack {
        Lack::rwlock => {
            expect_kind(
                client.rwlock(&name).read_with(&quick).await,
                ErrorKind::Unsupported,
                "a read lock",
            );
            expect_kind(
                client.rwlock(&name).write_with(&quick).await,
                ErrorKind::Unsupported,
                "a write lock",
            );
        }
        Lack::semaphore => {
            expect_kind(
                client.semaphore(&name, 2).acquire_with(1, &quick).await,
                ErrorKind::Unsupported,
                "a semaphore permit",
            );
        }
        Lack::fair => {
            expect_kind(
                client
                    .mutex(&name)
                    .lock_with(&quick.clone().fair(true))
                    .await,
                ErrorKind::Unsupported,
                "a fair wait",
            );
        }
        Lack::force_release => {
            let guard = client.mutex(&name).lock_with(&quick).await.unwrap();
            let operator = target.client().await;
            expect_kind(
                operator
                    .force_release(&name, Some(guard.fencing_token()))
                    .await,
                ErrorKind::Unsupported,
                "breaking another's grant",
            );
            assert!(guard.health().is_valid(), "the grant stays held");
            guard.release().await.unwrap();
        }
        Lack::notes => refuses_notes(&client, &name).await,
        Lack::adopt => {
            let guard = client.mutex(&name).lock_with(&quick).await.unwrap();
            let refused = guard.hand_off(Duration::from_secs(5));
            let err = expect_kind(refused, ErrorKind::Unsupported, "a hand-off");
            assert!(err.to_string().contains(client.scheme()), "{err}");
            assert!(
                guard.health().is_valid(),
                "a refused hand-off keeps the grant"
            );
            guard.release().await.unwrap();
        }
    }
    // Nothing was left behind: the name is free.
    let free = client.mutex(&name).try_lock().await.unwrap();
    assert!(free.is_some(), "a refused request left the name taken");
}

/// A backend that keeps no notes refuses them, and with them a job's `once_per`,
/// `job_status` and elections (whose leader's identity is a note), as `Unsupported` saying
/// why, leaving the name free; a job without `once_per` still runs.
async fn refuses_notes(client: &distlock::Client, name: &str) {
    let guard = client.mutex(name).lock().await.unwrap();
    let backend = backend_of(client);
    let write = backend
        .write_note(
            distlock::backend::grant_of(&guard),
            guard.fencing_token(),
            "n",
            None,
        )
        .await;
    expect_kind(write, ErrorKind::Unsupported, "a note");
    expect_kind(
        backend.read_note(name).await,
        ErrorKind::Unsupported,
        "reading a note",
    );
    guard.release().await.unwrap();
    let once_per = client
        .job(name)
        .once_per(Duration::from_secs(60))
        .run(async |_| Ok::<_, distlock::Error>(()))
        .await;
    let err = expect_kind(once_per, ErrorKind::Unsupported, "once_per");
    assert!(err.to_string().contains("once_per"), "{err}");
    let ran = client
        .job(name)
        .run(async |_| Ok::<_, distlock::Error>(7))
        .await;
    assert_eq!(ran.unwrap().ran(), Some(7), "a job without once_per runs");
    expect_kind(
        client.job_status(name).await,
        ErrorKind::Unsupported,
        "job_status",
    );
    let campaign = client.election(name).campaign().await;
    let err = expect_kind(campaign, ErrorKind::Unsupported, "a campaign");
    assert!(err.to_string().contains("election"), "{err}");
}
