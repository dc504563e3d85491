//! One worker process of `distlock torture`: acquire, a critical section that does a
//! non-atomic read-modify-write of the shared counter and a write to the fenced resource,
//! release; again until its deadline. Every step is recorded.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use distlock::{Error, ErrorKind, Guard, Health, Held, Result};
use distlock_check::history::{What, instant_ns, monotonic_ns};
use serde::{Deserialize, Serialize};

use super::jobs::run_jobs;
use super::leading::lead;
use super::record::Recorder;
use super::resource::Writer;
use super::scheme::Lock;
use super::steps::{self, Orders};
use crate::args::Scheme;
use crate::worker_task;

/// What a worker is to do, handed to it on its standard input (so no secret of the URL is
/// on its command line; for the same reason it has no `Debug`).
#[derive(Clone, Serialize, Deserialize)]
pub struct Task {
    pub url: String,
    pub name: String,
    pub scheme: Scheme,
    pub fair: bool,
    pub worker: u32,
    pub ttl: Duration,
    pub hold: Duration,
    /// How long a job's run keeps the lock after its grant (`--scheme job`).
    pub at_least: Option<Duration>,
    /// How far apart a job's successful runs are spaced (`--once-per`).
    pub once_per: Option<Duration>,
    /// When to start asking for the lock, and when to stop, on the shared clock.
    pub start: u64,
    pub until: u64,
    pub history: PathBuf,
    pub counter: PathBuf,
    pub resource: SocketAddr,
    /// Whether a holder writes its token to the resource as its section begins too, so that
    /// a stale holder's last write comes after its successor's first (a RedLock's own run,
    /// whose master faults make stale holders).
    pub writes_first: bool,
}

/// Runs the task read from standard input, then obeys the step faults ordered there.
pub async fn worker() -> Result<u8> {
    let task: Task = worker_task::receive()?;
    let orders = Orders::listen();
    let recorder = Arc::new(Recorder::open(&task.history)?);
    let mut resource = Writer::connect(task.resource).await?;
    let me = task.worker;
    match task.scheme {
        Scheme::Election => {
            wait_for_start(&task).await;
            lead(&task, &orders, &recorder, &mut resource).await?;
            return Ok(0);
        }
        Scheme::Job => {
            wait_for_start(&task).await;
            run_jobs(&task, &orders, &recorder, &mut resource).await?;
            return Ok(0);
        }
        _ => {}
    }
    let mut lock = Lock::open(&task).await?;
    wait_for_start(&task).await;
    // The lock is closed however the loop ends (see `Lock::close`).
    let ran: Result<()> = async {
        while monotonic_ns() < task.until && !orders.stopped() {
            recorder.record(me, What::Acquire);
            let acquire = lock.acquire((task.ttl, task.hold), task.until, &orders, &recorder, me);
            // Withdrawn: distlock's acquire is cancel-safe. A broken scheme's may have left its
            // key, or a version-cas update, behind: the run removes its key or table at its end.
            let acquired = tokio::select! {
                acquired = acquire => acquired,
                () = orders.stop_ordered() => Err(interrupted()),
            };
            let hold = match acquired {
                Ok(hold) => hold,
                Err(err) => {
                    acquire_failed(&recorder, me, err).await?;
                    continue;
                }
            };
            // A scheme whose critical section is one atomic update in the store holds the
            // lock for the instant of that update, and no longer.
            let granted_at = monotonic_ns();
            let safe_until = match hold.counted {
                Some(_) => granted_at + 1,
                None => hold.safe_until,
            };
            let token = hold.token;
            recorder.record_at(me, granted_at, What::Granted { token, safe_until });
            if let Some(value) = hold.counted {
                recorder.record_at(me, granted_at, What::CounterWrite { value });
            }
            orders.at(steps::AFTER_GRANT, &recorder, me);
            let section = Section {
                task: &task,
                orders: &orders,
                recorder: &recorder,
            };
            match hold.guard().filter(|_| hold.looks) {
                Some(guard) => {
                    section
                        .watched(guard, token, hold.counted, &mut resource)
                        .await?
                }
                None => {
                    section
                        .run(None, token, hold.counted, &mut resource)
                        .await?
                }
            }
            section.released();
            let outcome = lock.release(hold, &orders, &recorder, me).await;
            recorder.record(
                me,
                What::Released {
                    outcome: outcome.into(),
                },
            );
        }
        Ok(())
    }
    .await;
    lock.close().await;
    ran.map(|()| 0)
}

/// Records an acquire that failed with `err`; `Ok` if the worker goes on (a wait that
/// timed out ends at the deadline; a store out of reach, or too few of a RedLock's masters
/// in reach, is asked again after a pause), the error if it ends: anything else (refused
/// credentials, a backend that calls a fault permanent when it is not) ends the worker,
/// and the run with it.
pub(super) async fn acquire_failed(recorder: &Recorder, me: u32, err: Error) -> Result<()> {
    let error = err.to_string();
    recorder.record(me, What::AcquireFailed { error });
    match err.kind() {
        ErrorKind::Timeout => Ok(()),
        _ if err.is_temporary() || err.kind() == ErrorKind::QuorumNotReached => {
            tokio::time::sleep(Duration::from_millis(50)).await;
            Ok(())
        }
        _ => Err(err),
    }
}

/// The error of an acquire the end of the run cut short.
pub(super) fn interrupted() -> Error {
    Error::new(ErrorKind::Timeout, "the run was interrupted")
}

/// Sleeps until the run's start.
async fn wait_for_start(task: &Task) {
    tokio::time::sleep(Duration::from_nanos(
        task.start.saturating_sub(monotonic_ns()),
    ))
    .await;
}

/// The identity a worker campaigns with.
pub(super) fn me_of(task: &Task) -> String {
    format!("worker-{}", task.worker)
}

/// What a careful holder looks at: its guard, or a job's view of it.
pub(super) trait Looked: Sync {
    fn health(&self) -> Health;
    fn safe_until(&self) -> Instant;
}

impl Looked for Guard {
    fn health(&self) -> Health {
        Guard::health(self)
    }

    fn safe_until(&self) -> Instant {
        Guard::safe_until(self)
    }
}

impl Looked for Held {
    fn health(&self) -> Health {
        Held::health(self)
    }

    fn safe_until(&self) -> Instant {
        Held::safe_until(self)
    }
}

/// Whether the guard may still be acted under: not lost, and within its validity. A
/// holder that does not look (no guard to look at) always thinks so.
fn valid(guard: Option<&dyn Looked>) -> bool {
    guard.is_none_or(|guard| guard.health() != Health::Lost && Instant::now() < guard.safe_until())
}

/// Why a body a worker ran under distlock's control (a term's, a job's) ended early.
pub(super) enum Stop {
    /// The store's answer: a campaign that timed out or was refused, a grant lost.
    Store(Error),
    /// The section failed (the resource out of reach): the worker ends.
    Section(Error),
}

impl From<Error> for Stop {
    fn from(err: Error) -> Stop {
        Stop::Store(err)
    }
}

/// A worker's critical section, and what it answers to.
pub(super) struct Section<'a> {
    pub(super) task: &'a Task,
    pub(super) orders: &'a Orders,
    pub(super) recorder: &'a Recorder,
}

impl Section<'_> {
    /// The critical section: a careful holder checks its guard before each unfenced write
    /// (a pause between the check and the write can still make it stale: that is what
    /// fencing is for), and writes to the fenced resource with its `token`. A hold whose
    /// counter update the store made (`counted`) only writes to the resource.
    pub(super) async fn run(
        &self,
        guard: Option<&dyn Looked>,
        token: u64,
        counted: Option<u64>,
        resource: &mut Writer,
    ) -> Result<()> {
        let (recorder, me) = (self.recorder, self.task.worker);
        recorder.record(me, What::Enter);
        if self.task.scheme == Scheme::Election || self.task.writes_first {
            // A leader (a holder) makes its term (its token) known to the resource as its
            // term (its section) begins: from then on an earlier one's late write is
            // refused.
            resource.write(me, token).await?;
        }
        if counted.is_none() && !self.count(guard).await? {
            recorder.record(me, What::Abandon);
            return Ok(());
        }
        self.orders.at(steps::BEFORE_FENCED_WRITE, recorder, me);
        // The resource records its verdict itself.
        resource.write(me, token).await?;
        recorder.record(me, What::Exit);
        Ok(())
    }

    /// The section under `looked`, watched (its health and renewals recorded) while it
    /// runs.
    pub(super) async fn watched(
        &self,
        looked: &dyn Looked,
        token: u64,
        counted: Option<u64>,
        resource: &mut Writer,
    ) -> Result<()> {
        tokio::select! {
            done = self.run(Some(looked), token, counted, resource) => done,
            never = watch(looked, self.recorder, self.task.worker) => match never {},
        }
    }

    /// Records that the worker acts under its grant no more, and reaches the step before
    /// its release.
    pub(super) fn released(&self) {
        let (recorder, me) = (self.recorder, self.task.worker);
        recorder.record(me, What::Release);
        self.orders.at(steps::BEFORE_RELEASE, recorder, me);
    }

    /// The counter's read-modify-write, the guard checked before each step: false if it
    /// was found invalid, and the section is to be abandoned.
    async fn count(&self, guard: Option<&dyn Looked>) -> Result<bool> {
        let (task, recorder, me) = (self.task, self.recorder, self.task.worker);
        if !valid(guard) {
            return Ok(false);
        }
        let value = read_counter(&task.counter)?;
        recorder.record(me, What::CounterRead { value });
        tokio::time::sleep(task.hold / 2).await;
        if !valid(guard) {
            return Ok(false);
        }
        write_counter(&task.counter, value + 1)?;
        recorder.record(me, What::CounterWrite { value: value + 1 });
        tokio::time::sleep(task.hold / 2).await;
        Ok(true)
    }
}

/// Records the guard's health changes and renewals, looking every 2 ms, for as long as it
/// is polled.
pub(super) async fn watch(
    guard: &dyn Looked,
    recorder: &Recorder,
    me: u32,
) -> std::convert::Infallible {
    let (mut health, mut safe_until) = (guard.health(), guard.safe_until());
    loop {
        tokio::time::sleep(Duration::from_millis(2)).await;
        let now = guard.health();
        if now != health {
            health = now;
            let name = now.as_str();
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
