//! Adopting a RedLock grant another client handed off: taken over on every master that
//! still has it, kept when a majority did, within the lease's validity, each master of the
//! majority stamped with the highest new fencing token among them.

use std::time::Instant;

use distlock_core::backend::{Grant, Ticket, adopt_refused};
use distlock_core::{Error, ErrorKind, Result};

use super::backend::{RedlockBackend, grant_of};
use crate::redis::LetGo;

impl RedlockBackend {
    /// Gives `ticket`'s request the grant `handed` of `fencing_token` on a majority of
    /// masters: the new fencing token. Where fewer took it over, those that did let it go.
    pub(super) async fn adopt_on_masters(
        &self,
        handed: &Grant,
        fencing_token: u64,
        ticket: &mut Ticket,
    ) -> Result<u64> {
        let request = ticket.request.clone();
        let started = Instant::now();
        let timeout = self.node_timeout(request.ttl);
        let answers = self
            .on_all(timeout, |master| {
                let mut own = Ticket::new(request.clone());
                async move { Ok(master.adopt_grant(handed, fencing_token, &mut own).await) }
            })
            .await;
        let fences: Vec<(usize, u64)> = answers
            .iter()
            .enumerate()
            .filter_map(|(at, a)| match a {
                Some(Ok(fence)) => Some((at, *fence)),
                _ => None,
            })
            .collect();
        let refused = Self::refusals(&answers);
        if let Some(token) = self
            .agree_on_token(&fences, &request, started, timeout)
            .await
        {
            return Ok(token);
        }
        if !fences.is_empty() {
            // Moved to this request on too few masters: given back there.
            let moved: Vec<usize> = fences.iter().map(|(at, _)| *at).collect();
            self.let_go_on(&moved, &grant_of(&request), LetGo::GiveBack, timeout)
                .await;
        }
        if refused > self.masters() - self.quorum {
            return Err(adopt_refused(&request.name));
        }
        Err(Error::new(
            ErrorKind::QuorumNotReached,
            format!(
                "no majority of RedLock masters handed lock `{}` over in time",
                request.name
            ),
        ))
    }
}
