//! One worker process of `distlock torture`: acquire, a critical section that does a
//! non-atomic read-modify-write of the shared counter and a write to the fenced resource,
//! release; again until its deadline. Every step is recorded.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use distlock::{Client, Error, ErrorKind, Guard, Health, LockOptions, Result};
use distlock_cli::history::{What, instant_ns, monotonic_ns};
use serde::{Deserialize, Serialize};

use super::record::Recorder;
use super::resource::Writer;
use crate::args::Scheme;
use crate::worker_task;

/// What a worker is to do, handed to it on its standard input (so no secret of the URL is
/// on its command line; for the same reason it has no `Debug`).
#[derive(Clone, Serialize, Deserialize)]
pub struct Task {
    pub url: String,
    pub name: String,
    pub scheme: Scheme,
    pub worker: u32,
    pub ttl: Duration,
    pub hold: Duration,
    /// When to start asking for the lock, and when to stop, on the shared clock.
    pub start: u64,
    pub until: u64,
    pub history: PathBuf,
    pub counter: PathBuf,
    pub resource: SocketAddr,
}

/// Runs the task read from standard input.
pub async fn worker() -> Result<u8> {
    let task: Task = worker_task::receive()?;
    let recorder = Arc::new(Recorder::open(&task.history)?);
    let client = Client::connect(&task.url).await?;
    let mut resource = Writer::connect(task.resource).await?;
    let mutex = client.mutex(&task.name);
    let me = task.worker;
    tokio::time::sleep(Duration::from_nanos(
        task.start.saturating_sub(monotonic_ns()),
    ))
    .await;
    // A broken scheme takes one lease and never looks at it again.
    let renewed = task.scheme == Scheme::Distlock;
    while monotonic_ns() < task.until {
        let left = Duration::from_nanos(task.until.saturating_sub(monotonic_ns()));
        recorder.record(me, What::Acquire);
        let options = LockOptions::new()
            .ttl(task.ttl)
            .wait(left)
            .auto_renew(renewed);
        let guard = match mutex.lock_with(&options).await {
            Ok(guard) => guard,
            Err(err) => {
                recorder.record(
                    me,
                    What::AcquireFailed {
                        error: err.to_string(),
                    },
                );
                // A wait that timed out ends at the deadline; a store out of reach is
                // asked again; anything else (refused credentials, say) ends the worker.
                match err.kind() {
                    ErrorKind::Timeout => {}
                    _ if err.is_temporary() => {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                    _ => return Err(err),
                }
                continue;
            }
        };
        let token = guard.fencing_token();
        let safe_until = match renewed {
            true => instant_ns(guard.safe_until()),
            false => u64::MAX,
        };
        recorder.record(me, What::Granted { token, safe_until });
        match renewed {
            true => tokio::select! {
                done = critical_section(&task, Some(&guard), token, &recorder, &mut resource) => done?,
                never = watch(&guard, &recorder, me) => match never {},
            },
            false => critical_section(&task, None, token, &recorder, &mut resource).await?,
        }
        recorder.record(me, What::Release);
        let outcome = match guard.release().await {
            Ok(()) => "ok",
            Err(err) if matches!(err.kind(), ErrorKind::NotHeld | ErrorKind::LockLost) => "fail",
            Err(_) => "unknown",
        };
        recorder.record(
            me,
            What::Released {
                outcome: outcome.into(),
            },
        );
    }
    Ok(0)
}

/// Whether the guard may still be acted under: not lost, and within its validity. A
/// broken scheme (no guard to look at) always thinks so.
fn valid(guard: Option<&Guard>) -> bool {
    guard.is_none_or(|guard| guard.health() != Health::Lost && Instant::now() < guard.safe_until())
}

/// The critical section: a careful holder checks its guard before each unfenced write (a
/// pause between the check and the write can still make it stale: that is what fencing is
/// for), and writes to the fenced resource with its token.
async fn critical_section(
    task: &Task,
    guard: Option<&Guard>,
    token: u64,
    recorder: &Recorder,
    resource: &mut Writer,
) -> Result<()> {
    let me = task.worker;
    recorder.record(me, What::Enter);
    if !valid(guard) {
        recorder.record(me, What::Abandon);
        return Ok(());
    }
    let value = read_counter(&task.counter)?;
    recorder.record(me, What::CounterRead { value });
    tokio::time::sleep(task.hold / 2).await;
    if !valid(guard) {
        recorder.record(me, What::Abandon);
        return Ok(());
    }
    write_counter(&task.counter, value + 1)?;
    recorder.record(me, What::CounterWrite { value: value + 1 });
    tokio::time::sleep(task.hold / 2).await;
    // The resource records its verdict itself.
    resource.write(me, token).await?;
    recorder.record(me, What::Exit);
    Ok(())
}

/// Records the guard's health changes and renewals, looking every 2 ms, for as long as it
/// is polled.
async fn watch(guard: &Guard, recorder: &Recorder, me: u32) -> std::convert::Infallible {
    let (mut health, mut safe_until) = (guard.health(), guard.safe_until());
    loop {
        tokio::time::sleep(Duration::from_millis(2)).await;
        let now = guard.health();
        if now != health {
            health = now;
            let name = match now {
                Health::Held => "held",
                Health::AtRisk => "at-risk",
                Health::Lost => "lost",
            };
            recorder.record(
                me,
                What::Health {
                    health: name.into(),
                },
            );
        }
        let until = guard.safe_until();
        if until > safe_until {
            safe_until = until;
            recorder.record(
                me,
                What::Renewed {
                    safe_until: instant_ns(until),
                },
            );
        }
    }
}

/// The shared counter's value (0 before the first write).
fn read_counter(path: &Path) -> Result<u64> {
    match std::fs::read_to_string(path) {
        Ok(text) if text.trim().is_empty() => Ok(0),
        Ok(text) => text.trim().parse().map_err(|e| {
            Error::new(
                ErrorKind::Backend,
                format!("the counter holds {text:?}: {e}"),
            )
        }),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(0),
        Err(err) => Err(Error::new(
            ErrorKind::Backend,
            format!("cannot read the counter: {err}"),
        )),
    }
}

/// Writes the shared counter in place (truncate, then write: not atomic, on purpose).
fn write_counter(path: &Path, value: u64) -> Result<()> {
    std::fs::write(path, value.to_string())
        .map_err(|e| Error::new(ErrorKind::Backend, format!("cannot write the counter: {e}")))
}
