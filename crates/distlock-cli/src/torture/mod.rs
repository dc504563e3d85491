//! `distlock torture`: worker processes take a lock in turns under faults, every
//! operation goes to a history, and the checker judges it.

mod faults;
mod record;
mod resource;
mod worker;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use distlock::{Client, Error, ErrorKind, Result};
use distlock_cli::checker::{Limits, Verdict, check};
use distlock_cli::history::{What, monotonic_ns, parse};
use serde_json::json;

use crate::args::TortureArgs;
use crate::location::lock_url;

pub use worker::worker;

/// How long workers get to stop after the run's end, beyond a hold and two TTLs: a worker
/// may be waiting for a lease that a paused or killed holder left behind.
const STOP_GRACE: Duration = Duration::from_secs(30);

/// The longest run, hold or TTL torture takes.
const MAX_DURATION: Duration = Duration::from_secs(24 * 3600);

/// Runs the workload under faults and prints the verdict: exit 0 if the history is
/// clean, 1 if not.
pub async fn torture(given: &Option<String>, args: TortureArgs) -> Result<u8> {
    let url = lock_url(given)?;
    if url.starts_with("memory:") {
        return Err(Error::invalid(
            "torture runs workers as separate processes, which share no memory:// lock; use a backend they share",
        ));
    }
    let at_least = Duration::from_millis(100);
    if args.ttl < at_least || args.fault_every < at_least {
        return Err(Error::invalid(
            "torture needs a TTL and a fault interval of 100 ms or more",
        ));
    }
    if args.duration > MAX_DURATION || args.hold > MAX_DURATION || args.ttl > MAX_DURATION {
        return Err(Error::invalid(format!(
            "torture runs, holds and TTLs are at most {}",
            humantime::format_duration(MAX_DURATION)
        )));
    }
    // Refuse a bad URL or an unreachable backend before any worker starts.
    let client = Client::connect(&url).await?;
    let scheme = client.backend().scheme();
    drop(client);

    let history = match &args.history {
        Some(path) => path.clone(),
        None => run_dir()?.join("history.jsonl"),
    };
    // A history of an earlier run would be judged with this one.
    let _ = std::fs::remove_file(&history);
    let counter = history.with_extension("counter");
    let _ = std::fs::remove_file(&counter);
    let recorder = Arc::new(record::Recorder::open(&history)?);
    recorder.record(
        0,
        What::Start {
            ttl: args.ttl.as_nanos() as u64,
            workers: args.workers,
            scheme: "distlock".into(),
            backend: scheme.into(),
        },
    );
    let resource = resource::start(recorder.clone()).await?;
    let seed = args.seed.unwrap_or_else(rand::random);
    let mut rng = faults::schedule(seed);
    let started = monotonic_ns();
    let until = started + args.duration.as_nanos() as u64;
    let template = worker::Task {
        url: url.clone(),
        name: format!("torture/{}-{started}", std::process::id()),
        worker: 0,
        ttl: args.ttl,
        hold: args.hold,
        until,
        history: history.clone(),
        counter,
        resource,
    };
    let mut workers = faults::Workers::start(template, args.workers).await?;
    loop {
        let next = monotonic_ns() + args.fault_every.as_nanos() as u64;
        if next >= until {
            break;
        }
        tokio::time::sleep(Duration::from_nanos(next.saturating_sub(monotonic_ns()))).await;
        workers.inject(&args.faults, &mut rng, &recorder).await?;
    }
    tokio::time::sleep(Duration::from_nanos(until.saturating_sub(monotonic_ns()))).await;
    workers
        .finish(STOP_GRACE + args.hold + args.ttl * 2)
        .await?;

    let text = std::fs::read_to_string(&history)
        .map_err(|e| Error::new(ErrorKind::Backend, format!("cannot read the history: {e}")))?;
    let events = parse(&text).map_err(|e| Error::new(ErrorKind::Backend, e))?;
    let liveness = args
        .liveness
        .unwrap_or(args.ttl * 2 + Duration::from_secs(2));
    let verdict = check(
        &events,
        &Limits {
            liveness: liveness.as_nanos() as u64,
        },
    );
    print_verdict(&args, &verdict, &history, seed, scheme);
    Ok(if verdict.clean() { 0 } else { 1 })
}

/// A fresh directory for a run's files, kept after it.
fn run_dir() -> Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!(
        "distlock-torture-{}-{}",
        std::process::id(),
        monotonic_ns()
    ));
    std::fs::create_dir_all(&dir)
        .map_err(|e| Error::invalid(format!("cannot create {}: {e}", dir.display())))?;
    Ok(dir)
}

fn print_verdict(
    args: &TortureArgs,
    verdict: &Verdict,
    history: &std::path::Path,
    seed: u64,
    backend: &str,
) {
    if args.json {
        let out = json!({
            "clean": verdict.clean(),
            "backend": backend,
            "seed": seed,
            "history": history,
            "violations": verdict.violations,
            "stats": verdict.stats,
        });
        println!("{out}");
        return;
    }
    let stats = &verdict.stats;
    println!(
        "torture {backend}: {} workers, {:?}, ttl {:?}, faults {:?}, seed {seed}",
        args.workers, args.duration, args.ttl, args.faults
    );
    println!(
        "  {} acquisitions, {} transfers, {} faults; counter {} after {} critical sections ({} lost updates, {} stale unfenced writes)",
        stats.acquisitions,
        stats.transfers,
        stats.faults,
        stats.counter_final,
        stats.critical_sections,
        stats.lost_updates,
        stats.stale_unfenced_writes
    );
    println!(
        "  fenced resource: {} writes accepted, {} stale writes refused; longest free while waiting {:.0} ms",
        stats.writes_accepted,
        stats.stale_writes_refused,
        stats.longest_free_wait_ns as f64 / 1e6
    );
    println!("  history: {}", history.display());
    match verdict.clean() {
        true => println!("verdict: clean"),
        false => {
            println!("verdict: {} violations", verdict.violations.len());
            for violation in &verdict.violations {
                println!("  {:?}: {}", violation.kind, violation.message);
            }
        }
    }
}
