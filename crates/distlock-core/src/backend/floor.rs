//! What a benchmark measures a backend's locks against, for the backends that offer it.

use async_trait::async_trait;

use crate::error::{Error, ErrorKind, Result};

/// The floor a benchmark measures a backend's locks against: one round of the store's
/// cheapest comparable operation (a Redis `PING`, a ZooKeeper `exists`), and where the store
/// has one, a minimal correct lock cycle (for Redis: `SET key token NX PX ttl`, then a
/// compare-and-delete script). A backend offers it through [`Backend::floor`]; `distlock
/// bench` reports each figure as a ratio to these, measured in the same run.
///
/// [`Backend::floor`]: super::Backend::floor
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> distlock_core::Result<()> {
/// use distlock_core::MemoryBackend;
/// use distlock_core::backend::Backend;
///
/// let backend = MemoryBackend::new();
/// let floor = backend.floor().expect("the memory backend has a floor");
/// floor.round().await?;
/// assert_eq!(floor.cycle_op(), None);
/// # Ok(()) }
/// ```
#[async_trait]
pub trait Floor: Send + Sync {
    /// What [`Floor::round`] does, for benchmark reports.
    fn op(&self) -> &'static str;

    /// One round of the store's cheapest comparable operation.
    async fn round(&self) -> Result<()>;

    /// What [`Floor::cycle_round`] does, where the store has a minimal correct lock cycle to
    /// measure a lock's acquire and release against. `None` (the default) where it has not.
    fn cycle_op(&self) -> Option<&'static str> {
        None
    }

    /// One minimal lock cycle on `name`, on the connections the backend's locks use: take
    /// it, then delete it if still ours. Only called where [`Floor::cycle_op`] names one;
    /// the default refuses.
    async fn cycle_round(&self, name: &str) -> Result<()> {
        let _ = name;
        Err(Error::new(
            ErrorKind::Unsupported,
            "this backend has no minimal lock cycle to measure",
        ))
    }
}
