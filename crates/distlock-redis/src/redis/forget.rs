//! Forgetting locks a program is done with: their fencing counters, once idle.

use std::time::Duration;

use distlock_core::Result;
use futures_util::future::try_join_all;

use super::RedisBackend;
use crate::keys::Key;
use crate::scripts::{Call, SCRIPTS};

/// How many names' calls are in flight at once.
const FORGET_AT_ONCE: usize = 100;

impl RedisBackend {
    /// Deletes the fencing counter of each of `names` that is `idle` or more below the
    /// server's clock (each on its own server, in a cluster): how many went. The calls go
    /// out together, a chunk at a time, so the connection pipelines them.
    pub(crate) async fn forget_names(&self, names: &[&str], idle: Duration) -> Result<usize> {
        let mut forgotten = 0;
        for chunk in names.chunks(FORGET_AT_ONCE) {
            let calls = chunk.iter().map(|&name| async move {
                let mut forget = Call::new(&SCRIPTS.forget, self.keys(name)?, &[Key::Fence]);
                forget.arg(idle.as_micros() as u64);
                let deleted: i64 = self.invoke(name, "forget", &forget).await?;
                Ok::<_, distlock_core::Error>(usize::from(deleted == 1))
            });
            forgotten += try_join_all(calls).await?.into_iter().sum::<usize>();
        }
        Ok(forgotten)
    }
}
