//! Jobs: a body that runs on one replica at a time, with a floor between two starts
//! (`at_least`) and a cap on how long it runs (`at_most`).

mod held_until;
mod record;

use std::time::{Duration, SystemTime};

use tokio::time::Instant;

use crate::backend::HolderInfo;
use crate::backend::grant_of;
use crate::client::Client;
use crate::error::{Error, ErrorKind, Result};
use crate::guard::Guard;
use crate::options::LockOptions;
use crate::owner::at_unix_ms;
use crate::telemetry;
use crate::template::{Ended, Held, conclude, release_after, run_body};

pub use held_until::HeldUntil;
use record::{Before, Write};
pub use record::{JobStatus, RunState};

/// The shortest `at_least`, `at_most` or `once_per` a job takes.
///
/// # Examples
///
/// ```
/// assert_eq!(distlock_core::MIN_JOB_SPAN, std::time::Duration::from_millis(1));
/// ```
pub const MIN_JOB_SPAN: Duration = Duration::from_millis(1);
/// The longest `at_least`, `at_most` or `once_per` a job takes: ten years.
///
/// # Examples
///
/// ```
/// assert_eq!(distlock_core::MAX_JOB_SPAN.as_secs() / (365 * 86_400), 10);
/// ```
pub const MAX_JOB_SPAN: Duration = Duration::from_secs(315_576_000);

/// How many times the end of a run's record is written before the run gives up on it (each
/// try while the grant stands).
const RECORD_TRIES: usize = 4;

/// What one [`Job::run`] did.
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> distlock_core::Result<()> {
/// use distlock_core::JobOutcome;
/// # let client = distlock_core::Client::connect("memory://").await?;
/// let _other_replica = client.mutex("jobs/invoices").lock().await?;
/// let outcome = client
///     .job("jobs/invoices")
///     .run(async |_| Ok::<_, distlock_core::Error>(()))
///     .await?;
/// match outcome {
///     JobOutcome::Ran(()) => unreachable!("the other replica holds it"),
///     JobOutcome::Busy { holder, until } => {
///         assert!(holder.is_some());
///         assert!(until.is_some());
///     }
///     _ => unreachable!(),
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum JobOutcome<T> {
    /// The body ran; its output.
    Ran(T),
    /// Another run holds the job (or held it less than its `at_least` ago): the body did
    /// not run.
    Busy {
        /// The grant that holds it, as the store shows it (`None` if it ended meanwhile).
        holder: Option<HolderInfo>,
        /// When that grant's lease ends, on this process's clock, from what the store said
        /// is left of it (`None` for a grant that lives by its holder's session).
        until: Option<SystemTime>,
    },
    /// The last successful run started less than `once_per` ago: the body did not run.
    TooSoon {
        /// When it started, on the store's clock (`None` where the store has none).
        last_success: Option<SystemTime>,
        /// When the job may run again, on this process's clock, from what the store
        /// measured is left of the window.
        next_at: SystemTime,
    },
}

impl<T> JobOutcome<T> {
    /// The body's output, if it ran.
    ///
    /// # Examples
    ///
    /// ```
    /// use distlock_core::JobOutcome;
    /// assert_eq!(JobOutcome::Ran(3).ran(), Some(3));
    /// ```
    pub fn ran(self) -> Option<T> {
        match self {
            JobOutcome::Ran(out) => Some(out),
            _ => None,
        }
    }

    /// The outcome's label in metrics and logs: `ran`, `busy` or `too_soon`.
    ///
    /// # Examples
    ///
    /// ```
    /// use distlock_core::JobOutcome;
    /// assert_eq!(JobOutcome::Ran(()).as_str(), "ran");
    /// ```
    pub fn as_str(&self) -> &'static str {
        match self {
            JobOutcome::Ran(_) => "ran",
            JobOutcome::Busy { .. } => "busy",
            JobOutcome::TooSoon { .. } => "too_soon",
        }
    }
}

/// A job: a body that runs under mutex `name` on one replica at a time, and skips (as
/// [`JobOutcome::Busy`]) when another runs it. Made by [`Client::job`].
///
/// * [`at_least`](Job::at_least): the lock stays taken until the grant plus this long, so
///   a replica whose clock or schedule is a little behind does not start the job again
///   right after a quick run. Where grants outlive their clients (Redis, RedLock, SQLite,
///   PostgreSQL and MySQL in lease mode), the store keeps it (one last renewal, measured
///   by the store) and the process may end; where they live by a session or connection,
///   and for an `at_least` past [`MAX_TTL`](crate::MAX_TTL), a task of the client holds it,
///   and the process must live until it ends (see [`Guard::release_at`](crate::Guard::release_at)).
/// * [`at_most`](Job::at_most): a hard cap: the body is cancelled (at its next await) once
///   it has run this long and the lock is released after, never before. The lease is
///   renewed while the body runs, however long that is.
/// * [`once_per`](Job::once_per): skips the body ([`JobOutcome::TooSoon`]) when the last
///   successful run started less than this long ago, by the run record the store keeps
///   with its own clock ([`Client::job_status`] reads it).
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> distlock_core::Result<()> {
/// use std::time::Duration;
/// use distlock_core::JobOutcome;
/// # let client = distlock_core::Client::connect("memory://").await?;
/// let job = client
///     .job("jobs/invoices")
///     .at_least(Duration::from_secs(60))
///     .at_most(Duration::from_secs(600));
/// let first = job.run(async |held| Ok::<_, distlock_core::Error>(held.fencing_token())).await?;
/// assert!(matches!(first, JobOutcome::Ran(token) if token > 0));
/// // A minute has not passed: a second replica finds it busy.
/// let second = job.run(async |_| Ok::<_, distlock_core::Error>(0)).await?;
/// assert_eq!(second.as_str(), "busy");
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Job {
    client: Client,
    name: String,
    options: LockOptions,
    at_least: Option<Duration>,
    at_most: Option<Duration>,
    once_per: Option<Duration>,
    wait: Option<Duration>,
}

impl Job {
    pub(crate) fn new(client: Client, name: String) -> Job {
        let options = client.inner().defaults.clone();
        Job {
            client,
            name,
            options,
            at_least: None,
            at_most: None,
            once_per: None,
            wait: None,
        }
    }

    /// Keeps the lock taken until the grant plus `span` (1 ms to ten years, at most
    /// [`at_most`](Self::at_most)), however quickly the body ends.
    ///
    /// # Examples
    ///
    /// See [`Job`].
    pub fn at_least(mut self, span: Duration) -> Self {
        self.at_least = Some(span);
        self
    }

    /// Cancels the body once it has run `span` (1 ms to ten years); the run then fails
    /// with [`ErrorKind::Timeout`].
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> distlock_core::Result<()> {
    /// use std::time::Duration;
    /// # let client = distlock_core::Client::connect("memory://").await?;
    /// let stuck = client
    ///     .job("jobs/stuck")
    ///     .at_most(Duration::from_millis(20))
    ///     .run(async |_| {
    ///         tokio::time::sleep(Duration::from_secs(60)).await;
    ///         Ok::<_, distlock_core::Error>(())
    ///     })
    ///     .await;
    /// assert_eq!(stuck.unwrap_err().kind(), distlock_core::ErrorKind::Timeout);
    /// # Ok(()) }
    /// ```
    pub fn at_most(mut self, span: Duration) -> Self {
        self.at_most = Some(span);
        self
    }

    /// Skips the body ([`JobOutcome::TooSoon`]) when the last run that succeeded started
    /// less than `span` ago (1 ms to ten years), by the run record the store keeps beside
    /// the lock, measured on the store's clock: a replica whose clock is off, or that
    /// restarted, does not run the job twice in the window. Needs a backend that keeps
    /// run records (every one of distlock's; a backend that keeps none is refused with
    /// `Unsupported`). The window is the one the last success set with its own `once_per`
    /// (a success without `once_per` sets none); a run that failed leaves it as it was.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> distlock_core::Result<()> {
    /// use std::time::Duration;
    /// use distlock_core::JobOutcome;
    /// # let client = distlock_core::Client::connect("memory://").await?;
    /// let hourly = client.job("jobs/hourly").once_per(Duration::from_secs(3600));
    /// assert_eq!(hourly.run(async |_| Ok::<_, distlock_core::Error>(())).await?.as_str(), "ran");
    /// let again = hourly.run(async |_| Ok::<_, distlock_core::Error>(())).await?;
    /// assert!(matches!(again, JobOutcome::TooSoon { last_success: Some(_), .. }));
    /// # Ok(()) }
    /// ```
    pub fn once_per(mut self, span: Duration) -> Self {
        self.once_per = Some(span);
        self
    }

    /// Waits up to `wait` for a run elsewhere to end before saying [`JobOutcome::Busy`]
    /// (by default a job does not wait).
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> distlock_core::Result<()> {
    /// use std::time::Duration;
    /// # let client = distlock_core::Client::connect("memory://").await?;
    /// let job = client.job("jobs/a").wait(Duration::from_secs(5));
    /// assert_eq!(job.run(async |_| Ok::<_, distlock_core::Error>(1)).await?.ran(), Some(1));
    /// # Ok(()) }
    /// ```
    pub fn wait(mut self, wait: Duration) -> Self {
        self.wait = Some(wait);
        self
    }

    /// The lock options the job's grant is taken with (lease length, renewal, fairness,
    /// what a loss does to the body); how long it waits is [`wait`](Self::wait)'s, and a
    /// job is never reentrant.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> distlock_core::Result<()> {
    /// use std::time::Duration;
    /// use distlock_core::LockOptions;
    /// # let client = distlock_core::Client::connect("memory://").await?;
    /// let job = client
    ///     .job("jobs/a")
    ///     .with_options(LockOptions::new().ttl(Duration::from_secs(10)));
    /// # Ok(()) }
    /// ```
    pub fn with_options(mut self, options: LockOptions) -> Self {
        self.options = options;
        self
    }

    /// The job's name.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> distlock_core::Result<()> {
    /// # let client = distlock_core::Client::connect("memory://").await?;
    /// assert_eq!(client.job("jobs/a").name(), "jobs/a");
    /// # Ok(()) }
    /// ```
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Runs `f` if no other run holds the job: [`JobOutcome::Ran`] with its output, or
    /// [`JobOutcome::Busy`] (or [`TooSoon`](JobOutcome::TooSoon)) without running it. The
    /// lease is renewed while `f` runs; `f` is cancelled if the grant is lost (`LockLost`)
    /// or `at_most` passes (`Timeout`), and the grant is released once `f` has ended, never
    /// before, and no sooner than `at_least` after it was granted. Where the backend keeps
    /// run records, the run's is written under its grant as it starts and as it ends
    /// ([`Client::job_status`]).
    ///
    /// # Cancel safety
    ///
    /// Dropping the future drops `f` and releases the grant in the background (without
    /// keeping it for `at_least`: a run that did not finish is not a run).
    ///
    /// # Examples
    ///
    /// See [`Job`].
    pub async fn run<T, E, F>(&self, f: F) -> std::result::Result<JobOutcome<T>, E>
    where
        F: AsyncFnOnce(&Held) -> std::result::Result<T, E>,
        E: From<Error>,
    {
        self.check()?;
        let Some(guard) = self.take().await? else {
            telemetry::job_run(self.client.scheme(), "busy", None);
            return Ok(self.busy().await?);
        };
        self.run_holding(guard, f).await
    }

    /// Runs `f` as [`run`](Self::run) does, under `guard`, the grant of this job's mutex
    /// that the caller took itself (with its own wait, or its own handling of signals
    /// while it waited, as `distlock run` does): the run record, `once_per`, `at_most` and
    /// `at_least` as for `run`, and the grant released (or kept) at the end. A guard of
    /// another name, or a shared one, is refused with `InvalidInput` (and released).
    ///
    /// # Cancel safety
    ///
    /// As [`run`](Self::run).
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> distlock_core::Result<()> {
    /// # let client = distlock_core::Client::connect("memory://").await?;
    /// let guard = client.mutex("jobs/a").lock().await?;
    /// let job = client.job("jobs/a");
    /// let ran = job.run_holding(guard, async |held| Ok::<_, distlock_core::Error>(held.fencing_token())).await?;
    /// assert!(ran.ran().is_some());
    /// # Ok(()) }
    /// ```
    pub async fn run_holding<T, E, F>(
        &self,
        guard: Guard,
        f: F,
    ) -> std::result::Result<JobOutcome<T>, E>
    where
        F: AsyncFnOnce(&Held) -> std::result::Result<T, E>,
        E: From<Error>,
    {
        let granted_at = Instant::now();
        if let Err(err) = self.check().and_then(|()| self.check_guard(&guard)) {
            release_after(guard).await;
            return Err(err.into());
        }
        let scheme = self.client.scheme();
        let backend = self.client.inner().backend.as_ref();
        let before = match self.before(backend).await {
            Ok(before) => before,
            Err(err) => {
                release_after(guard).await;
                return Err(err.into());
            }
        };
        if let Some(quiet_for) = before.as_ref().and_then(|b| b.quiet_for)
            && self.once_per.is_some()
        {
            release_after(guard).await;
            telemetry::job_run(scheme, "too_soon", None);
            return Ok(JobOutcome::TooSoon {
                last_success: before.and_then(|b| b.last_success_ms).map(at_unix_ms),
                next_at: SystemTime::now() + quiet_for,
            });
        }
        let owner = guard.owner().as_str().to_owned();
        let record = Write {
            backend,
            grant: grant_of(&guard),
            fencing_token: guard.fencing_token(),
            owner: &owner,
        };
        let last_success = before.as_ref().and_then(|b| b.last_success_ms);
        let mut before = before;
        let mut started_at = granted_at;
        let started_ms = match &before {
            None => None,
            Some(_) => match record
                .write(RunState::Running, None, last_success, None)
                .await
            {
                Ok(at) => {
                    // The store stamped the start before its answer came: a window counted
                    // from here ends no sooner than the stamp plus its span.
                    started_at = Instant::now();
                    at
                }
                Err(err) if self.once_per.is_none() && err.kind() != ErrorKind::NotHeld => {
                    tracing::warn!(job = %self.name, error = %err, "cannot write the job's run record; it runs without one");
                    before = None;
                    None
                }
                Err(err) => {
                    release_after(guard).await;
                    return Err(err.into());
                }
            },
        };
        let held = Held::of(&guard);
        let body = async {
            match self.at_most {
                None => f(&held).await,
                Some(cap) => match tokio::time::timeout(cap, f(&held)).await {
                    Ok(out) => out,
                    Err(_) => Err(E::from(Error::new(
                        ErrorKind::Timeout,
                        format!(
                            "job `{}` ran past its at_most of {} and was stopped",
                            self.name,
                            humantime::format_duration(cap)
                        ),
                    ))),
                },
            }
        };
        let finished = run_body(
            std::slice::from_ref(&held),
            self.options.on_lost_value(),
            body,
        )
        .await;
        let ran = granted_at.elapsed();
        let succeeded = matches!(finished, Ended::Done(Ok(Ok(_))));
        if before.is_some() {
            let (state, last, quiet) = match (succeeded, self.once_per) {
                (true, once_per) => (
                    RunState::Succeeded,
                    started_ms,
                    once_per
                        .map(|span| span.saturating_sub(started_at.elapsed()))
                        .filter(|window| !window.is_zero()),
                ),
                (false, _) => (RunState::Failed, last_success, None),
            };
            let mut pause = Duration::from_millis(50);
            for tries_left in (0..RECORD_TRIES).rev() {
                let written = record.write(state, started_ms, last, quiet).await;
                let Err(err) = written else { break };
                if tries_left == 0 || err.kind() == ErrorKind::NotHeld || !held.health().is_valid()
                {
                    tracing::warn!(job = %self.name, error = %err, "the run's record was not written; the store keeps the one from its start, and no once_per window");
                    break;
                }
                tokio::time::sleep(pause).await;
                pause *= 2;
            }
        }
        match self.at_least {
            Some(span) => self.keep(guard, granted_at + span).await,
            None => release_after(guard).await,
        }
        let outcome = match &finished {
            Ended::Done(Ok(Ok(_))) => "ran",
            Ended::Done(Ok(Err(_))) => "failed",
            Ended::Done(Err(_)) => "panicked",
            Ended::Lost => "lost",
            Ended::Closed => "closed",
        };
        telemetry::job_run(scheme, outcome, Some(ran));
        conclude(finished, std::slice::from_ref(&held)).map(JobOutcome::Ran)
    }

    /// Takes the job's lock: at once, or within [`wait`](Self::wait); `None` when busy.
    async fn take(&self) -> Result<Option<Guard>> {
        let mutex = self
            .client
            .mutex(self.name.clone())
            .with_options(self.options.clone());
        match self.wait {
            None => mutex.try_lock().await,
            Some(wait) => match mutex.lock_with(&self.options.clone().wait(wait)).await {
                Ok(guard) => Ok(Some(guard)),
                Err(err) if err.kind() == ErrorKind::Timeout => Ok(None),
                Err(err) => Err(err),
            },
        }
    }

    /// The run record before this run: `None` where the backend keeps none, which a job
    /// with `once_per` refuses.
    async fn before(&self, backend: &dyn crate::backend::Backend) -> Result<Option<Before>> {
        let before = match Before::read(backend, &self.name).await {
            Ok(before) => before,
            // Without once_per the record only informs: the job runs without it.
            Err(err) if self.once_per.is_none() && err.kind() != ErrorKind::NotHeld => {
                tracing::warn!(job = %self.name, error = %err, "cannot read the job's run record; it runs without one");
                return Ok(None);
            }
            Err(err) => return Err(err),
        };
        if before.is_none() && self.once_per.is_some() {
            return Err(Error::new(
                ErrorKind::Unsupported,
                format!(
                    "once_per needs a run record kept by the store with its own clock, and the {} backend keeps none",
                    self.client.scheme()
                ),
            ));
        }
        Ok(before)
    }

    /// Keeps `guard`'s grant until `at` and lets it go; a failure is logged (the grant
    /// ends with its lease or session).
    async fn keep(&self, guard: Guard, at: Instant) {
        match guard.release_at(at.into_std()).await {
            Ok(_kept) => {}
            Err(err) if matches!(err.kind(), ErrorKind::NotHeld | ErrorKind::LockLost) => {}
            Err(err) => {
                tracing::warn!(job = %self.name, error = %err, "keeping the job's lock for at_least failed; it ends with its lease or session");
            }
        }
    }

    /// The busy outcome: who holds the job, as the store shows it.
    async fn busy<T>(&self) -> Result<JobOutcome<T>> {
        let states = self.client.status(Some(&self.name)).await?;
        let holder = states
            .into_iter()
            .find(|state| state.name == self.name)
            .and_then(|state| state.holders.into_iter().next());
        let until = holder
            .as_ref()
            .and_then(|h| h.remaining_ms)
            .map(|ms| SystemTime::now() + Duration::from_millis(ms));
        Ok(JobOutcome::Busy { holder, until })
    }

    /// Refuses a guard of another name, or a shared one.
    fn check_guard(&self, guard: &Guard) -> Result<()> {
        if guard.name() != self.name || !guard.kind().is_exclusive() {
            return Err(Error::invalid(format!(
                "job `{}` runs under the exclusive grant of its own name, not a {} grant of `{}`",
                self.name,
                guard.kind().as_str(),
                guard.name()
            )));
        }
        Ok(())
    }

    /// Refuses spans outside their bounds, `at_least` above `at_most`, and a reentrant
    /// owner.
    fn check(&self) -> Result<()> {
        let spans = [
            ("at_least", self.at_least),
            ("at_most", self.at_most),
            ("once_per", self.once_per),
        ];
        for (what, span) in spans {
            if let Some(span) = span {
                validate_job_span(what, span)?;
            }
        }
        if let (Some(least), Some(most)) = (self.at_least, self.at_most)
            && least > most
        {
            return Err(Error::invalid(format!(
                "at_least {} is above at_most {}: the lock would outlast the cap on the run",
                shown(least),
                shown(most)
            )));
        }
        if let (Some(least), Some(max_hold)) = (self.at_least, self.options.max_hold)
            && least > max_hold
        {
            return Err(Error::invalid(format!(
                "at_least {} is above the options' max_hold {}: the grant would end first",
                shown(least),
                shown(max_hold)
            )));
        }
        if self.options.reentrant.is_some() {
            return Err(Error::invalid(
                "a job is not reentrant: give it options without an owner",
            ));
        }
        self.options.validate()
    }
}

/// Refuses a job's span (`at_least`, `at_most`, `once_per`, called `what` in the error)
/// outside [`MIN_JOB_SPAN`]..=[`MAX_JOB_SPAN`], naming the bounds.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use distlock_core::validate_job_span;
/// assert!(validate_job_span("--at-least", Duration::from_secs(60)).is_ok());
/// let err = validate_job_span("--at-least", Duration::ZERO).unwrap_err();
/// assert!(err.to_string().contains("--at-least 0s is not from 1ms to 10years"));
/// ```
pub fn validate_job_span(what: &str, span: Duration) -> Result<()> {
    match (MIN_JOB_SPAN..=MAX_JOB_SPAN).contains(&span) {
        true => Ok(()),
        false => Err(Error::invalid(format!(
            "{what} {} is not from {} to {}",
            shown(span),
            shown(MIN_JOB_SPAN),
            shown(MAX_JOB_SPAN)
        ))),
    }
}

/// The run record of job `name` in `backend`.
pub(crate) async fn job_status(
    backend: &dyn crate::backend::Backend,
    name: &str,
) -> Result<Option<JobStatus>> {
    match backend.read_note(name).await? {
        Some(note) => record::status(name, note).map(Some),
        None => Ok(None),
    }
}

/// `span` as a person writes it ("1ms", "10years", "0s").
fn shown(span: Duration) -> String {
    match span.is_zero() {
        true => "0s".to_owned(),
        false => humantime::format_duration(span).to_string(),
    }
}
