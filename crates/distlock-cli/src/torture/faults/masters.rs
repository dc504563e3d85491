//! The documents' three ways to grant a RedLock twice, struck at a RedLock's masters
//! (`--server redlock`). Each needs a grant held on a bare majority, as the documents'
//! ABC of five masters: with three, a holder granted by all of them loses nothing when
//! one forgets. So a fault first puts one master out of reach until a grant is made
//! without it and brings it back, then strikes one of the two that made it — restarted
//! empty, failed over to a replica that never received the grant, or its clock stepped
//! past the lease. The next acquirer then finds two masters free while the holder still
//! holds, by its lease, the grant the third keeps: the overlap the checker names, until
//! the holder's next renewal finds the grant gone.

use std::time::Duration;

use distlock::Result;
use distlock_check::history::monotonic_ns;
use rand::Rng;
use rand::rngs::StdRng;

use super::{Undo, Workers};
use crate::args::FaultKind;
use crate::torture::process::fault;
use crate::torture::record::Recorder;

/// How long a master is kept out of reach at most, waiting for a grant made without it.
const GRANT_WAIT: Duration = Duration::from_secs(3);

/// How long the waiters get to reconnect to the master brought back before the strike:
/// a few of a RedLock waiter's pauses between tries.
const REACHED: Duration = Duration::from_millis(60);

impl Workers {
    /// Strikes a master of the next grant made without another, by `kind`.
    pub(super) async fn at_master(
        &mut self,
        kind: FaultKind,
        rng: &mut StdRng,
        recorder: &Recorder,
    ) -> Result<()> {
        let Some(masters) = self.server.as_ref().and_then(|s| s.masters()) else {
            return Ok(());
        };
        let count = masters.len();
        let struck = rng.random_range(0..count);
        let aside = (struck + rng.random_range(1..count)) % count;
        masters.reach(aside, false);
        recorder.record(0, fault(&format!("master-aside {aside}")));
        self.undo = Some(Undo::MasterAside(aside));
        // The grant that the struck master and the third made. For a failover, one made
        // after the replica stopped and after every grant it has expired there (a lease
        // renewed last before it stopped ends within a TTL): the replica then has the lock
        // free, as one that the last grant had not reached yet.
        let mut asked = monotonic_ns();
        if kind == FaultKind::Failover {
            masters.detach_replica(struck).await?;
            asked = monotonic_ns() + self.template.ttl.as_nanos() as u64;
        }
        let give_up = (asked + GRANT_WAIT.as_nanos() as u64).min(self.template.until);
        while self.last_grant < asked && monotonic_ns() < give_up {
            tokio::time::sleep(Duration::from_millis(1)).await;
            self.holders();
        }
        // Back in reach, and found so by the waiters' next tries, before the strike; no
        // strike without a grant to strike at (the run ended first).
        self.undo_fault(recorder)?;
        if self.last_grant < asked {
            return Ok(());
        }
        tokio::time::sleep(REACHED).await;
        let masters = self.server.clone();
        let Some(masters) = masters.as_ref().and_then(|s| s.masters()) else {
            return Ok(());
        };
        // Recorded as it begins: a restarted master may serve the next acquirer before its
        // launcher has seen it ready.
        let name = match kind {
            FaultKind::MasterRestart => "master-restart",
            FaultKind::Failover => "failover",
            _ => "master-clock-jump",
        };
        recorder.record(0, fault(&format!("{name} {struck}")));
        match kind {
            FaultKind::MasterRestart => masters.restart_empty(struck).await?,
            FaultKind::Failover => masters.fail_over(struck).await?,
            _ => masters.jump_clock(struck, (self.template.ttl * 10).as_secs().max(10))?,
        }
        let valid_until = self.holders().iter().map(|&(_, until)| until).max();
        self.wait_out(0, valid_until.unwrap_or(0)).await;
        Ok(())
    }
}
