//! When this process last wrote each of its waiters' queue rows, so a waiter rewrites its
//! row only when it is due, and polls read-only in between.

use std::collections::HashMap;
use std::sync::Mutex as StdMutex;

use tokio::time::Instant;

use crate::lease_table::WAITER_LEASE;

#[derive(Debug, Default)]
pub(super) struct Refreshes {
    written: StdMutex<HashMap<String, Instant>>,
}

impl Refreshes {
    /// Whether the token's row was written less than a third of its lease ago.
    pub(super) fn fresh(&self, token: &str) -> bool {
        let written = self.written.lock().unwrap_or_else(|p| p.into_inner());
        written
            .get(token)
            .is_some_and(|at| at.elapsed() < WAITER_LEASE / 3)
    }

    pub(super) fn refreshed(&self, token: &str) {
        let mut written = self.written.lock().unwrap_or_else(|p| p.into_inner());
        written.insert(token.to_owned(), Instant::now());
    }

    pub(super) fn forget(&self, token: &str) {
        let mut written = self.written.lock().unwrap_or_else(|p| p.into_inner());
        written.remove(token);
    }
}
