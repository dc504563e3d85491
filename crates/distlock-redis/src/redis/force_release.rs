//! Breaking a stuck lock: its grants deleted whoever holds them, the fencing counter first
//! bumped, in one script.

use distlock_core::{HolderInfo, Result};

use super::RedisBackend;
use crate::error::redis_error;
use crate::keys::Key;
use crate::record;
use crate::scripts::{Call, SCRIPTS};

impl RedisBackend {
    /// Breaks the grant of `name` with `fencing_token` (every grant: `None`; a foreign
    /// client's lock has token 0). Sent once, never again on a dropped connection: a
    /// second run would find nothing and hide what the first broke.
    pub(super) async fn break_grants(
        &self,
        name: &str,
        fencing_token: Option<u64>,
    ) -> Result<Vec<HolderInfo>> {
        let mut call = Call::new(&SCRIPTS.force_release, self.keys(name)?, &Key::ALL);
        call.arg(fencing_token.map_or_else(String::new, |token| token.to_string()))
            .arg(self.fence_ttl_ms);
        let broken: Vec<(String, i64)> = call
            .run(&mut self.conn_for(name))
            .await
            .map_err(redis_error("force_release"))?;
        Ok(broken
            .iter()
            .map(|(value, pttl)| record::holder_of(value, *pttl))
            .collect())
    }
}
