//! Semaphores in Redisson's layout (Java's `getSemaphore`, with `semaphore=redisson` in the
//! URL): the key under the semaphore's name is a number, the permits available; a grant
//! takes permits from it, a release gives them back and publishes the number now
//! available on `redisson_sc:{name}`, where waiters listen. Redisson records no holder
//! and leases no permit, so a holder that crashes loses its permits for good; distlock
//! keeps a record of its own holders beside the number (`distlock_holders:{name}`) and
//! when each was last renewed (`distlock_renewed:{name}`), so `status` shows who holds
//! what and whose permits are lost. A semaphore that does not exist yet is set up at the
//! first grant with distlock's limit, as Java's `trySetPermits` sets one up.

use std::sync::LazyLock;
use std::time::Duration;

use distlock_core::backend::{Grant, LeaseOutcome, LockRequest, WAITER_REFRESH};
use distlock_core::{Error, ErrorKind, HolderInfo, LockKind, LockState, Result, random_id};
use redis::Script;

use super::{LATCH_KEEP, LayoutScript, Recorded, RedissonBackend, Tried, layout};
use crate::error::redis_error;
use crate::record::{self, RequestRecord};
use crate::scripts::Call;

/// Why a semaphore needs `semaphore=redisson` in this layout.
pub(super) const WHY_UNLEASED: &str = "Redisson's semaphore leases no permit and records no holder, so a holder that crashes loses its permits for good, where distlock's semaphores lease theirs; add semaphore=redisson to the URL to share Java's RSemaphore as it is";

/// The semaphore's scripts.
struct Scripts {
    acquire: LayoutScript,
    release: LayoutScript,
    renew: Script,
}

static SCRIPTS: LazyLock<Scripts> = LazyLock::new(|| Scripts {
    acquire: super::acquire_script(&[], include_str!("../scripts/redisson_sem_acquire.lua")),
    release: LayoutScript::new(include_str!("../scripts/redisson_sem_release.lua")),
    renew: Script::new(include_str!("../scripts/redisson_sem_renew.lua")),
});

/// What `status` reads of a semaphore in one round trip: the permits available,
/// distlock's records of its holders, when each stops being renewed, the server's time,
/// and distlock's records of its waiters (their expiries, and the records).
type Snapshot = (
    Option<String>,
    Vec<(String, String)>,
    Vec<(String, f64)>,
    (u64, u64),
    Vec<(String, f64)>,
    std::collections::HashMap<String, String>,
);

impl RedissonBackend {
    /// One try at `request`'s permits.
    pub(super) async fn try_semaphore(
        &self,
        request: &LockRequest,
        recorded: &Recorded,
    ) -> Result<Tried> {
        let name = request.name.as_str();
        let field = layout::field(&self.uuid, &request.token);
        let (channel, counter) = (layout::semaphore_channel(name), layout::token_key(name));
        let (records, renewed) = (layout::holders_key(name), layout::renewed_key(name));
        let keys = recorded.keys(&[name, &channel, &counter, &records, &renewed]);
        let mut acquire = Call::with_keys(self.script(&SCRIPTS.acquire), &keys);
        acquire
            .arg(request.permits)
            .arg(request.kind.limit())
            .arg(&field)
            .arg(RequestRecord::of(request).to_json()?)
            .arg(request.ttl.as_millis() as u64)
            .arg(&recorded.token);
        let conn = self.redis.conn_for(name);
        let answer: (i64, i64) = self.redis.invoke_on(conn, "acquire", &acquire).await?;
        match answer {
            (1, token) => Ok(Tried::Granted(token.max(0) as u64)),
            // No lease to wait out: a release's message wakes the waiter, its polls back it.
            (0, _) => Ok(Tried::Busy(Some(WAITER_REFRESH))),
            _ => Err(Error::new(
                ErrorKind::Backend,
                format!(
                    "the key `{name}` is not a Redisson semaphore (a number of permits): a client of another layout or kind uses this name"
                ),
            )
            .with_backend("redis")
            .with_operation("acquire")),
        }
    }

    /// Tells `status` a holder of permits lives (Redisson's semaphore leases none).
    pub(super) async fn renew_semaphore(
        &self,
        grant: &Grant,
        ttl: Duration,
    ) -> Result<LeaseOutcome> {
        let name = grant.name.as_str();
        let (records, renewed) = (layout::holders_key(name), layout::renewed_key(name));
        let mut renew = Call::with_keys(&SCRIPTS.renew, &[&records, &renewed]);
        renew
            .arg(layout::field(&self.uuid, &grant.token))
            .arg(ttl.as_millis() as u64);
        self.run_renewal(name, &renew).await
    }

    /// Gives a holder's permits back, as Java's `release` does.
    pub(super) async fn release_semaphore(&self, grant: &Grant) -> Result<LeaseOutcome> {
        let name = grant.name.as_str();
        let channel = layout::semaphore_channel(name);
        let (records, renewed) = (layout::holders_key(name), layout::renewed_key(name));
        let latch = layout::unlock_latch(name, &format!("{}{}", random_id(), random_id()));
        let keys = [name, &channel, &records, &renewed, &latch];
        let mut release = Call::with_keys(self.script(&SCRIPTS.release), &keys);
        release
            .arg(layout::field(&self.uuid, &grant.token))
            .arg(LATCH_KEEP.as_millis() as u64);
        self.run_release(name, &release).await
    }

    /// Semaphore `name`'s state: distlock's holders as their records say (one that stopped
    /// renewing is shown with its permits lost), the permits neither available nor held
    /// by a distlock holder, which Java's clients hold or a crash lost, and distlock's
    /// waiters.
    pub(super) async fn semaphore_state(&self, name: &str, token: u64) -> Result<LockState> {
        let mut conn = self.redis.conn_for(name);
        let [waiting, waiting_info] = layout::waiting_keys(name);
        let (available, records, renewed, time, queue, waiters): Snapshot = redis::pipe()
            .get(name)
            .hgetall(layout::holders_key(name))
            .zrange_withscores(layout::renewed_key(name), 0, -1)
            .cmd("TIME")
            .zrange_withscores(&waiting, 0, -1)
            .hgetall(&waiting_info)
            .query_async(&mut conn)
            .await
            .map_err(redis_error("inspect"))?;
        let now_ms = time.0 * 1_000 + time.1 / 1_000;
        let mut state = LockState::new(name);
        state.last_fencing_token = token;
        state.waiters = record::live_waiters((time, queue, waiters))
            .into_iter()
            .map(|(_, waiter)| waiter)
            .collect();
        let mut limit = None;
        let mut recorded = 0u32;
        for (field, value) in &records {
            let until = renewed
                .iter()
                .find(|(renewed, _)| renewed == field)
                .map_or(0, |(_, until)| *until as u64);
            let mut holder = record::holder_of(value, until.saturating_sub(now_ms) as i64);
            if let LockKind::Semaphore { limit: of } = holder.kind {
                limit = Some(of);
            }
            recorded += holder.permits;
            if until <= now_ms {
                holder.owner = format!(
                    "{} (stopped renewing: its {} permit(s) are lost until someone releases them; Redisson's semaphore returns none by itself)",
                    holder.owner, holder.permits
                );
                holder.remaining_ms = None;
                holder.no_expiry = true;
            }
            state.holders.push(holder);
        }
        let available = match available {
            None => None,
            Some(value) => Some(value.parse::<i64>().map_err(|_| {
                Error::new(
                    ErrorKind::Backend,
                    format!(
                        "the key `{name}` is not a Redisson lock hash or semaphore: it holds a string that is no number of permits, so a client of another layout uses this name"
                    ),
                )
                .with_backend("redis")
                .with_operation("inspect")
            })?),
        };
        if let (Some(limit), Some(available)) = (limit, available) {
            let elsewhere = i64::from(limit) - available - i64::from(recorded);
            if elsewhere > 0 {
                state
                    .holders
                    .push(unrecorded(limit, elsewhere as u32, token));
            }
        }
        Ok(state)
    }
}

/// The permits of semaphore of `limit` that neither are available nor have a distlock
/// holder: held by Java's clients (Redisson records none) or lost in a crash.
fn unrecorded(limit: u32, permits: u32, token: u64) -> HolderInfo {
    let mut holder = HolderInfo::new(
        "held by Java clients or lost in a crash (Redisson's semaphore records no holder)",
        LockKind::Semaphore { limit },
        token,
    );
    holder.permits = permits;
    holder.no_expiry = true;
    holder.meta = record::unknown_meta();
    holder
}
