//! `distlock run`: hold a lock while a command runs.

mod elect;
mod supervise;
mod terminal;

use std::time::{Duration, Instant};

use distlock::{ErrorKind, Guard, JobOutcome, LockOptions, OnLost, Result};

use crate::args::RunArgs;
use crate::deadline::{retry_until, unanswered, within};
use crate::exit;
use crate::location::connect_shared;
use crate::output::errln;
use crate::signals::{self, Caught};

pub use elect::elect;

pub async fn run(url: &Option<String>, args: RunArgs) -> Result<u8> {
    let started = Instant::now();
    // What is wrong whatever the store (a name no backend takes, a TTL too short or too
    // long) is refused before a store that may be down or hanging is asked.
    distlock::validate_name(&args.name)?;
    let scheme = scheme_of(url);
    check_ttl(args.ttl, scheme, shortest_ttl(scheme))?;
    check_kind(&args, scheme)?;
    // The release after the command is bounded by the operation timeout: once the command
    // has ended, a store that is gone only leaves the lease to expire, and must not keep the
    // caller (a shell, a supervisor) waiting.
    let op_timeout = (args.ttl / 3).min(RELEASE_WITHIN);
    let mut options = LockOptions::new().ttl(args.ttl).op_timeout(op_timeout);
    if let Some(wait) = args.wait {
        options = options.wait(wait);
    }
    // --max-hold is the supervisor's to keep: it stops the command at the limit, and the
    // lock, renewed meanwhile, is released once the command has ended. Given to the
    // library, it would let a session grant go while the command still ran.
    if args.max_hold.is_some_and(|max_hold| max_hold.is_zero()) {
        return Err(distlock::Error::invalid(
            "--max-hold must be longer than zero",
        ));
    }
    check_job_spans(&args)?;
    options = options.fair(args.fair);
    options.validate()?;
    let what = Lock::of(&args)?;
    // Caught from before connecting until the command ends: none is lost in between, and
    // one that would end a run ends a connect that is tried again within the wait too.
    let mut caught = Caught::listen(&signals::forwarded());
    let connecting = connect_within_the_wait(url, &args, op_timeout, started);
    let (url, client) = match until_signalled(connecting, None, &mut caught).await {
        Ok(Ok(Some(connected))) => connected,
        Ok(Ok(None)) => return Ok(exit::BUSY),
        Ok(Err(err)) => return Err(err),
        Err(number) => return Ok(signals::exit_code(number)),
    };
    if let Some(wait) = args.wait {
        // What connecting took comes off the wait; the acquire gets what is left.
        options = options.wait(wait.saturating_sub(started.elapsed()).max(LEAST_WAIT));
    }
    let attempt = what.acquire(&client, &args.name, &options, args.no_wait);
    let acquired = match until_signalled(attempt, Some(&client), &mut caught).await {
        Ok(acquired) => acquired,
        Err(number) => return Ok(withdrawn(&client, number).await),
    };
    let guard = match acquired {
        Ok(Some(guard)) => guard,
        Ok(None) => {
            let place = client.place_of(&args.name);
            let place = place.map_or_else(String::new, |place| format!(" ({place})"));
            errln!("distlock: lock `{}`{place} is busy", args.name);
            return Ok(exit::BUSY);
        }
        Err(err) if err.kind() == ErrorKind::Timeout => {
            // The acquire had what connecting left of the wait: the wait is what to tell.
            let wait = args.wait.unwrap_or_default();
            errln!(
                "distlock: lock `{}` was not granted within --wait {}",
                args.name,
                humantime::format_duration(wait)
            );
            // The request is withdrawn if the store answers at once; one that hangs does
            // not hold the run past its wait, and the request expires on its own.
            client.settle(WITHDRAW_AFTER_TIMEOUT).await;
            return Ok(exit::BUSY);
        }
        Err(err) => {
            // As above: a request the failure left queued is withdrawn if the store answers.
            client.settle(WITHDRAW_AFTER_TIMEOUT).await;
            return Err(err);
        }
    };
    if args.at_least.is_some() || args.once_per.is_some() {
        return run_as_job(&args, (&url, &client), guard, options, &mut caught).await;
    }
    let code = supervise::supervise(
        &supervise::Supervised::of_run(&args),
        (&url, &client),
        guard.fencing_token(),
        guard.lost(),
        &mut caught,
    )
    .await;
    match guard.release().await {
        Ok(()) => {}
        Err(err) if err.kind() == ErrorKind::NotHeld => {
            if code != exit::LOST {
                errln!("distlock: warning: the lock was already gone at release: {err}");
            }
        }
        Err(err) => errln!("distlock: warning: release failed (the lease will expire): {err}"),
    }
    // A RedLock release's calls to its slower masters end before distlock does.
    client.settle(RELEASE_WITHIN).await;
    Ok(code)
}

/// Runs the command as a job under `guard`: skipped (exit 0, with a message) when it
/// succeeded less than `--once-per` ago, by the run record the store keeps; its lock kept
/// for `--at-least` after the grant (by distlock, until then, where the store cannot keep
/// it once distlock exits).
async fn run_as_job(
    args: &RunArgs,
    (url, client): (&str, &distlock::Client),
    guard: Guard,
    options: LockOptions,
    caught: &mut Caught,
) -> Result<u8> {
    let granted = Instant::now();
    // A lost grant is the command's supervisor's to act on: it stops the command.
    let mut job = client
        .job(&args.name)
        .with_options(options.on_lost(OnLost::Signal));
    if let Some(at_least) = args.at_least {
        job = job.at_least(at_least);
    }
    if let Some(once_per) = args.once_per {
        job = job.once_per(once_per);
    }
    let supervised = async |held: &distlock::Held| {
        let lost = held.lost();
        let command = supervise::Supervised::of_run(args);
        let code =
            supervise::supervise(&command, (url, client), held.fencing_token(), lost, caught).await;
        match code {
            0 => Ok(code),
            _ => Err(NotDone::Failed(code)),
        }
    };
    let outcome = job.run_holding(guard, supervised).await;
    let code = match outcome {
        Ok(JobOutcome::Ran(code)) => code,
        Ok(JobOutcome::TooSoon {
            last_success,
            next_at,
        }) => {
            let shown =
                |at: std::time::SystemTime| humantime::format_rfc3339_seconds(at).to_string();
            let last = last_success.map_or_else(String::new, |at| format!(" (at {})", shown(at)));
            errln!(
                "distlock: job `{}` succeeded less than --once-per {} ago{last}; it runs again from {}",
                args.name,
                humantime::format_duration(args.once_per.unwrap_or_default()),
                shown(next_at)
            );
            return Ok(0);
        }
        // A job run under the grant it holds is never busy; an outcome a later distlock
        // adds counts as not run.
        Ok(_) => exit::BUSY,
        Err(NotDone::Failed(code)) => code,
        Err(NotDone::Lock(err)) => return Err(err),
    };
    if let Some(at_least) = args.at_least
        && (!client.capabilities().detachable || at_least > distlock::MAX_TTL)
    {
        // The grant is held by a task of this client (longer than a lease can be, it is
        // handed to the store only at the end): distlock stays until it ends.
        let until = tokio::time::sleep_until((granted + at_least).into());
        let stopped = until_signalled(until, None, caught).await.is_err();
        // The task that holds the grant may wake after this (it counted from a later
        // instant): the client releases the grant, and waits for the release, before
        // distlock exits, so the lock is not left to its lease or session.
        if let Err(err) = client.close().await {
            errln!(
                "distlock: the lock's release failed ({err}); it is freed when its lease runs out"
            );
        }
        if stopped {
            errln!(
                "distlock: the lock is released before --at-least ran out: distlock was stopped"
            );
        }
    }
    Ok(code)
}

/// Why a job's run was not a success: its command exited with a code other than 0 (the
/// run's record says it failed, and the code goes on), or the lock store failed it.
enum NotDone {
    Failed(u8),
    Lock(distlock::Error),
}

impl From<distlock::Error> for NotDone {
    fn from(err: distlock::Error) -> Self {
        NotDone::Lock(err)
    }
}

/// The URL scheme of `url` (SQLite's, the default's, without one).
fn scheme_of(url: &Option<String>) -> &str {
    url.as_deref().map_or("sqlite", |url| {
        url.split_once("://").map_or(url, |(scheme, _)| scheme)
    })
}

/// The exit code for signal `number` that came while a request waited: the wait is given
/// up, its request withdrawn in the background, and waited for, so the next holder is not
/// kept waiting for it to expire.
async fn withdrawn(client: &distlock::Client, number: libc::c_int) -> u8 {
    if !client.settle(SETTLE).await {
        errln!(
            "distlock: warning: the request was not withdrawn within {SETTLE:?}; it expires on its own"
        );
    }
    signals::exit_code(number)
}

/// Refuses an `--at-least` or `--once-per` outside a job's bounds, and an `--at-least`
/// above `--max-hold`.
fn check_job_spans(args: &RunArgs) -> Result<()> {
    let shown = |d| humantime::format_duration(d).to_string();
    for (flag, span) in [("--at-least", args.at_least), ("--once-per", args.once_per)] {
        if let Some(span) = span {
            distlock::validate_job_span(flag, span)?;
        }
    }
    match (args.at_least, args.max_hold) {
        (Some(at_least), Some(max_hold)) if at_least > max_hold => {
            Err(distlock::Error::invalid(format!(
                "--at-least {} is above --max-hold {}: the lock would outlast the cap on the command",
                shown(at_least),
                shown(max_hold)
            )))
        }
        _ => Ok(()),
    }
}

/// The lock a run takes on its name.
#[derive(Debug, Clone, Copy)]
enum Lock {
    Mutex,
    Read,
    Write,
    Permits { take: u32, of: u32 },
}

impl Lock {
    /// The lock `args` ask for; more permits than the semaphore has is bad input.
    fn of(args: &RunArgs) -> Result<Lock> {
        match (args.shared, args.exclusive, args.permits, args.of) {
            (true, _, _, _) => Ok(Lock::Read),
            (_, true, _, _) => Ok(Lock::Write),
            (_, _, take, Some(of)) => {
                let take = take.unwrap_or(1);
                match take <= of {
                    true => Ok(Lock::Permits { take, of }),
                    false => Err(distlock::Error::invalid(format!(
                        "--permits {take} is more than the semaphore's --of {of}"
                    ))),
                }
            }
            _ => Ok(Lock::Mutex),
        }
    }

    /// Acquires it: at once or not at all with `no_wait` (`Ok(None)` when busy), else
    /// within the options' wait.
    async fn acquire(
        self,
        client: &distlock::Client,
        name: &str,
        options: &LockOptions,
        no_wait: bool,
    ) -> Result<Option<Guard>> {
        match (self, no_wait) {
            (Lock::Mutex, true) => {
                client
                    .mutex(name)
                    .with_options(options.clone())
                    .try_lock()
                    .await
            }
            (Lock::Mutex, false) => client.mutex(name).lock_with(options).await.map(Some),
            (Lock::Read, true) => {
                client
                    .rwlock(name)
                    .with_options(options.clone())
                    .try_read()
                    .await
            }
            (Lock::Read, false) => client.rwlock(name).read_with(options).await.map(Some),
            (Lock::Write, true) => {
                client
                    .rwlock(name)
                    .with_options(options.clone())
                    .try_write()
                    .await
            }
            (Lock::Write, false) => client.rwlock(name).write_with(options).await.map(Some),
            (Lock::Permits { take, of }, true) => {
                let semaphore = client.semaphore(name, of).with_options(options.clone());
                semaphore.try_acquire_many(take).await
            }
            (Lock::Permits { take, of }, false) => client
                .semaphore(name, of)
                .acquire_with(take, options)
                .await
                .map(Some),
        }
    }
}

/// The shortest lease a run takes on any backend: renewals come every third of the TTL.
const SHORTEST_TTL: Duration = Duration::from_secs(1);

/// The shortest lease a run takes on the backend of `scheme`. Measured with the whole test
/// suite running on the same two cores: Redis held from 50 ms, PostgreSQL and MySQL from
/// 100 ms, and ZooKeeper and etcd grants live by their session, so [`SHORTEST_TTL`] keeps a
/// margin; a SQLite renewal is a disk flush, and with database servers initialising beside
/// it one took longer than a 1 s lease's renewal window, so SQLite's floor is 3 s.
fn shortest_ttl(scheme: &str) -> Duration {
    match scheme {
        "sqlite" => Duration::from_secs(3),
        _ => SHORTEST_TTL,
    }
}

/// Refuses, before connecting, what the backend of `scheme` never grants: a RedLock has
/// mutexes alone, in no fair queue (the library would refuse it once connected, and a
/// store out of reach would hide that the request itself is wrong).
fn check_kind(args: &RunArgs, scheme: &str) -> Result<()> {
    if !matches!(scheme, "redlock" | "redlocks") {
        return Ok(());
    }
    let asked = [
        (args.fair, "--fair"),
        (args.shared, "--shared"),
        (args.exclusive, "--exclusive"),
        (
            args.permits.is_some() || args.of.is_some(),
            "--permits/--of",
        ),
    ];
    match asked.iter().find(|(given, _)| *given) {
        Some((_, flag)) => Err(distlock::Error::new(
            distlock::ErrorKind::Unsupported,
            format!("{flag}: a RedLock ({scheme}://) grants plain mutexes only, in no fair queue"),
        )),
        None => Ok(()),
    }
}

/// Refuses a TTL under `shortest`, the floor on `on`.
fn check_ttl(ttl: Duration, on: &str, shortest: Duration) -> Result<()> {
    match ttl < shortest {
        true => Err(distlock::Error::invalid(format!(
            "--ttl {} is shorter than the minimum {} a run's renewals keep on {on}",
            humantime::format_duration(ttl),
            humantime::format_duration(shortest)
        ))),
        false => Ok(()),
    }
}

/// The least wait an acquire is given when connecting took the rest: it then asks once,
/// bounded by the deadline, instead of by an operation timeout.
const LEAST_WAIT: Duration = Duration::from_millis(1);

/// Connects to the lock store within what bounds the run's wait (the wait deadline counted
/// from `started`, or one `op_timeout` with `--no-wait`): the URL and the client, or `None`
/// (told on stderr) when the wait ran out first. A store out of reach is tried again
/// within the wait, as a waiter whose store restarts tries again.
async fn connect_within_the_wait(
    url: &Option<String>,
    args: &RunArgs,
    op_timeout: Duration,
    started: Instant,
) -> Result<Option<(String, distlock::Client)>> {
    match (args.no_wait, args.wait) {
        (true, _) => within(op_timeout, connect_shared(url, PURPOSE), unanswered)
            .await
            .map(Some),
        (false, Some(wait)) => {
            let deadline = started.checked_add(wait).unwrap_or_else(far_future);
            let connect = || connect_shared(url, PURPOSE);
            let late = |last| wait_ran_out(&args.name, wait, last);
            match retry_until(deadline, connect, late).await {
                Ok(connected) => Ok(Some(connected)),
                Err(err) if err.kind() == ErrorKind::Timeout => {
                    errln!("distlock: {err}");
                    Ok(None)
                }
                Err(err) => Err(err),
            }
        }
        (false, None) => connect_shared(url, PURPOSE).await.map(Some),
    }
}

/// What `run` is for, in the error that refuses a store no other process sees.
const PURPOSE: &str = "`run` holds a lock that other processes respect";

/// The error of a wait for `name` that ran out before the store answered (`last`: why it
/// did not, when it said).
fn wait_ran_out(name: &str, wait: Duration, last: Option<distlock::Error>) -> distlock::Error {
    let why = match last {
        Some(last) => format!("the lock store could not be reached ({last})"),
        None => "the lock store did not answer in time".to_owned(),
    };
    distlock::Error::new(
        ErrorKind::Timeout,
        format!(
            "lock `{name}` was not granted within --wait {}: {why}",
            humantime::format_duration(wait)
        ),
    )
}

/// A deadline past any wait: a wait too long to add to the clock waits for ever.
fn far_future() -> Instant {
    Instant::now() + Duration::from_secs(100 * 365 * 24 * 3600)
}

/// How long a run whose wait timed out waits for its request to be withdrawn: a round
/// trip to a store that answers, and little past the wait for one that hangs.
const WITHDRAW_AFTER_TIMEOUT: Duration = Duration::from_millis(100);

/// How long a run interrupted while it waits waits for its request to be withdrawn.
const SETTLE: Duration = Duration::from_secs(5);

/// The longest a run's release (and any other single call to the store) may take.
const RELEASE_WITHIN: Duration = Duration::from_secs(2);

/// Runs `wait` until it ends or a signal that would end distlock arrives (SIGINT from a
/// terminal, SIGTERM from a supervisor, SIGHUP from a closed session, …): `Err` with the
/// signal's number then, `wait` dropped. Ctrl-Z stops the waiting run as it would stop any
/// job (between `client`'s writes, with a client); other signals are let pass.
async fn until_signalled<T>(
    wait: impl std::future::Future<Output = T>,
    client: Option<&distlock::Client>,
    caught: &mut Caught,
) -> std::result::Result<T, libc::c_int> {
    tokio::pin!(wait);
    loop {
        tokio::select! {
            done = &mut wait => return Ok(done),
            number = caught.next() => {
                if signals::ends_a_wait(number) {
                    return Err(number);
                }
                match (number, client) {
                    (libc::SIGTSTP, Some(client)) => signals::stop_between_writes(client).await,
                    (libc::SIGTSTP, None) => signals::stop_self(),
                    _ => {}
                }
            }
        }
    }
}
