//! The conformance suite: one set of async test functions every backend's tests call.
//!
//! Each function takes a [`Target`] and asserts one property of the contract. Functions for
//! optional features check the backend's [`Capabilities`](distlock::backend::Capabilities): a backend
//! without the feature must refuse it with `Unsupported`, never silently misbehave.

mod breaking;
mod election;
mod election_faults;
mod exclusion;
mod hand_off;
mod input;
mod job;
mod lacks;
mod lease;
mod multi;
mod notes;
mod process;
mod queue;
mod rwlock;
mod semaphore;
mod session;
mod template;

use std::any::Any;
use std::future::Future;
use std::time::{Duration, Instant};

pub use distlock::backend::Liveness;
use distlock::{Client, Error, ErrorKind, Result};

pub use breaking::*;
pub use election::*;
pub use election_faults::*;
pub use exclusion::*;
pub use hand_off::*;
pub use input::*;
pub use job::*;
pub use lacks::*;
pub use lease::*;
pub use multi::*;
pub use notes::*;
pub use process::*;
pub use queue::*;
pub use rwlock::*;
pub use semaphore::*;
pub use session::*;
pub use template::*;

/// Makes a session fault for one client of a session target.
type FaultsOf = dyn Fn(&Client) -> Option<Box<dyn SessionFaults>> + Send + Sync;

/// The faults a session suite inflicts on one client's session: what a network cut, its
/// end, and the server's expiry of the session do.
#[distlock::backend::async_trait]
pub trait SessionFaults: Send + Sync {
    /// Contact with the server is lost (the session lives on there, for now).
    async fn suspend(&self);
    /// Contact is back within the session timeout.
    async fn resume(&self);
    /// The server expires the session.
    async fn expire(&self);
}

#[distlock::backend::async_trait]
impl SessionFaults for distlock::memory::MemorySession {
    async fn suspend(&self) {
        distlock::memory::MemorySession::suspend(self);
    }

    async fn resume(&self) {
        distlock::memory::MemorySession::resume(self);
    }

    async fn expire(&self) {
        distlock::memory::MemorySession::expire(self);
    }
}

/// A memory target in session mode (each client a session that stays valid 500 ms after it
/// is suspended), whose session faults go through the memory backend's test hook.
///
/// # Examples
///
/// ```
/// let target = distlock_testkit::memory_session_target();
/// assert!(target.url().contains("liveness=session"));
/// ```
pub fn memory_session_target() -> Target {
    let url = format!(
        "memory://{}?liveness=session&session_timeout=500ms",
        distlock::random_id()
    );
    Target::new(url).with_session_faults(|client| {
        let backend: &dyn Any = distlock::backend::backend_of(client).as_ref();
        let memory = backend.downcast_ref::<distlock::MemoryBackend>()?;
        let session = memory.session_control()?;
        Some(Box::new(session) as Box<dyn SessionFaults>)
    })
}

/// A backend under test: its URL, and whatever must stay alive while it is used (servers,
/// temporary directories).
///
/// # Examples
///
/// ```
/// let target = distlock_testkit::Target::new("memory://docs");
/// assert_eq!(target.url(), "memory://docs");
/// ```
pub struct Target {
    url: String,
    child_test: String,
    keep: Vec<Box<dyn Any + Send + Sync>>,
    faults: Option<Box<FaultsOf>>,
}

impl std::fmt::Debug for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Target").field("url", &self.url).finish()
    }
}

impl Target {
    /// A target at `url`.
    ///
    /// # Examples
    ///
    /// See [`Target`].
    pub fn new(url: impl Into<String>) -> Self {
        Target {
            url: url.into(),
            child_test: String::new(),
            keep: Vec::new(),
            faults: None,
        }
    }

    /// Says how to fault the session of a client of this target (for the session suite).
    ///
    /// # Examples
    ///
    /// See [`memory_session_target`].
    pub fn with_session_faults(
        mut self,
        faults: impl Fn(&Client) -> Option<Box<dyn SessionFaults>> + Send + Sync + 'static,
    ) -> Self {
        self.faults = Some(Box::new(faults));
        self
    }

    /// The faults of `client`'s session, if the target says how to make them.
    pub(crate) fn session_faults(&self, client: &Client) -> Option<Box<dyn SessionFaults>> {
        self.faults.as_ref().and_then(|faults| faults(client))
    }

    /// Keeps `thing` (a server, a temporary directory) alive as long as the target.
    ///
    /// # Examples
    ///
    /// ```
    /// let dir = tempfile::tempdir().unwrap();
    /// let url = format!("sqlite://{}/locks.db", dir.path().display());
    /// let target = distlock_testkit::Target::new(url).keep(dir);
    /// ```
    pub fn keep(mut self, thing: impl Any + Send + Sync) -> Self {
        self.keep.push(Box::new(thing));
        self
    }

    /// Names the child test helper processes run (set by [`process_suite!`]).
    ///
    /// [`process_suite!`]: crate::process_suite
    ///
    /// # Examples
    ///
    /// ```
    /// let target = distlock_testkit::Target::new("memory://").with_child_test("sqlite::conformance_child");
    /// ```
    pub fn with_child_test(mut self, module_path: &str) -> Self {
        let path = module_path.split_once("::").map_or("", |(_, rest)| rest);
        self.child_test = if path.is_empty() {
            "conformance_child".to_owned()
        } else {
            format!("{path}::conformance_child")
        };
        self
    }

    /// The lock URL.
    ///
    /// # Examples
    ///
    /// See [`Target`].
    pub fn url(&self) -> &str {
        &self.url
    }

    /// A new client connected to the target.
    ///
    /// # Examples
    ///
    /// ```
    /// # distlock_testkit::block_on(async {
    /// let client = distlock_testkit::Target::new("memory://").client().await;
    /// # });
    /// ```
    pub async fn client(&self) -> Client {
        Client::connect(&self.url)
            .await
            .unwrap_or_else(|e| panic!("cannot connect to {}: {e}", self.url))
    }

    pub(crate) fn child_test(&self) -> &str {
        &self.child_test
    }
}

/// A lock name no other test uses.
pub(crate) fn unique(prefix: &str) -> String {
    format!("{prefix}-{}", distlock::random_id())
}

/// Asserts that `result` failed with `kind`.
pub(crate) fn expect_kind<T: std::fmt::Debug>(
    result: Result<T>,
    kind: ErrorKind,
    what: &str,
) -> Error {
    match result {
        Ok(v) => panic!("{what}: expected a {kind} error, got Ok({v:?})"),
        Err(e) => {
            assert_eq!(e.kind(), kind, "{what}: wrong error kind: {e}");
            e
        }
    }
}

/// Polls `check` until it holds or `within` passes (every 10 ms); true if it held.
pub(crate) async fn eventually<F, Fut>(within: Duration, mut check: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = Instant::now() + within;
    loop {
        if check().await {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Waits until `name` has `count` queued waiters (bounded by 5 s).
pub(crate) async fn wait_for_waiters(client: &Client, name: &str, count: usize) {
    let ok = eventually(Duration::from_secs(5), || async {
        client
            .status(Some(name))
            .await
            .map(|s| s.first().map_or(0, |s| s.waiters.len()) == count)
            .unwrap_or(false)
    })
    .await;
    assert!(ok, "lock {name} never had {count} waiters");
}

/// Waits until `name` has a queued waiter of process `pid` (bounded by 5 s). Waiters of a
/// killed process may already be gone: a server that notices the dead connection at once
/// drops them.
pub(crate) async fn wait_for_waiter_of(client: &Client, name: &str, pid: u32) {
    let ok = eventually(Duration::from_secs(5), || async {
        client
            .status(Some(name))
            .await
            .map(|s| s.iter().flat_map(|s| &s.waiters).any(|w| w.meta.pid == pid))
            .unwrap_or(false)
    })
    .await;
    assert!(ok, "lock {name} never had a waiter of process {pid}");
}

/// Generates one `#[test]` per in-process conformance property that applies to the
/// backend, as its test file declares it: how its grants live (`liveness = Lease`: its own
/// leases — renewal, loss to a taker, permits of a crashed holder; `liveness = Session`: its
/// client's session — guards outliving their TTL, a suspended or expired session, release
/// at the hold limit, waiters across sessions) and what it lacks among `rwlock`,
/// `semaphore`, `fair`, `force_release`, `notes` and `adopt` ([`Lack`]). The properties of a capability it
/// lacks are not generated; in their place `lacks::<capability>` checks the backend refuses
/// it as `Unsupported`. `declared_capabilities_match` checks the declaration against the
/// backend's own [`Capabilities`](distlock::backend::Capabilities), so a backend that gains
/// or loses a capability must say so here. A session backend's target must say how to
/// fault its sessions ([`Target::with_session_faults`](crate::Target::with_session_faults)).
///
/// # Examples
///
/// ```ignore
/// async fn target() -> distlock_testkit::Target { distlock_testkit::Target::new("memory://t") }
/// distlock_testkit::conformance_suite!(target, liveness = Lease);
///
/// mod redlock {
///     async fn target() -> distlock_testkit::Target { todo!("three masters") }
///     distlock_testkit::conformance_suite!(target, liveness = Lease, lacks = [rwlock, semaphore, fair]);
/// }
/// ```
#[macro_export]
macro_rules! conformance_suite {
    ($target:path, liveness = $liveness:ident $(, lacks = [$($lack:ident),* $(,)?])? $(,)?) => {
        $crate::conformance_suite!(@tests $target;
            mutual_exclusion_across_tasks,
            try_lock_when_held_returns_none,
            ttl_expiry_frees_the_lock,
            stale_holder_cannot_release_or_renew,
            fencing_tokens_strictly_increase,
            fencing_tokens_increase_in_grant_order_for_every_kind,
            cancelled_acquire_leaves_nothing,
            dropped_guard_is_released,
            reentrant_holds_nest_by_owner,
            status_shows_holders_and_waiters,
            bad_input_is_rejected,
            names_differing_in_a_space_case_or_accent_are_distinct,
            max_hold_stops_renewal,
            multi_lock_is_all_or_nothing,
            multi_locks_in_any_order_do_not_deadlock,
            template_releases_after_success_error_panic_and_drop,
            template_cancels_or_signals_on_loss,
            template_tells_deep_code_its_token,
            job_runs_once_and_reports_who_is_busy,
            job_at_least_keeps_the_name_after_a_quick_run,
            job_at_most_cancels_the_body_before_the_release,
        );
        $crate::conformance_suite!(@unless notes [$($($lack),*)?] $target;
            notes_are_fenced_and_stamped_by_the_store,
            job_once_per_skips_until_the_window_passes,
            election_terms_increase_and_observers_follow,
            election_run_stops_at_the_loss_and_requeues,
            election_run_ends_before_a_close_releases,
        );
        $crate::conformance_suite!(@unless adopt [$($($lack),*)?] $target;
            hand_off_is_adopted_once_with_a_greater_token,
            election_hands_over_to_a_chosen_candidate,
        );
        $crate::conformance_suite!(@unless rwlock [$($($lack),*)?] $target;
            rwlock_readers_share_and_writers_exclude,
            rwlock_waiting_writer_blocks_new_readers,
        );
        $crate::conformance_suite!(@unless semaphore [$($($lack),*)?] $target;
            semaphore_never_exceeds_its_permits,
        );
        $crate::conformance_suite!(@unless fair [$($($lack),*)?] $target;
            fair_mode_grants_in_arrival_order,
        );
        $crate::conformance_suite!(@unless force_release [$($($lack),*)?] $target;
            a_broken_grant_goes_to_the_next_and_its_late_writes_are_refused,
            breaking_without_a_token_breaks_every_holder,
        );
        $crate::conformance_suite!(@liveness $liveness [$($($lack),*)?] $target);

        #[test]
        fn declared_capabilities_match() {
            $crate::block_on(async {
                let target = $target().await;
                $crate::conformance::declaration_matches(
                    &target,
                    $crate::conformance::Liveness::$liveness,
                    &[$($($crate::conformance::Lack::$lack),*)?],
                )
                .await;
            });
        }

        /// One test per capability the backend declares it lacks: it refuses it.
        mod lacks {
            #[allow(unused_imports)]
            use super::*;
            $($(
                #[test]
                fn $lack() {
                    $crate::block_on(async {
                        let target = $target().await;
                        $crate::conformance::refuses_what_it_lacks(
                            &target,
                            $crate::conformance::Lack::$lack,
                        )
                        .await;
                    });
                }
            )*)?
        }
    };
    (@liveness Lease [$($lack:ident),*] $target:path) => {
        $crate::conformance_suite!(@tests $target;
            renewal_keeps_the_lock,
            lost_fires_after_takeover,
        );
        $crate::conformance_suite!(@unless semaphore [$($lack),*] $target;
            semaphore_permits_of_a_crashed_holder_return,
        );
    };
    (@liveness Session [$($lack:ident),*] $target:path) => {
        $crate::conformance_suite!(@tests $target;
            session_guards_outlive_their_ttl,
            suspended_session_puts_every_guard_at_risk,
            expired_session_loses_every_guard_at_once,
            suspended_past_validity_is_lost,
            session_grants_are_released_at_their_limit,
            waiter_of_an_expired_session_waits_on_in_the_new_one,
        );
    };
    // The tests of capability `$cap`, unless the list of lacks names it.
    (@unless $cap:ident [] $target:path; $($name:ident),+ $(,)?) => {
        $crate::conformance_suite!(@tests $target; $($name),+);
    };
    (@unless rwlock [rwlock $(, $rest:ident)*] $target:path; $($name:ident),+ $(,)?) => {};
    (@unless semaphore [semaphore $(, $rest:ident)*] $target:path; $($name:ident),+ $(,)?) => {};
    (@unless fair [fair $(, $rest:ident)*] $target:path; $($name:ident),+ $(,)?) => {};
    (@unless force_release [force_release $(, $rest:ident)*] $target:path; $($name:ident),+ $(,)?) => {};
    (@unless notes [notes $(, $rest:ident)*] $target:path; $($name:ident),+ $(,)?) => {};
    (@unless adopt [adopt $(, $rest:ident)*] $target:path; $($name:ident),+ $(,)?) => {};
    (@unless $cap:ident [$head:ident $(, $rest:ident)*] $target:path; $($name:ident),+ $(,)?) => {
        $crate::conformance_suite!(@unless $cap [$($rest),*] $target; $($name),+);
    };
    (@tests $target:path; $($name:ident),+ $(,)?) => {
        $(
            #[test]
            fn $name() {
                $crate::block_on(async {
                    let target = $target().await;
                    $crate::conformance::$name(&target).await;
                });
            }
        )+
    };
}

/// Generates the cross-process and process-fault tests, plus the ignored child test the
/// helper processes run. Call it in a module of its own or beside [`conformance_suite!`].
/// A backend registered by a call of its own (one outside distlock's crates) names that
/// call as `install`, which the helper processes make before they connect. A backend that
/// keeps no notes says `lacks = [notes]`: the leader elections' process faults are not
/// generated (its conformance suite checks that it refuses elections); one that cannot
/// hand grants over says `adopt`, and the hand-off across processes is not generated.
///
/// # Examples
///
/// ```ignore
/// distlock_testkit::process_suite!(target);
/// distlock_testkit::process_suite!(target, install = my_backend::install, lacks = [notes, adopt]);
/// ```
#[macro_export]
macro_rules! process_suite {
    ($target:path $(, install = $install:path)? $(, lacks = [$($lack:ident),* $(,)?])? $(,)?) => {
        $crate::process_suite!(@tests $target;
            mutual_exclusion_across_processes,
            killed_holder_frees_the_lock_within_ttl,
            paused_holder_loses_its_lease,
            killed_waiter_does_not_stall_the_queue,
            a_program_ending_with_its_lock_leaves_it_free,
        );
        $crate::process_suite!(@unless notes [$($($lack),*)?] $target;
            killed_leader_is_succeeded_with_a_greater_term,
            paused_leader_is_stopped_when_it_wakes,
        );
        $crate::process_suite!(@unless adopt [$($($lack),*)?] $target;
            a_process_hands_its_grant_to_another,
        );

        #[test]
        #[ignore = "runs only as a helper process of the process suite"]
        fn conformance_child() {
            $($install();)?
            $crate::run_child();
        }
    };
    // The tests of capability `$cap`, unless the list of lacks names it.
    (@unless $cap:ident [] $target:path; $($name:ident),+ $(,)?) => {
        $crate::process_suite!(@tests $target; $($name),+);
    };
    (@unless notes [notes $(, $rest:ident)*] $target:path; $($name:ident),+ $(,)?) => {};
    (@unless adopt [adopt $(, $rest:ident)*] $target:path; $($name:ident),+ $(,)?) => {};
    (@unless $cap:ident [$head:ident $(, $rest:ident)*] $target:path; $($name:ident),+ $(,)?) => {
        $crate::process_suite!(@unless $cap [$($rest),*] $target; $($name),+);
    };
    (@tests $target:path; $($name:ident),+ $(,)?) => {
        $(
            #[test]
            fn $name() {
                $crate::block_on(async {
                    let target = $target().await.with_child_test(module_path!());
                    $crate::conformance::$name(&target).await;
                });
            }
        )+
    };
}
