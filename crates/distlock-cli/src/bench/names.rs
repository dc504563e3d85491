//! The lock names one bench takes on one store (the same in every run, under an id of
//! the bench's own), and forgetting them at its end, so a bench leaves no fencing counter
//! behind for `fence_ttl`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::output::errln;
use distlock::backend::MIN_FENCE_TTL;
use distlock::{Client, random_id};

/// The names of one bench on one store: `bench/<id>/<phase>`.
pub(super) struct BenchNames {
    id: String,
    /// How many names the many-names phase takes.
    many: u32,
    /// How many new names the uncontended phase took, one per cycle.
    new_names: AtomicU64,
}

impl BenchNames {
    /// Names for a bench whose many-names phase runs `many` tasks.
    pub(super) fn new(many: u32) -> BenchNames {
        BenchNames {
            id: random_id(),
            many,
            new_names: AtomicU64::new(0),
        }
    }

    /// The uncontended phase's lock.
    pub(super) fn uncontended(&self) -> String {
        self.named("uncontended")
    }

    /// The key of the minimal lock cycle measured beside it (no fencing counter).
    pub(super) fn minimal_cycle(&self) -> String {
        self.named("minimal-cycle")
    }

    /// A name no cycle took before.
    pub(super) fn new_name(&self) -> String {
        let taken = self.new_names.fetch_add(1, Ordering::Relaxed);
        // One format: a cycle on a new name pays for naming it, as an application's does.
        format!("bench/{}/new/{taken}", self.id)
    }

    /// The lock every client contends for.
    pub(super) fn contended(&self) -> String {
        self.named("contended")
    }

    /// Task `task`'s own lock in the many-names phase.
    pub(super) fn many(&self, task: u32) -> String {
        self.named(&format!("many/{task}"))
    }

    fn named(&self, what: &str) -> String {
        format!("bench/{}/{what}", self.id)
    }

    /// Lets `client`'s store drop the fencing counters of these names, once they have been
    /// idle long enough to go (the bench's last phase has just ended), and waits for what
    /// the client still finishes in the background (a RedLock release's calls to its
    /// slower masters), so the bench leaves no lock held behind it. A store that refuses is
    /// told of on stderr: its counters go after `fence_ttl`.
    pub(super) async fn tidy_up(&self, client: &Client) {
        let new_names = self.new_names.load(Ordering::Relaxed);
        let names = [self.uncontended(), self.contended()]
            .into_iter()
            .chain((0..self.many).map(|task| self.many(task)))
            .chain((0..new_names).map(|taken| self.named(&format!("new/{taken}"))));
        if let Err(err) = client.forget(names).await {
            errln!(
                "distlock bench: the bench's fencing counters stay until their fence_ttl: {err}"
            );
        }
        client.settle(SETTLE_WITHIN).await;
    }
}

/// How long the bench waits at its end for what its clients finish in the background.
const SETTLE_WITHIN: Duration = Duration::from_secs(5);

/// How long after its last grant a counter can be forgotten, with a margin.
pub(super) const IDLE: Duration = MIN_FENCE_TTL.saturating_add(Duration::from_millis(100));
