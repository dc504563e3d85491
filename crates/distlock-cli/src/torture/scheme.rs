//! The lock schemes a torture worker runs: distlock's guard, the documents' database
//! schemes (`sql_scheme`), and the broken schemes the documents walk through, on one
//! Redis server, written as they write them (with
//! milliseconds where they give seconds, so a run can use short TTLs). The broken schemes
//! tell their holder nothing after the grant; each records as its validity the grant's
//! start plus the TTL it set, so the checker blames them only for what their store
//! calls did, not for a holder that outlived its lease (that is `no-renewal`'s fault).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use distlock::{Client, Error, ErrorKind, Guard, LockOptions, Mutex, Result};
use distlock_check::history::{instant_ns, monotonic_ns};
use redis::aio::MultiplexedConnection;

use super::hand_off::{hand_on, take_or_adopt};
use super::record::Recorder;
use super::sql_scheme::{SqlLock, on_database};
use super::steps::{BETWEEN_GET_AND_DEL, BETWEEN_GET_AND_GETSET, BETWEEN_SETNX_AND_EXPIRE, Orders};
use crate::args::Scheme;
use crate::location::open_client;

/// How long a broken scheme waits between tries: a busy loop, as the documents' callers
/// retry.
const RETRY: Duration = Duration::from_millis(5);

/// The longest one Redis call of a broken scheme may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(2);

/// A grant of the lock, as the scheme gave it.
pub struct Hold {
    /// Its fencing token (0 for a scheme without tokens).
    pub token: u64,
    /// Until when its holder may act, on the shared clock; `u64::MAX` for a holder that
    /// never looks.
    pub safe_until: u64,
    /// distlock's guard (none for a broken Redis scheme).
    guard: Option<Guard>,
    /// Whether the holder looks at its guard: renewed, and checked before each unfenced
    /// write.
    pub looks: bool,
    /// The value the counter was updated to in the store, for a scheme whose critical
    /// section is that update (`version-cas`).
    pub counted: Option<u64>,
    /// What a broken scheme stored as the lock's value.
    value: String,
}

impl Hold {
    /// The hold of distlock's `guard`, renewed and looked at.
    fn looked_at(guard: Guard) -> Hold {
        Hold {
            token: guard.fencing_token(),
            safe_until: instant_ns(guard.safe_until()),
            guard: Some(guard),
            looks: true,
            counted: None,
            value: String::new(),
        }
    }

    /// distlock's guard of the grant.
    pub fn guard(&self) -> Option<&Guard> {
        self.guard.as_ref()
    }
}

/// One worker's lock.
pub enum Lock {
    /// One of the documents' database schemes.
    Sql(SqlLock),
    /// distlock's mutex; `renewed` unless the scheme never renews; `fair` for FIFO grants.
    Distlock {
        client: Client,
        mutex: Mutex,
        renewed: bool,
        fair: bool,
    },
    /// distlock's mutex, whose holders hand it on through `mailbox` (a file every worker
    /// reads) for `window`.
    HandOff {
        client: Client,
        mutex: Mutex,
        mailbox: std::path::PathBuf,
        window: Duration,
        fair: bool,
        me: u32,
    },
    /// A broken scheme's Redis key.
    Redis {
        scheme: Scheme,
        connection: MultiplexedConnection,
        key: String,
    },
}

/// Whether `scheme` is one of the Redis schemes from the documents (which need a single
/// Redis server), not distlock's.
pub fn on_plain_redis(scheme: Scheme) -> bool {
    matches!(
        scheme,
        Scheme::SetnxExpire | Scheme::GetsetTimestamp | Scheme::GetThenDel
    )
}

/// A Redis client for a broken scheme, from a `redis://` or `rediss://` URL (distlock's
/// own query options left out).
pub fn redis_client(url: &str) -> Result<redis::Client> {
    let bare = url.split_once('?').map_or(url, |(bare, _)| bare);
    let redis = super::link::one_server(url)
        .is_some_and(|parsed| matches!(parsed.scheme(), "redis" | "rediss"));
    if !redis {
        return Err(Error::invalid(
            "the Redis schemes of the documents run on one Redis server: give a redis:// or \
             rediss:// URL naming one host",
        ));
    }
    redis::Client::open(bare).map_err(|e| Error::invalid(format!("bad Redis URL: {e}")))
}

/// Closes a worker's distlock `client` as the worker ends: the cancel of a wait the end
/// of the run cut short, or the release of a grant it dropped, runs in the background,
/// and would be dropped with the runtime as the process exits, leaving a queue place or
/// a lock behind until it expires. A release that fails here (the store out of reach as
/// the run ends) leaves the lock to expire, which judges nothing: the run is over.
pub async fn close_client(client: &Client) {
    if let Err(err) = client.close().await {
        tracing::debug!(error = %err, "a worker's client did not close cleanly");
    }
}

/// Deletes a broken scheme's key `name` at `url` after a run: `getset-timestamp` never
/// gives its key a TTL, and a crash in `setnx-expire` leaves one without. Best effort: a
/// key left behind is no harm to the verdict.
pub async fn remove(url: &str, name: &str) {
    let Ok(client) = redis_client(url) else {
        return;
    };
    if let Ok(mut connection) = call(client.get_multiplexed_async_connection()).await {
        let _ = del(&mut connection, name).await;
    }
}

impl Lock {
    /// Ends the worker's use of the lock: distlock's client releases what it still holds
    /// and waits for its clean-ups (see [`close_client`]).
    pub async fn close(&self) {
        if let Lock::Distlock { client, .. } | Lock::HandOff { client, .. } = self {
            close_client(client).await;
        }
    }

    /// Connects the lock of `task` (an election's worker stands in `leading` instead, a
    /// job's runs in `jobs`).
    pub async fn open(task: &super::worker::Task) -> Result<Lock> {
        let (url, name, scheme, fair) = (&task.url, &task.name, task.scheme, task.fair);
        if on_database(scheme) {
            return Ok(Lock::Sql(SqlLock::open(url, name, scheme).await?));
        }
        if scheme == Scheme::HandOff {
            let client = open_client(url).await?;
            let mutex = client.mutex(name.as_str());
            return Ok(Lock::HandOff {
                client,
                mutex,
                mailbox: task.counter.with_file_name("offer"),
                window: task.ttl,
                fair,
                me: task.worker,
            });
        }
        if !on_plain_redis(scheme) {
            let client = open_client(url).await?;
            return Ok(Lock::Distlock {
                mutex: client.mutex(name),
                client,
                renewed: scheme != Scheme::NoRenewal,
                fair,
            });
        }
        let connection = call(redis_client(url)?.get_multiplexed_async_connection()).await?;
        Ok(Lock::Redis {
            scheme,
            connection,
            key: name.clone(),
        })
    }

    /// Waits for the lock until `until` (on the shared clock): a `Timeout` error if it did
    /// not come.
    pub async fn acquire(
        &mut self,
        (ttl, hold): (Duration, Duration),
        until: u64,
        orders: &Orders,
        recorder: &Recorder,
        me: u32,
    ) -> Result<Hold> {
        let (scheme, connection, key) = match self {
            Lock::Sql(lock) => {
                let grant = lock.acquire(hold, until, orders, recorder, me).await?;
                return Ok(Hold {
                    token: grant.token,
                    safe_until: u64::MAX,
                    guard: None,
                    looks: false,
                    counted: grant.counted,
                    value: String::new(),
                });
            }
            Lock::HandOff {
                client,
                mutex,
                mailbox,
                fair,
                me,
                ..
            } => {
                let options = LockOptions::new().ttl(ttl).fair(*fair);
                let guard = take_or_adopt(client, mutex, (mailbox, *me), &options, until).await?;
                return Ok(Hold::looked_at(guard));
            }
            Lock::Distlock {
                mutex,
                renewed,
                fair,
                ..
            } => {
                let options = waiting_until(until)
                    .ttl(ttl)
                    .auto_renew(*renewed)
                    .fair(*fair);
                let guard = mutex.lock_with(&options).await?;
                let safe_until = match renewed {
                    true => instant_ns(guard.safe_until()),
                    false => u64::MAX,
                };
                return Ok(Hold {
                    token: guard.fencing_token(),
                    safe_until,
                    guard: Some(guard),
                    looks: *renewed,
                    counted: None,
                    value: String::new(),
                });
            }
            Lock::Redis {
                scheme,
                connection,
                key,
            } => (*scheme, connection, key.as_str()),
        };
        let ttl_ms = ttl.as_millis() as u64;
        loop {
            let started = monotonic_ns();
            let granted = |value: String| Hold {
                token: 0,
                safe_until: started + ttl.as_nanos() as u64,
                guard: None,
                looks: false,
                counted: None,
                value,
            };
            match scheme {
                Scheme::SetnxExpire => {
                    let set: bool = call(
                        redis::cmd("SETNX")
                            .arg(key)
                            .arg("1")
                            .query_async(connection),
                    )
                    .await?;
                    if set {
                        orders.at(BETWEEN_SETNX_AND_EXPIRE, recorder, me);
                        let _: bool = call(
                            redis::cmd("PEXPIRE")
                                .arg(key)
                                .arg(ttl_ms)
                                .query_async(connection),
                        )
                        .await?;
                        return Ok(granted("1".into()));
                    }
                }
                Scheme::GetThenDel => {
                    let id = distlock::random_id();
                    let set: Option<String> = call(
                        redis::cmd("SET")
                            .arg(key)
                            .arg(&id)
                            .arg("NX")
                            .arg("PX")
                            .arg(ttl_ms)
                            .query_async(connection),
                    )
                    .await?;
                    if set.is_some() {
                        return Ok(granted(id));
                    }
                }
                Scheme::GetsetTimestamp => {
                    let expiry = (wall_ms() + ttl_ms).to_string();
                    let set: bool = call(
                        redis::cmd("SETNX")
                            .arg(key)
                            .arg(&expiry)
                            .query_async(connection),
                    )
                    .await?;
                    if set {
                        return Ok(granted(expiry));
                    }
                    let old =
                        time_in(call(redis::cmd("GET").arg(key).query_async(connection)).await?);
                    if old < wall_ms() {
                        orders.at(BETWEEN_GET_AND_GETSET, recorder, me);
                        let expiry = (wall_ms() + ttl_ms).to_string();
                        let current = time_in(
                            call(
                                redis::cmd("GETSET")
                                    .arg(key)
                                    .arg(&expiry)
                                    .query_async(connection),
                            )
                            .await?,
                        );
                        if current == old {
                            return Ok(granted(expiry));
                        }
                    }
                }
                Scheme::Distlock
                | Scheme::NoRenewal
                | Scheme::NoFencing
                | Scheme::SelectForUpdate
                | Scheme::VersionCas
                | Scheme::Election
                | Scheme::Job
                | Scheme::HandOff => {
                    unreachable!("the other schemes are served above, or in `leading`")
                }
            }
            if monotonic_ns() + RETRY.as_nanos() as u64 >= until {
                return Err(Error::new(ErrorKind::Timeout, "the run ended first"));
            }
            tokio::time::sleep(RETRY).await;
        }
    }

    /// Releases `hold`: `ok`, `fail` (the lock was not held any more, as far as the
    /// scheme can tell), `unknown`, or a hand-off's outcome.
    pub async fn release(
        &mut self,
        hold: Hold,
        orders: &Orders,
        recorder: &Recorder,
        me: u32,
    ) -> &'static str {
        let outcome = match self {
            Lock::Sql(lock) => lock.release().await,
            Lock::Distlock { .. } => match hold.guard {
                Some(guard) => guard.release().await.map(|()| true),
                None => Ok(true),
            },
            Lock::HandOff {
                mailbox, window, ..
            } => {
                let Some(guard) = hold.guard else {
                    return "fail";
                };
                return hand_on(guard, mailbox, *window, recorder, me).await;
            }
            Lock::Redis {
                scheme,
                connection,
                key,
            } => release_redis(*scheme, connection, key, &hold.value, orders, recorder, me).await,
        };
        match outcome {
            Ok(true) => "ok",
            Ok(false) => "fail",
            Err(err) if matches!(err.kind(), ErrorKind::NotHeld | ErrorKind::LockLost) => "fail",
            Err(_) => "unknown",
        }
    }
}

/// A broken scheme's release, as the documents write it.
async fn release_redis(
    scheme: Scheme,
    connection: &mut MultiplexedConnection,
    key: &str,
    value: &str,
    orders: &Orders,
    recorder: &Recorder,
    me: u32,
) -> Result<bool> {
    match scheme {
        Scheme::SetnxExpire => del(connection, key).await,
        Scheme::GetThenDel => {
            let current: Option<String> =
                call(redis::cmd("GET").arg(key).query_async(connection)).await?;
            if current.as_deref() != Some(value) {
                return Ok(false);
            }
            orders.at(BETWEEN_GET_AND_DEL, recorder, me);
            del(connection, key).await
        }
        Scheme::GetsetTimestamp => {
            let expiry = time_in(call(redis::cmd("GET").arg(key).query_async(connection)).await?);
            if expiry <= wall_ms() {
                return Ok(false);
            }
            orders.at(BETWEEN_GET_AND_DEL, recorder, me);
            del(connection, key).await
        }
        Scheme::Distlock
        | Scheme::NoRenewal
        | Scheme::NoFencing
        | Scheme::SelectForUpdate
        | Scheme::VersionCas
        | Scheme::Election
        | Scheme::Job
        | Scheme::HandOff => unreachable!("the other schemes release above"),
    }
}

/// Lock options that wait until `until`, on the shared clock.
pub(super) fn waiting_until(until: u64) -> LockOptions {
    LockOptions::new().wait(Duration::from_nanos(until.saturating_sub(monotonic_ns())))
}

/// `DEL key`: whether it deleted the key.
async fn del(connection: &mut MultiplexedConnection, key: &str) -> Result<bool> {
    let deleted: u64 = call(redis::cmd("DEL").arg(key).query_async(connection)).await?;
    Ok(deleted == 1)
}

/// The wall clock in Unix milliseconds, as the documents' `System.currentTimeMillis()`.
fn wall_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// A stored expiry time, as the documents parse it (`Long.parseLong(get(key, "0"))`; a
/// value that is no number counts as 0, long expired).
fn time_in(value: Option<String>) -> u64 {
    value.and_then(|v| v.parse().ok()).unwrap_or(0)
}

/// One Redis call, bounded in time; its failure is temporary (the worker tries again).
async fn call<T>(request: impl std::future::Future<Output = redis::RedisResult<T>>) -> Result<T> {
    match tokio::time::timeout(CALL_TIMEOUT, request).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(err)) => {
            Err(Error::new(ErrorKind::Unavailable, format!("Redis: {err}")).temporary())
        }
        Err(_) => Err(Error::new(
            ErrorKind::Unavailable,
            format!("Redis did not answer within {CALL_TIMEOUT:?}"),
        )
        .temporary()),
    }
}
