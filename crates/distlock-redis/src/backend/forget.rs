//! Forgetting locks a program is done with: their fencing counters, once idle.

use std::time::Duration;

use distlock_core::Result;

use super::RedisBackend;
use crate::keys::Key;
use crate::scripts::{Call, SCRIPTS};

impl RedisBackend {
    /// Deletes the fencing counter of each of `names` that is `idle` or more below the
    /// server's clock (each on its own server, in a cluster): how many went.
    pub(crate) async fn forget_names(&self, names: &[&str], idle: Duration) -> Result<usize> {
        let mut forgotten = 0;
        for name in names {
            let mut forget = Call::new(&SCRIPTS.forget, self.keys(name)?, &[Key::Fence]);
            forget.arg(idle.as_micros() as u64);
            let deleted: i64 = self.invoke(name, "forget", &forget).await?;
            forgotten += usize::from(deleted == 1);
        }
        Ok(forgotten)
    }
}
