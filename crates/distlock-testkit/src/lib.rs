//! The distlock test kit: real servers on free loopback ports, process control for fault
//! tests, and the conformance suite every backend passes.
//!
//! A backend proves itself by calling [`conformance_suite!`] (and, if several processes can
//! share it, [`process_suite!`]) from its tests with a function that returns a [`Target`]:
//!
//! ```ignore
//! async fn target() -> distlock_testkit::Target {
//!     distlock_testkit::Target::new("memory://conformance")
//! }
//! distlock_testkit::conformance_suite!(target);
//! ```
//!
//! Servers the target needs are started by the function and kept alive in the target with
//! [`Target::keep`]. A server that is not installed fails the test with a message saying
//! how to install it; nothing is ever skipped.

mod child;
pub mod conformance;
mod launchers;
mod proxy;
mod server;
mod signal;

pub use child::{ChildEvent, ChildProcess, ChildTask, run_child};
pub use conformance::Target;
pub use launchers::{
    DATABASE_PASSWORD, TestCertificates, mariadb_server, mariadb_url, postgres_server,
    postgres_url, redis_server, redis_server_with, redis_tls_server,
};
pub use proxy::{FaultProxy, ProxyMode};
pub use server::{LaunchError, Ready, Server, ServerSpec, find_program, free_port};
pub use signal::{Signal, send};

/// Runs an async test body on a fresh multi-threaded runtime (used by the suite macros, so
/// the calling crate needs no runtime of its own).
///
/// # Examples
///
/// ```
/// distlock_testkit::block_on(async { assert_eq!(1 + 1, 2) });
/// ```
pub fn block_on<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a test runtime can be built")
        .block_on(future)
}

/// Waits until `guard` reports `health`, checking every 10 ms for at most `within`; true if
/// it did.
///
/// # Examples
///
/// ```
/// # distlock_testkit::block_on(async {
/// let client = distlock::Client::connect("memory://").await.unwrap();
/// let guard = client.mutex("a").lock().await.unwrap();
/// let held = distlock_testkit::wait_for_health(&guard, distlock::Health::Held, std::time::Duration::from_secs(1)).await;
/// assert!(held);
/// # });
/// ```
pub async fn wait_for_health(
    guard: &distlock::Guard,
    health: distlock::Health,
    within: std::time::Duration,
) -> bool {
    let deadline = std::time::Instant::now() + within;
    loop {
        if guard.health() == health {
            return true;
        }
        if std::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}
