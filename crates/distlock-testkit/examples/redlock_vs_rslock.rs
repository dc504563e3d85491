//! distlock's RedLock against rslock (a RedLock client from crates.io), uncontended, on the
//! same masters in one run: each runs lock/release cycles in turns with the other, on one
//! name and on a new name each cycle, and the medians of the runs and their ratio are
//! printed.
//!
//! ```text
//! cargo run --release -p distlock-testkit --example redlock_vs_rslock -- \
//!     127.0.0.1:7701,127.0.0.1:7702,127.0.0.1:7703 [--runs 5] [--duration 2s] \
//!     [--cycles N] [--runtime multi|current] [--only distlock|rslock] [--names one|new]
//! ```
//!
//! Both use a 10 s TTL and the same masters. Each run lasts `--duration`, or `--cycles`
//! cycles where given (to count instructions per cycle under `valgrind --tool=callgrind`,
//! with `--only` one client). The runtime is tokio's multi-threaded one with two workers, or
//! its current-thread one. Pin the program and the servers with `taskset` to compare
//! placements.

use std::time::{Duration, Instant};

use distlock::{Client, LockOptions};

const USAGE: &str = "usage: redlock_vs_rslock HOST:PORT,HOST:PORT,... [--runs N] [--duration 2s] \
     [--cycles N] [--runtime multi|current] [--only distlock|rslock] [--names one|new]";

/// What to measure, from the command line.
struct Args {
    /// The masters, `host:port` each.
    masters: Vec<String>,
    /// How many runs of each client.
    runs: usize,
    /// How long each run lasts.
    limit: Limit,
    /// Tokio's current-thread runtime instead of the multi-threaded one.
    current_thread: bool,
    /// Only this client's runs (`distlock` or `rslock`), to profile one.
    only: Option<String>,
    /// Only runs on one name, or only on new names.
    names: Option<Names>,
}

/// When a run ends.
#[derive(Clone, Copy)]
enum Limit {
    After(Duration),
    Cycles(u64),
}

impl Limit {
    fn goes_on(self, started: Instant, cycles: u64) -> bool {
        match self {
            Limit::After(duration) => started.elapsed() < duration,
            Limit::Cycles(count) => cycles < count,
        }
    }
}

fn parse_args() -> Result<Args, String> {
    let mut args = std::env::args().skip(1);
    let masters = args.next().ok_or(USAGE)?;
    if masters.starts_with('-') {
        return Err(format!("the masters come first, not {masters}\n{USAGE}"));
    }
    let mut parsed = Args {
        masters: masters.split(',').map(str::to_owned).collect(),
        runs: 5,
        limit: Limit::After(Duration::from_secs(2)),
        current_thread: false,
        only: None,
        names: None,
    };
    while let Some(flag) = args.next() {
        let value = args.next().ok_or(format!("{flag} needs a value"))?;
        match (flag.as_str(), value.as_str()) {
            ("--runs", _) => parsed.runs = value.parse().map_err(|e| format!("--runs: {e}"))?,
            ("--duration", _) => {
                let duration =
                    humantime::parse_duration(&value).map_err(|e| format!("--duration: {e}"))?;
                parsed.limit = Limit::After(duration);
            }
            ("--cycles", _) => {
                let cycles = value.parse().map_err(|e| format!("--cycles: {e}"))?;
                parsed.limit = Limit::Cycles(cycles);
            }
            ("--runtime", "multi" | "current") => parsed.current_thread = value == "current",
            ("--only", "distlock" | "rslock") => parsed.only = Some(value),
            ("--names", "one") => parsed.names = Some(Names::One),
            ("--names", "new") => parsed.names = Some(Names::New),
            _ => return Err(format!("unknown option {flag} {value}\n{USAGE}")),
        }
    }
    let empty = match parsed.limit {
        Limit::After(duration) => duration.is_zero(),
        Limit::Cycles(cycles) => cycles == 0,
    };
    if parsed.runs == 0 || empty {
        return Err("--runs, --duration and --cycles must be above zero".into());
    }
    Ok(parsed)
}

/// Which name each cycle locks.
#[derive(Clone, Copy, PartialEq)]
enum Names {
    One,
    New,
}

impl Names {
    fn name(self, cycle: u64) -> String {
        match self {
            Names::One => "bench/one".to_owned(),
            Names::New => format!("bench/new/{cycle}"),
        }
    }
}

const TTL: Duration = Duration::from_secs(10);

/// Cycles per second of distlock's RedLock for one run.
async fn distlock_run(client: &Client, names: Names, limit: Limit) -> f64 {
    let options = LockOptions::new().ttl(TTL);
    let (started, mut cycles) = (Instant::now(), 0u64);
    while limit.goes_on(started, cycles) {
        let guard = client
            .mutex(names.name(cycles))
            .lock_with(&options)
            .await
            .expect("distlock's RedLock grants an uncontended lock");
        guard.release().await.expect("distlock releases");
        cycles += 1;
    }
    cycles as f64 / started.elapsed().as_secs_f64()
}

/// Cycles per second of rslock for one run.
async fn rslock_run(manager: &rslock::LockManager, names: Names, limit: Limit) -> f64 {
    let (started, mut cycles) = (Instant::now(), 0u64);
    while limit.goes_on(started, cycles) {
        let name = names.name(cycles);
        let lock = manager
            .lock(name.as_bytes(), TTL)
            .await
            .expect("rslock grants an uncontended lock");
        manager.unlock(&lock).await;
        cycles += 1;
    }
    cycles as f64 / started.elapsed().as_secs_f64()
}

fn median(mut figures: Vec<f64>) -> f64 {
    figures.sort_by(f64::total_cmp);
    figures[figures.len() / 2]
}

async fn compare(args: &Args) {
    let url = format!("redlock://{}", args.masters.join(","));
    let client = Client::connect(&url).await.expect("the masters answer");
    let manager = rslock::LockManager::new(
        args.masters
            .iter()
            .map(|master| format!("redis://{master}"))
            .collect::<Vec<_>>(),
    );
    // Both connect (and load their scripts) before the first run.
    let warm_up = Limit::Cycles(20);
    distlock_run(&client, Names::One, warm_up).await;
    rslock_run(&manager, Names::One, warm_up).await;
    for (label, names) in [("one name", Names::One), ("new names", Names::New)] {
        if args.names.is_some_and(|only| only != names) {
            continue;
        }
        let (mut ours, mut theirs) = (Vec::new(), Vec::new());
        for _ in 0..args.runs {
            if args.only.as_deref() != Some("rslock") {
                ours.push(distlock_run(&client, names, args.limit).await);
            }
            if args.only.as_deref() != Some("distlock") {
                theirs.push(rslock_run(&manager, names, args.limit).await);
            }
        }
        if ours.is_empty() || theirs.is_empty() {
            println!("{label}: distlock {ours:.0?} cycles/s, rslock {theirs:.0?} cycles/s");
            continue;
        }
        let (ours_median, theirs_median) = (median(ours.clone()), median(theirs.clone()));
        println!(
            "{label}: distlock {ours_median:.0} cycles/s, rslock {theirs_median:.0} cycles/s, \
             ratio {:.2} (runs: distlock {ours:.0?}, rslock {theirs:.0?})",
            ours_median / theirs_median
        );
    }
}

fn main() {
    if std::env::args().any(|arg| arg == "-h" || arg == "--help") {
        println!("{USAGE}");
        return;
    }
    let args = match parse_args() {
        Ok(args) => args,
        Err(message) => {
            eprintln!("{message}");
            std::process::exit(64);
        }
    };
    let runtime = match args.current_thread {
        true => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build(),
        false => tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build(),
    };
    runtime.expect("a tokio runtime").block_on(compare(&args));
}
