//! The names this client lately found taken or waited for. A poll on such a name skips the
//! acquire fast path, which applies only to a free lock nobody waits for, and goes to the
//! full script at once: under contention the fast path's answer is nearly always "does
//! not apply", a call spent for nothing on every try.

use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

use crate::keys::name_hash;

/// How long a name counts as contended after it was last found so.
const LATELY: Duration = Duration::from_millis(200);
/// How many names are remembered (by hash; two names in one slot share it, which costs at
/// most a fast path skipped for nothing).
const SLOTS: usize = 64;

/// See the module.
#[derive(Debug)]
pub(crate) struct Contended {
    slots: Mutex<[Option<(u64, Instant)>; SLOTS]>,
}

impl Default for Contended {
    fn default() -> Self {
        Contended {
            slots: Mutex::new([None; SLOTS]),
        }
    }
}

impl Contended {
    /// Notes that `name` was found taken, or waited for.
    pub(crate) fn note(&self, name: &str) {
        let hash = name_hash(name);
        let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        slots[hash as usize % SLOTS] = Some((hash, Instant::now()));
    }

    /// Whether `name` was found taken, or waited for, within the last [`LATELY`].
    pub(crate) fn lately(&self, name: &str) -> bool {
        let hash = name_hash(name);
        let slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        matches!(slots[hash as usize % SLOTS], Some((h, at)) if h == hash && at.elapsed() < LATELY)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_name_counts_as_contended_for_a_while_after_it_was_noted() {
        let contended = Contended::default();
        assert!(!contended.lately("orders/1"));
        contended.note("orders/1");
        assert!(contended.lately("orders/1"));
        assert!(!contended.lately("orders/2"));
        tokio::time::advance(LATELY).await;
        assert!(!contended.lately("orders/1"));
    }
}
