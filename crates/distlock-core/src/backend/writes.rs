//! Holding a client's writes back while its process stops itself.

use std::fmt;

/// A hold on a client's writes to its store, from
/// [`Backend::pause_writes`](super::Backend::pause_writes): while it lives, none of the
/// client's writes is under way and new ones wait; dropping it lets them go.
///
/// # Examples
///
/// ```
/// use distlock_core::backend::WritesPaused;
/// let held = WritesPaused::holding(std::sync::Mutex::new(()));
/// assert!(held.is_holding());
/// assert!(!WritesPaused::none().is_holding());
/// ```
#[must_use = "writes go on as soon as this is dropped"]
pub struct WritesPaused(Option<Box<dyn Send + Sync>>);

impl WritesPaused {
    /// Holds nothing: the store needs no pause.
    ///
    /// # Examples
    ///
    /// See [`WritesPaused`].
    pub fn none() -> WritesPaused {
        WritesPaused(None)
    }

    /// Holds `hold` (a write guard of the store's gate, say) until dropped.
    ///
    /// # Examples
    ///
    /// See [`WritesPaused`].
    pub fn holding(hold: impl Send + Sync + 'static) -> WritesPaused {
        WritesPaused(Some(Box::new(hold)))
    }

    /// Whether it holds anything back.
    ///
    /// # Examples
    ///
    /// See [`WritesPaused`].
    pub fn is_holding(&self) -> bool {
        self.0.is_some()
    }
}

impl fmt::Debug for WritesPaused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WritesPaused")
            .field("holding", &self.is_holding())
            .finish()
    }
}
