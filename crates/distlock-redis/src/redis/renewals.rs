//! Renewing grants: many in one pipeline, or one on its lock's connection.

use std::time::Duration;

use distlock_core::Result;
use distlock_core::backend::{Grant, LeaseOutcome};

use super::RedisBackend;
use super::connection::Conn;
use super::refused::RedisTicket;
use crate::error::redis_error;
use crate::keys::Key;
use crate::scripts::{Call, SCRIPTS, lacks_script, load_ours};

impl RedisBackend {
    /// Renews `leases` in one pipeline on `conn`, answering for each in order.
    pub(super) async fn renew_pipeline(
        &self,
        mut conn: Conn,
        leases: impl Iterator<Item = &Grant>,
        ttl: Duration,
    ) -> Result<Vec<LeaseOutcome>> {
        let mut pipe = redis::pipe();
        for lease in leases {
            pipe.add_command(self.renewal(lease, ttl)?.into_command());
        }
        let answers: Vec<i64> = match pipe.query_async(&mut conn).await {
            // Sent again, a renewal only renews a grant that is still there.
            Err(err) if lacks_script(&err) => {
                load_ours(&mut conn).await.map_err(redis_error("renew"))?;
                pipe.query_async(&mut conn).await
            }
            answers => answers,
        }
        .map_err(redis_error("renew"))?;
        Ok(answers
            .into_iter()
            .map(|renewed| match renewed {
                1 => LeaseOutcome::Done,
                _ => LeaseOutcome::NotHeld,
            })
            .collect())
    }

    /// Renews one grant on its lock's connection.
    pub(super) async fn renew_one(&self, grant: &Grant, ttl: Duration) -> Result<LeaseOutcome> {
        let renew = self.renewal(grant, ttl)?;
        let renewed: i64 = self.invoke(&grant.name, "renew", &renew).await?;
        Ok(if renewed == 1 {
            LeaseOutcome::Done
        } else {
            LeaseOutcome::NotHeld
        })
    }

    /// The renewal of `grant` for `ttl`; for a grant of the first try, it also writes the
    /// fencing token into the holder record, which lacks it (see `first_try`).
    fn renewal(&self, grant: &Grant, ttl: Duration) -> Result<Call<'static>> {
        let mut renew = Call::new(&SCRIPTS.renew, self.keys(&grant.name)?, &Key::ALL);
        renew.arg(&grant.token).arg(ttl.as_millis() as u64);
        let unrecorded = grant
            .state::<RedisTicket>()
            .and_then(|s| s.unrecorded_fence);
        renew.arg(unrecorded);
        Ok(renew)
    }
}
