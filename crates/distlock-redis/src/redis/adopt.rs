//! Adopting a grant another client handed off: its holder record replaced by the
//! adopter's, with a new fencing token, in one script.

use distlock_core::Result;
use distlock_core::backend::{Grant, Ticket, adopt_refused};

use super::RedisBackend;
use crate::keys::Key;
use crate::record::RequestRecord;
use crate::scripts::{Call, SCRIPTS};

impl RedisBackend {
    /// Gives `ticket`'s request the live exclusive grant `handed` of `fencing_token`: the
    /// new fencing token.
    pub(crate) async fn adopt_grant(
        &self,
        handed: &Grant,
        fencing_token: u64,
        ticket: &mut Ticket,
    ) -> Result<u64> {
        let request = &ticket.request;
        let record = RequestRecord::of(request).to_json()?;
        let mut adopt = Call::new(&SCRIPTS.adopt, self.keys(&request.name)?, &Key::TRY);
        adopt
            .arg(&handed.token)
            .arg(fencing_token)
            .arg(&record)
            .arg(request.ttl.as_millis() as u64)
            .arg(self.fence_ttl_ms);
        let fence: i64 = self.invoke(&request.name, "adopt", &adopt).await?;
        let Ok(fence) = u64::try_from(fence) else {
            return Err(adopt_refused(&request.name));
        };
        // Acknowledged by the replicas asked for, as a grant is.
        self.granted(ticket, fence).await?;
        Ok(fence)
    }
}
