//! The first try of an exclusive request nobody queued, on one server or a cluster, where
//! the client asks for it (`first_try=commands`): four plain commands in one round trip,
//! no script. On the server this is the cheapest grant that keeps what a grant carries
//! (the minimal `SET NX PX` lock's `SET` and three short commands, where a script call
//! costs as much again as the commands it runs):
//!
//! 1. `SET <lock> <holder record> NX PX <ttl>` takes the lock if nobody holds it;
//! 2. `EXISTS <queue> <leases>` tells whether anyone waits for it or shares it;
//! 3. `INCR <fencing counter>` counts the grant's fencing token;
//! 4. `GET <lock>` tells whether the lock is still this request's.
//!
//! The four need not run as one: the grant stands only where the `SET` took the lock, the
//! `GET` finds it still this request's (only this request writes a record under its token,
//! once, so it was held throughout), and nobody queued or held a shared lease when the
//! `EXISTS` ran in between. A reader admitted before the `SET` still holds its lease when
//! the `EXISTS` runs, or has given it up; one that asks after the `SET` is refused. The
//! counter is counted while the lock was held, so tokens follow grants in order as the
//! scripts' do: one counted before a grant that came earlier, one after its release for a
//! grant that comes later. Where the counter was never seeded (it counted below
//! [`SEEDED_FROM`]: a server's first grants, or a slot's, or a day after its counter was
//! seeded), a small script seeds it and counts the token, where the lock is still this
//! request's. Where the grant does not stand, the full script
//! decides, and finds the record this try left (one without a fencing token) as this
//! request's own: it takes it back and decides afresh, handing the lock on where it
//! refuses.
//!
//! The record the `SET` writes has no fencing token, which is counted after it: the
//! holder's first renewal or note writes it in (see `record_fence` in helpers.lua), and
//! until then `inspect` shows the holder with token 0, breaking it by its token takes
//! token 0, and a hand-off of it is adopted by its request token alone. That is why this
//! try is asked for, not the default.

use distlock_core::Result;
use distlock_core::backend::Ticket;
use redis::{Cmd, Pipeline, Value};

use super::RedisBackend;
use super::connection::Conn;
use crate::error::redis_error;
use crate::keys::Key;
use crate::record::{RequestRecord, record_start};
use crate::scripts::{Call, SCRIPTS};

/// The least value of a seeded fencing counter: the scripts seed a counter (re)created by
/// an `INCR` at the server's clock in microseconds, far above this. A first try that counts
/// below it leaves the seeding to the full script.
pub(crate) const SEEDED_FROM: i64 = 1_000_000_000_000;

/// What a first try came to.
pub(super) enum FirstTry {
    /// Granted with this fencing token, which the holder record lacks.
    Granted(u64),
    /// The lock is taken: the full script decides, with this holder record.
    Taken(String),
    /// The try took the lock, but the grant does not stand: the full script decides (it
    /// finds the try's record and takes it back first), with this holder record.
    Undecided(String),
}

impl RedisBackend {
    /// Tries to grant `ticket`'s exclusive request at once (see the module).
    pub(super) async fn first_try(&self, mut conn: Conn, ticket: &Ticket) -> Result<FirstTry> {
        let request = &ticket.request;
        let keys = self.keys(&request.name)?;
        let record = RequestRecord::of(request).to_json()?;
        // Each command in a buffer of its own size, written once.
        let name_bytes = self.prefix.len() + request.name.len() + 32;
        let mut set = Cmd::with_capacity(6, record.len() + name_bytes + 32);
        set.arg("SET")
            .arg(keys.named(Key::Lock))
            .arg(&record)
            .arg("NX")
            .arg("PX")
            .arg(request.ttl.as_millis() as u64);
        let mut exists = Cmd::with_capacity(3, 2 * name_bytes + 8);
        exists
            .arg("EXISTS")
            .arg(keys.named(Key::Queue))
            .arg(keys.named(Key::Leases));
        let mut incr = Cmd::with_capacity(2, name_bytes + 8);
        incr.arg("INCR").arg(keys.named(Key::Fence));
        let mut get = Cmd::with_capacity(2, name_bytes + 8);
        get.arg("GET").arg(keys.named(Key::Lock));
        let mut pipe = Pipeline::with_capacity(4);
        pipe.add_command(set)
            .add_command(exists)
            .add_command(incr)
            .add_command(get);
        let answer: (Value, i64, i64, Option<Vec<u8>>) = match pipe.query_async(&mut conn).await {
            // Sent again, the SET finds the record of the first sending (when it ran) and
            // fails: the full script then takes that record back.
            Err(err) if err.is_connection_dropped() || err.is_io_error() => {
                tracing::debug!(error = %err, "redis connection dropped; trying once more");
                pipe.query_async(&mut conn).await
            }
            answer => answer,
        }
        .map_err(redis_error("acquire"))?;
        let start = record_start(&request.token);
        let still_ours = |held: &Option<Vec<u8>>| {
            held.as_deref()
                .is_some_and(|held| held.starts_with(start.as_bytes()))
        };
        Ok(match answer {
            (Value::Nil, ..) => FirstTry::Taken(record),
            (_, 0, fence, held) if fence >= SEEDED_FROM && still_ours(&held) => {
                FirstTry::Granted(fence as u64)
            }
            (_, 0, _, held) if still_ours(&held) => {
                let mut seed = Call::new(&SCRIPTS.seed_fence, keys, &[Key::Fence, Key::Lock]);
                seed.arg(self.fence_ttl_ms).arg(&start);
                let fence: i64 = self.invoke_on(conn, "acquire", &seed).await?;
                match u64::try_from(fence) {
                    Ok(fence) => FirstTry::Granted(fence),
                    Err(_) => FirstTry::Undecided(record),
                }
            }
            _ => FirstTry::Undecided(record),
        })
    }
}
