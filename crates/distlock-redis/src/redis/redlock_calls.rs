//! What a RedLock asks of each of its masters beyond the calls every Redis lock makes: its
//! waiters by request token, for `status`; the stamp of a grant's token; a release that
//! says why it lets go; and its waiters' wake-ups.

use std::time::Duration;

use distlock_core::backend::{Grant, LeaseOutcome, LockRequest, Ticket};
use distlock_core::{Result, WaiterInfo};
use tokio::time::Instant;

use super::RedisBackend;
use super::handovers::News;
use crate::error::redis_error;
use crate::keys::Key;
use crate::record::{self, unwaited_start};
use crate::scripts::{Call, SCRIPTS};

/// Why a RedLock lets go of its grant on one master.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LetGo {
    /// Its holder releases it: the master hands the lock on to its head waiter.
    Release,
    /// A try won it on too few masters: the lock is left free, not handed on (a grant that
    /// did not stand is not passed down the queue).
    GiveBack,
}

/// What woke a RedLock waiter on one master.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MasterWake {
    /// A release there handed the lock to the waiter, or woke it to try.
    Woken,
    /// A release there handed the lock to the waiter ahead: worth a look at this time, when
    /// that grant's claim would have lapsed unconfirmed.
    LookAt(Instant),
}

impl RedisBackend {
    /// Lets go of RedLock grant `grant` on this master, as `why` says. A release tries the
    /// fast path first unless this client lately found the lock taken here (others then
    /// likely wait, and the fast path would not apply).
    pub(crate) async fn let_go(&self, grant: &Grant, why: LetGo) -> Result<LeaseOutcome> {
        let keys = self.keys(&grant.name)?;
        let _in_order = self.in_order(&grant.name).await;
        let mut released: i64 = -1;
        if why == LetGo::Release && !self.contended.lately(&grant.name) {
            let mut fast = Call::new(&SCRIPTS.release_exclusive, keys, &Key::RELEASE_FAST);
            fast.arg(unwaited_start(&grant.token));
            released = self.invoke(&grant.name, "release", &fast).await?;
        }
        if released == -1 {
            let mut full = Call::new(&SCRIPTS.release, keys, &Key::ALL);
            full.arg(&grant.token)
                .arg(self.fence_ttl_ms)
                .arg(match why {
                    LetGo::Release => "release",
                    LetGo::GiveBack => "give-back",
                });
            released = self.invoke(&grant.name, "release", &full).await?;
        }
        Ok(match released {
            1 => LeaseOutcome::Done,
            _ => LeaseOutcome::NotHeld,
        })
    }

    /// Waits until a release on this master wakes RedLock waiter `ticket`.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a wake-up not yet taken stays for the next wait.
    pub(crate) async fn redlock_wake(&self, ticket: &Ticket) -> MasterWake {
        self.wakers.wait(ticket, None).await;
        match self.handovers.grant_or_watch(&ticket.request.token) {
            Some(News::Watch { at }) => MasterWake::LookAt(at),
            _ => MasterWake::Woken,
        }
    }

    /// How long a grant this master hands to `request` stays unconfirmed.
    pub(crate) fn redlock_claim(&self, request: &LockRequest) -> Duration {
        self.claim_for(request)
    }

    /// Forgets RedLock waiter `token`, granted on a majority: the slot its wake-ups would
    /// take, and any news kept for it (a master that answered its try after the majority
    /// did may still hand it a grant, which its release lets go of).
    pub(crate) fn forget_waiter(&self, token: &str) {
        self.wakers.forget(token);
        self.handovers.take(token);
    }

    /// The waiters in lock `name`'s queue whose places are still kept, by request token
    /// (a RedLock merges the masters' queues by it).
    pub(crate) async fn redlock_waiters(&self, name: &str) -> Result<Vec<(String, WaiterInfo)>> {
        let keys = self.keys(name)?;
        let mut conn = self.conn_for(name);
        let (time, records) = redis::pipe()
            .cmd("TIME")
            .hgetall(keys.named(Key::Waiters))
            .query_async(&mut conn)
            .await
            .map_err(redis_error("inspect"))?;
        Ok(record::queued_waiters(time, records))
    }

    /// Stamps the grant under request `token` of lock `name` with fencing token `token_value`
    /// (RedLock): the counter is raised to it, and the holder record shows it.
    pub(crate) async fn restamp(&self, name: &str, token: &str, token_value: u64) -> Result<()> {
        let keys = self.keys(name)?;
        let mut stamp = Call::new(&SCRIPTS.restamp, keys, &[Key::Fence, Key::Lock]);
        stamp.arg(token_value).arg(token).arg(self.fence_ttl_ms);
        let _: u64 = self.invoke(name, "acquire", &stamp).await?;
        Ok(())
    }
}
