//! `distlock torture`: worker processes take a lock in turns under faults, every
//! operation goes to a history, and the checker judges it.

mod clock;
mod faults;
mod hand_off;
mod jobs;
mod leading;
mod link;
mod masters;
mod process;
mod record;
mod resource;
mod scheme;
mod server;
mod sql_scheme;
mod steps;
mod worker;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use distlock::{Error, ErrorKind, Result};
use distlock_check::checker::{Limits, Verdict, check};
use distlock_check::history::{What, monotonic_ns, parse};
use rand::SeedableRng;
use rand::rngs::StdRng;
use serde_json::json;
use tokio::signal::unix::{Signal, SignalKind, signal};

use crate::args::{FaultKind, MASTER_FAULTS, Scheme, ServerKind, TortureArgs};
use crate::location::{connect_shared, state_dir};
use crate::output::{errln, outln};

pub use worker::worker;

/// How long workers get to stop after the run's end, beyond a hold and two TTLs: a worker
/// may be waiting for a lease that a paused or killed holder left behind.
const STOP_GRACE: Duration = Duration::from_secs(30);

/// The longest run, hold or TTL torture takes.
const MAX_DURATION: Duration = Duration::from_secs(24 * 3600);

/// How many violations of each kind the verdict lists (`--json` has them all): one broken
/// release can start a chain of them.
const LISTED: usize = 3;

/// How long workers get to connect before the run starts: they all start together.
const STARTUP: Duration = Duration::from_secs(1);

/// Runs the workload under faults and prints the verdict: exit 0 if the history is
/// clean, 1 if not, 128 + the signal if a signal stopped it.
pub async fn torture(given: &Option<String>, args: TortureArgs) -> Result<u8> {
    check_args(&args)?;
    let mut interruption = Interruption::listen()?;
    if let Some(kind) = args.server {
        let fits = if scheme::on_plain_redis(args.scheme) {
            kind == ServerKind::Redis
        } else if sql_scheme::on_database(args.scheme) {
            matches!(
                kind,
                ServerKind::Postgres
                    | ServerKind::PostgresLease
                    | ServerKind::Mariadb
                    | ServerKind::MariadbLease
            )
        } else {
            true
        };
        if !fits {
            return Err(Error::invalid(format!(
                "--scheme {} does not run on a {} server",
                args.scheme.as_str(),
                kind.as_str()
            )));
        }
    }
    if args.server.is_some() && given.is_some() {
        return Err(Error::invalid(
            "--server starts the store the run locks in: give it or --url, not both",
        ));
    }
    // The run's own server, if asked for: its URL is the run's (DISTLOCK_URL is not).
    let (own, given) = match args.server {
        Some(kind) => {
            // A signal lets the start finish, and then stops what it started: a server
            // dropped half-launched would run on in its own process group.
            let faked_clock = args.faults().contains(&FaultKind::MasterClockJump);
            let mut starting = tokio::spawn(server::start(kind, faked_clock));
            let started = tokio::select! {
                started = &mut starting => started,
                signal = interruption.next() => {
                    drop(starting.await);
                    return Ok(128 + signal as u8);
                }
            };
            let (own, url) = started.map_err(|e| {
                Error::new(ErrorKind::Backend, format!("cannot start the server: {e}"))
            })??;
            (Some(own), Some(url))
        }
        None => (None, given.clone()),
    };
    // Refuse a bad URL, an unreachable backend or files that cannot be written before
    // anything is made in the store.
    let (url, (backend, detachable), link) = tokio::select! {
        checked = check_store(&given, &args) => checked?,
        signal = interruption.next() => return Ok(128 + signal as u8),
    };
    let files = Files::make(&args)?;
    let name = format!("torture/{}", distlock::random_id());
    if sql_scheme::on_database(args.scheme) {
        sql_scheme::prepare(&url, &name).await?;
    }
    let store = Store {
        url: &url,
        name: &name,
        backend,
        detachable,
        link,
        server: own,
    };
    let ran = run(&args, &store, &files, &mut interruption).await;
    if scheme::on_plain_redis(args.scheme) {
        scheme::remove(&url, &name).await;
    }
    if sql_scheme::on_database(args.scheme) {
        sql_scheme::remove(&url, &name).await;
    }
    let (seed, interrupted) = ran?;

    let text = std::fs::read_to_string(&files.history)
        .map_err(|e| Error::new(ErrorKind::Backend, format!("cannot read the history: {e}")))?;
    let events = parse(&text).map_err(|e| Error::new(ErrorKind::Backend, e))?;
    // A job's run keeps the lock for --at-least after its grant: not free meanwhile.
    let liveness = args
        .liveness
        .unwrap_or(args.ttl * 2 + Duration::from_secs(2) + args.at_least.unwrap_or_default());
    let verdict = check(
        &events,
        &Limits {
            liveness: liveness.as_nanos() as u64,
        },
    );
    if verdict.stats.acquisitions == 0 && interrupted.is_none() {
        return Err(Error::new(
            ErrorKind::Backend,
            format!(
                "no worker got the lock: nothing was tested (history: {})",
                files.history.display()
            ),
        ));
    }
    let title = format!(
        "distlock torture: {backend}, scheme {}, seed {seed}",
        args.scheme.as_str()
    );
    write_report(
        &files.report,
        &distlock_check::report::render(&events, &verdict, &title),
    )?;
    print_verdict(&args, &verdict, &files, seed, backend);
    if let Some(signal) = interrupted {
        errln!(
            "distlock torture: interrupted (signal {signal}): the verdict covers the run so far"
        );
        return Ok(128 + signal as u8);
    }
    Ok(if verdict.clean() { 0 } else { 1 })
}

/// The store a run locks in, as checked before it.
struct Store<'a> {
    url: &'a str,
    /// The lock's name.
    name: &'a str,
    /// The backend's URL scheme.
    backend: &'static str,
    /// Whether the store keeps a grant once its holder's process is gone.
    detachable: bool,
    /// The server the workers reach through proxies, for link faults.
    link: Option<link::Link>,
    /// The server the run started itself, for server faults.
    server: Option<server::OwnServer>,
}

/// Connects to the store once: the URL, the backend's scheme and whether its grants
/// outlive their holders, and the link for link faults; an error if the run cannot be
/// made there.
async fn check_store(
    given: &Option<String>,
    args: &TortureArgs,
) -> Result<(String, (&'static str, bool), Option<link::Link>)> {
    let (url, client) =
        connect_shared(given, "torture runs its workers as separate processes").await?;
    let capabilities = client.capabilities();
    let backend = client.scheme();
    if args.fair && !capabilities.fair {
        return Err(Error::new(
            ErrorKind::Unsupported,
            format!("{backend}:// has no fair queue to check (--fair)"),
        ));
    }
    drop(client);
    if scheme::on_plain_redis(args.scheme) {
        scheme::redis_client(&url)?;
    }
    let link = match args
        .faults()
        .iter()
        .any(|kind| matches!(kind, FaultKind::Cut | FaultKind::BlackHole))
    {
        true => Some(link::Link::of(&url)?),
        false => None,
    };
    Ok((url, (backend, capabilities.detachable), link))
}

/// Starts the workers and the fenced resource, injects the faults until the run's end
/// or a signal, and waits for the workers to stop (a second signal kills them): the seed,
/// and the signal if one came.
async fn run(
    args: &TortureArgs,
    store: &Store<'_>,
    files: &Files,
    interruption: &mut Interruption,
) -> Result<(u64, Option<i32>)> {
    let recorder = Arc::new(record::Recorder::create(&files.history)?);
    recorder.record(
        0,
        What::Start {
            ttl: args.ttl.as_nanos() as u64,
            workers: args.workers,
            scheme: args.scheme.as_str().into(),
            backend: store.backend.into(),
            fair: args.fair,
        },
    );
    if let Some(at_least) = args.at_least {
        recorder.record(
            0,
            What::JobRuns {
                at_least: at_least.as_nanos() as u64,
                detachable: store.detachable,
            },
        );
    }
    if let Some(once_per) = args.once_per {
        let span = once_per.as_nanos() as u64;
        recorder.record(0, What::OncePer { span });
    }
    // A resource fenced by the schemes' tokens (those without take 0, and a resource that
    // knows nothing of tokens).
    let fenced = matches!(
        args.scheme,
        Scheme::Distlock
            | Scheme::NoRenewal
            | Scheme::VersionCas
            | Scheme::Election
            | Scheme::Job
            | Scheme::HandOff
    );
    let resource = resource::start(recorder.clone(), fenced).await?;
    let seed = args.seed.unwrap_or_else(rand::random);
    let mut rng = StdRng::seed_from_u64(seed);
    let started = monotonic_ns() + STARTUP.as_nanos() as u64;
    let until = started + args.duration.as_nanos() as u64;
    let template = worker::Task {
        url: store.url.to_owned(),
        name: store.name.to_owned(),
        scheme: args.scheme,
        fair: args.fair,
        worker: 0,
        ttl: args.ttl,
        hold: args.hold(),
        at_least: args.at_least,
        once_per: args.once_per,
        start: started,
        until,
        history: files.history.clone(),
        counter: files.dir.join("counter"),
        resource,
        writes_first: args.server == Some(ServerKind::Redlock),
    };
    let faults = args.faults();
    let clocks = match faults.contains(&FaultKind::ClockJump) {
        true => Some(clock::Clocks::find(&files.dir)?),
        false => None,
    };
    let mut workers = faults::Workers::start(
        template,
        args.workers,
        (store.link.clone(), clocks),
        store.server.clone(),
    )
    .await?;
    let schedule = async {
        let mut next = started + args.fault_every.as_nanos() as u64;
        while next < until {
            tokio::time::sleep(Duration::from_nanos(next.saturating_sub(monotonic_ns()))).await;
            workers.inject(&faults, &mut rng, &recorder).await?;
            next = monotonic_ns() + args.fault_every.as_nanos() as u64;
        }
        tokio::time::sleep(Duration::from_nanos(until.saturating_sub(monotonic_ns()))).await;
        Ok(())
    };
    let (ran, mut interrupted) = tokio::select! {
        ran = schedule => (ran, None),
        signal = interruption.next() => (Ok(()), Some(signal)),
    };
    if interrupted.is_some() || ran.is_err() {
        workers.stop(&recorder).await;
    }
    let finished = tokio::select! {
        finished = workers.finish(STOP_GRACE + args.hold() + args.ttl * 2, &recorder) => finished,
        // Dropping the workers kills those still running.
        signal = interruption.next() => {
            interrupted = interrupted.or(Some(signal));
            Ok(())
        }
    };
    ran?;
    finished?;
    Ok((seed, interrupted))
}

/// The signals that stop a run early (Ctrl-C, a terminal hung up, a polite kill): the run
/// stops its workers cleanly, judges what it recorded, and exits 128 + the signal.
struct Interruption {
    interrupt: Signal,
    terminate: Signal,
    hangup: Signal,
}

impl Interruption {
    /// Catches the signals from now on.
    fn listen() -> Result<Interruption> {
        let catch = |kind: SignalKind| {
            signal(kind)
                .map_err(|e| Error::new(ErrorKind::Backend, format!("cannot catch signals: {e}")))
        };
        Ok(Interruption {
            interrupt: catch(SignalKind::interrupt())?,
            terminate: catch(SignalKind::terminate())?,
            hangup: catch(SignalKind::hangup())?,
        })
    }

    /// The number of the next signal caught.
    async fn next(&mut self) -> i32 {
        tokio::select! {
            _ = self.interrupt.recv() => libc::SIGINT,
            _ = self.terminate.recv() => libc::SIGTERM,
            _ = self.hangup.recv() => libc::SIGHUP,
        }
    }
}

/// Refuses arguments no run can be made of.
fn check_args(args: &TortureArgs) -> Result<()> {
    let at_least = Duration::from_millis(100);
    if args.ttl < at_least || args.fault_every < at_least {
        return Err(Error::invalid(
            "torture needs a TTL and a fault interval of 100 ms or more",
        ));
    }
    let faults = args.faults();
    let server_faults = faults
        .iter()
        .any(|kind| matches!(kind, FaultKind::ServerPause | FaultKind::ServerRestart));
    let redlock = args.server == Some(ServerKind::Redlock);
    if server_faults && (args.server.is_none() || redlock) {
        return Err(Error::invalid(
            "server faults need the run's own server: add --server redis|postgres|… \
             (a RedLock's masters take master-restart, failover and master-clock-jump)",
        ));
    }
    let master_faults = faults.iter().any(|kind| MASTER_FAULTS.contains(kind));
    if master_faults && !redlock {
        return Err(Error::invalid(
            "master-restart, failover and master-clock-jump strike a RedLock's masters: \
             add --server redlock",
        ));
    }
    if args.fair
        && !matches!(
            args.scheme,
            Scheme::Distlock | Scheme::NoFencing | Scheme::Election | Scheme::Job | Scheme::HandOff
        )
    {
        return Err(Error::invalid(
            "--fair asks distlock for FIFO grants: it goes with --scheme distlock, no-fencing, election or job",
        ));
    }
    match (args.scheme, args.at_least) {
        (Scheme::Job, None) => {
            return Err(Error::invalid(
                "--scheme job needs --at-least D: how long each run keeps the lock",
            ));
        }
        (Scheme::Job, Some(at_least)) => {
            distlock::validate_job_span("--at-least", at_least)?;
            if let Some(once_per) = args.once_per {
                distlock::validate_job_span("--once-per", once_per)?;
            }
        }
        (scheme, None) if args.once_per.is_some() => {
            return Err(Error::invalid(format!(
                "--once-per is a job's: it goes with --scheme job, not {}",
                scheme.as_str()
            )));
        }
        (_, None) => {}
        (scheme, Some(_)) => {
            return Err(Error::invalid(format!(
                "--at-least is a job's: it goes with --scheme job, not {}",
                scheme.as_str()
            )));
        }
    }
    if args.duration < Duration::from_secs(1) {
        return Err(Error::invalid("torture needs a run of 1 s or more"));
    }
    let liveness = args.liveness.unwrap_or_default();
    if [
        args.duration,
        args.hold(),
        args.ttl,
        args.fault_every,
        liveness,
        args.at_least.unwrap_or_default(),
        args.once_per.unwrap_or_default(),
    ]
    .iter()
    .any(|d| *d > MAX_DURATION)
    {
        return Err(Error::invalid(format!(
            "torture runs, holds, TTLs, fault intervals and liveness limits are at most {}",
            humantime::format_duration(MAX_DURATION)
        )));
    }
    Ok(())
}

/// The files a run writes: its directory (the counter, and the history and report unless
/// named elsewhere), `torture/<id>` in the state directory, kept after it.
struct Files {
    dir: PathBuf,
    history: PathBuf,
    report: PathBuf,
}

impl Files {
    /// Makes the run's directory, and checks the history and the report can be written
    /// (an earlier report is left as it is until the new one is written).
    fn make(args: &TortureArgs) -> Result<Files> {
        let dir = state_dir()?.join("torture").join(distlock::random_id());
        std::fs::create_dir_all(&dir)
            .map_err(|e| Error::invalid(format!("cannot create {}: {e}", dir.display())))?;
        let history = args
            .history
            .clone()
            .unwrap_or_else(|| dir.join("history.jsonl"));
        let report = args
            .report
            .clone()
            .unwrap_or_else(|| dir.join("report.html"));
        for (what, path) in [("history", &history), ("report", &report)] {
            if path.exists() && !path.is_file() {
                return Err(Error::invalid(format!(
                    "the {what} {} is not a regular file",
                    path.display()
                )));
            }
            std::fs::OpenOptions::new()
                .append(true)
                .create(true)
                .open(path)
                .map_err(|e| {
                    Error::invalid(format!("cannot write the {what} {}: {e}", path.display()))
                })?;
        }
        Ok(Files {
            dir,
            history,
            report,
        })
    }
}

/// Writes the report to `path`.
fn write_report(path: &Path, html: &str) -> Result<()> {
    std::fs::write(path, html)
        .map_err(|e| Error::invalid(format!("cannot write the report {}: {e}", path.display())))
}

fn print_verdict(args: &TortureArgs, verdict: &Verdict, files: &Files, seed: u64, backend: &str) {
    let (history, report) = (&files.history, &files.report);
    if args.json {
        let out = json!({
            "clean": verdict.clean(),
            "backend": backend,
            "scheme": args.scheme.as_str(),
            "seed": seed,
            "history": history,
            "report": report,
            "violations": verdict.violations,
            "stats": verdict.stats,
        });
        outln!("{out}");
        return;
    }
    let stats = &verdict.stats;
    outln!(
        "torture {backend} ({}): {} workers, {:?}, ttl {:?}, faults {:?}, seed {seed}",
        args.scheme.as_str(),
        args.workers,
        args.duration,
        args.ttl,
        args.faults()
    );
    outln!(
        "  {} acquisitions, {} transfers, {} faults; counter {} after {} critical sections ({} lost updates, {} stale unfenced writes)",
        stats.acquisitions,
        stats.transfers,
        stats.faults,
        stats.counter_final,
        stats.critical_sections,
        stats.lost_updates,
        stats.stale_unfenced_writes
    );
    if stats.stale_unfenced_writes > 0 && verdict.clean() {
        outln!(
            "  (the stale unfenced writes are counter writes by holders paused past the end of \
             their lease, between their last check and the write: no lock can stop those, \
             which is what the fenced resource's tokens are for)"
        );
    }
    outln!(
        "  fenced resource: {} writes accepted, {} stale writes refused; longest free while waiting {:.0} ms",
        stats.writes_accepted,
        stats.stale_writes_refused,
        stats.longest_free_wait_ns as f64 / 1e6
    );
    outln!("  history: {}", history.display());
    outln!("  report: {}", report.display());
    match verdict.clean() {
        true => outln!("verdict: clean"),
        false => {
            outln!("verdict: {} violations", verdict.violations.len());
            // Sorted by kind: the first few of each kind.
            for of_kind in verdict.violations.chunk_by(|a, b| a.kind == b.kind) {
                for violation in of_kind.iter().take(LISTED) {
                    outln!("  {:?}: {}", violation.kind, violation.message);
                }
                if of_kind.len() > LISTED {
                    outln!(
                        "  … and {} more {:?} (--json lists them all)",
                        of_kind.len() - LISTED,
                        of_kind[0].kind
                    );
                }
            }
        }
    }
}
