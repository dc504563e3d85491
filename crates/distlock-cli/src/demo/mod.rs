//! `distlock demo`: the overselling story. Worker processes buy one unit at a time from a
//! stock kept in a shop — a SQLite file, the PostgreSQL or MySQL/MariaDB database the locks
//! live in, or Redis — under each strategy in turn.

mod claim;
mod shop;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use distlock::{Error, Result};
use serde::{Deserialize, Serialize};
use tokio::io::AsyncReadExt;

use crate::args::DemoArgs;
use crate::exit;
use crate::location::{lock_url, open_client, refuse_process_local, sqlite_file, state_dir};
use crate::output::{errln, outln};
use crate::progress;
use crate::signals::{self, Caught};
use crate::worker_task;
use claim::Claim;
use distlock::sql::fenced::Dialect;
use shop::{Place, Sale, Shop};

/// How many segments `segmented` splits the stock into by default.
const DEFAULT_SEGMENTS: u32 = 5;

/// The strategies that take distlock locks, in several processes.
const LOCKING: [&str; 2] = ["lock", "segmented"];
/// How long one worker may take before the demo gives up on it.
const WORKER_LIMIT: Duration = Duration::from_secs(300);

/// What one worker process reports.
#[derive(Debug, Default, Serialize, Deserialize)]
struct WorkerReport {
    sold: u64,
    sold_out: u64,
    retries: u64,
}

/// One line of the demo's result.
#[derive(Debug, Serialize)]
struct StrategyReport {
    strategy: String,
    stock: u32,
    buyers: u32,
    workers: u32,
    orders: i64,
    oversold: i64,
    stock_left: i64,
    buys_per_s: f64,
    /// Its buys/s over `lock`'s, when `lock` ran in the same demo.
    #[serde(skip_serializing_if = "Option::is_none")]
    vs_lock: Option<f64>,
    retries: u64,
    elapsed_s: f64,
}

pub async fn demo(url: &Option<String>, mut args: DemoArgs) -> Result<u8> {
    let lock_url = lock_url(url)?;
    let shop_at = match &args.shop {
        Some(at) => at.clone(),
        None => default_shop(&lock_url)?,
    };
    let place = Place::of(&shop_at)?;
    if args.strategies.is_empty() {
        args.strategies = place.strategies().iter().map(|s| (*s).to_owned()).collect();
    }
    for strategy in &args.strategies {
        place.check(strategy)?;
    }
    if args.workers == 0 || args.buyers == 0 || args.concurrency == 0 {
        return Err(Error::invalid(
            "--workers, --buyers and --concurrency must be at least 1",
        ));
    }
    if let Some(segments) = args.segments.filter(|k| *k == 0 || *k > args.stock) {
        return Err(Error::invalid(format!(
            "--segments must be at least 1 and at most the stock ({}): got {segments}",
            args.stock
        )));
    }
    if args
        .strategies
        .iter()
        .any(|s| LOCKING.contains(&s.as_str()))
    {
        let client = open_client(&lock_url).await?;
        refuse_process_local(
            &client,
            "the `lock` and `segmented` strategies run in several processes",
        )?;
    }
    // A signal that would end the demo (Ctrl-C, a supervisor's SIGTERM) stops the sale
    // instead: its workers are killed with it, and the shop is removed all the same. Caught
    // from before the shop is claimed, so none finds it claimed or made and the demo
    // unprepared.
    let mut caught = Caught::listen(&signals::ending());
    let Some(claim) = Claim::take(&lock_url, &shop_at).await? else {
        errln!(
            "distlock demo: another demo holds the shop at {} (one killed outright holds it \
             for {} at most); wait for it to end, or give this one a shop of its own (--shop)",
            distlock::redact_url(&shop_at),
            humantime::format_duration(claim::CLAIM_TTL)
        );
        return Ok(exit::BUSY);
    };
    let sold = sell_and_tidy_up(&args, &lock_url, &shop_at, &mut caught).await;
    claim.give_up().await;
    sold
}

/// Sells from the shop at `shop_at` with every strategy, then removes it (unless
/// `--keep`); a signal stops the sale and the shop is removed all the same.
async fn sell_and_tidy_up(
    args: &DemoArgs,
    lock_url: &str,
    shop_at: &str,
    caught: &mut Caught,
) -> Result<u8> {
    let shop = Shop::open(shop_at, 1).await?;
    // The rows that wait for `lock`'s to be told beside it: a sale stopped first tells them
    // without it.
    let mut waiting_for_lock = Vec::new();
    let mut sold = tokio::select! {
        sold = sell(args, lock_url, shop_at, &shop, &mut waiting_for_lock) => sold,
        number = caught.next() => Ok(signals::stopped("demo", number)),
    };
    for report in waiting_for_lock {
        print_report(&report, args.json);
    }
    // Ctrl-C from a terminal reaches the workers too, and the sale may end on a worker
    // killed by it before the demo reads its own: the signal is what ended it.
    if sold.is_err()
        && let Ok(number) = tokio::time::timeout(SIGNAL_GRACE, caught.next()).await
    {
        sold = Ok(signals::stopped("demo", number));
    }
    // Workers a stop left running release their locks and exit before the demo does.
    worker_task::wait_for_stopped(WORKERS_STOP_WITHIN).await;
    if !args.keep {
        // The shop file is removed only when the demo chose it.
        let file = args.shop.is_none().then(|| PathBuf::from(shop_at));
        // A second signal ends the demo at once (a table another session keeps locked
        // would hold up its removal), the shop left as it is.
        let removed = tokio::select! {
            removed = shop.remove(file.as_deref()) => removed,
            number = caught.next() => {
                errln!("distlock demo: stopped again by signal {number}; the shop is left at {}", distlock::redact_url(shop_at));
                return Ok(signals::exit_code(number));
            }
        };
        // A failed or stopped run's outcome comes first; a failed clean-up after it is only
        // told.
        let stopped = matches!(sold, Ok(code) if code > 128);
        match (&sold, removed) {
            (Ok(_), Err(err)) if !stopped => return Err(err),
            (_, Err(err)) => errln!("distlock demo: could not remove the shop: {err}"),
            (_, Ok(())) => {}
        }
    }
    sold
}

/// How long after a sale that failed the demo looks for the signal that may have failed it.
const SIGNAL_GRACE: Duration = Duration::from_millis(200);

/// How long a stopped demo waits for its workers to release their locks and exit.
const WORKERS_STOP_WITHIN: Duration = Duration::from_secs(5);

/// Runs every strategy against `shop` (at `shop_at`) and prints what each sold; the rows
/// of those that ran before `lock` wait in `waiting_for_lock` until it has run.
async fn sell(
    args: &DemoArgs,
    lock_url: &str,
    shop_at: &str,
    shop: &Shop,
    waiting_for_lock: &mut Vec<StrategyReport>,
) -> Result<u8> {
    if !args.json {
        outln!(
            "selling {} units to {} buyers from {} worker processes ({} buyers at once in each)",
            args.stock,
            args.buyers,
            args.workers,
            args.concurrency
        );
        outln!(
            "locks: {}   shop: {}",
            distlock::redact_url(lock_url),
            distlock::redact_url(shop_at)
        );
        outln!(
            "{:<18} {:>7} {:>9} {:>11} {:>9} {:>8} {:>8}",
            "strategy",
            "orders",
            "oversold",
            "stock left",
            "buys/s",
            "vs lock",
            "retries"
        );
    }
    let bar = progress::bar(args.strategies.len() as u64, "strategies");
    // Each strategy's buys/s is told beside `lock`'s: those that run before it wait for it.
    let lock_runs = args.strategies.iter().any(|s| s == "lock");
    let mut lock_rate = None;
    for strategy in &args.strategies {
        bar.set_message(strategy.clone());
        let segments = match strategy.as_str() {
            "segmented" => segments_of(args),
            _ => 1,
        };
        shop.restock(args.stock, segments).await?;
        let started = Instant::now();
        let reports = run_workers(args, lock_url, shop_at, strategy).await?;
        let elapsed = started.elapsed();
        let (orders, stock_left) = shop.tally().await?;
        let buys_per_s = orders as f64 / elapsed.as_secs_f64();
        if strategy == "lock" {
            lock_rate = Some(buys_per_s);
        }
        let report = StrategyReport {
            strategy: strategy.clone(),
            stock: args.stock,
            buyers: args.buyers,
            workers: args.workers,
            orders,
            oversold: (orders - i64::from(args.stock)).max(0),
            stock_left,
            buys_per_s,
            vs_lock: lock_rate.map(|rate| buys_per_s / rate),
            retries: reports.iter().map(|r| r.retries).sum(),
            elapsed_s: elapsed.as_secs_f64(),
        };
        bar.inc(1);
        if lock_runs && lock_rate.is_none() {
            waiting_for_lock.push(report);
            continue;
        }
        for mut earlier in waiting_for_lock.drain(..) {
            earlier.vs_lock = lock_rate.map(|rate| earlier.buys_per_s / rate);
            bar.suspend(|| print_report(&earlier, args.json));
        }
        bar.suspend(|| print_report(&report, args.json));
    }
    bar.finish_and_clear();
    Ok(0)
}

fn print_report(report: &StrategyReport, json: bool) {
    if json {
        outln!(
            "{}",
            serde_json::to_string(report).expect("reports serialise")
        );
    } else {
        let vs_lock = report
            .vs_lock
            .map_or_else(|| "-".to_owned(), |ratio| format!("{ratio:.1}x"));
        outln!(
            "{:<18} {:>7} {:>9} {:>11} {:>9.0} {:>8} {:>8}",
            report.strategy,
            report.orders,
            report.oversold,
            report.stock_left,
            report.buys_per_s,
            vs_lock,
            report.retries
        );
    }
}

/// How many segments `segmented` splits the stock into: `--segments`, else 5 (fewer for a
/// stock of fewer units).
fn segments_of(args: &DemoArgs) -> u32 {
    args.segments
        .unwrap_or(DEFAULT_SEGMENTS.min(args.stock))
        .max(1)
}

/// Where the shop lives unless `--shop` says: in the locks' own PostgreSQL or MySQL
/// database (without distlock's own URL parameters), or in `shop.db` beside the SQLite lock
/// file, or in the state directory.
fn default_shop(lock_url: &str) -> Result<String> {
    if matches!(
        Place::of(lock_url),
        Ok(Place::Sql(Dialect::Postgres | Dialect::MySql))
    ) {
        let url = distlock::Url::parse(lock_url)
            .map_err(|e| Error::invalid(format!("bad lock URL: {e}")))?;
        let (_, url) = distlock::sql::Mode::split(&url)?;
        return Ok(url.into());
    }
    let file = match sqlite_file(lock_url).and_then(|p| p.parent().map(|d| d.to_path_buf())) {
        Some(dir) if !dir.as_os_str().is_empty() => dir.join("shop.db"),
        Some(_) => PathBuf::from("shop.db"),
        None => state_dir()?.join("shop.db"),
    };
    Ok(file.display().to_string())
}

async fn run_workers(
    args: &DemoArgs,
    lock_url: &str,
    shop: &str,
    strategy: &str,
) -> Result<Vec<WorkerReport>> {
    let exe = std::env::current_exe()
        .map_err(|e| Error::invalid(format!("cannot find the distlock binary: {e}")))?;
    let mut children = Vec::new();
    for worker in 0..args.workers {
        let buyers = args.buyers / args.workers + u32::from(worker < args.buyers % args.workers);
        let mut command = tokio::process::Command::new(&exe);
        command.arg("demo-worker");
        let task = DemoTask {
            lock_url: lock_url.to_owned(),
            shop: shop.to_owned(),
            strategy: strategy.to_owned(),
            buyers,
            concurrency: args.concurrency,
            segments: segments_of(args),
        };
        let child = worker_task::start(command, &task, true).await?;
        children.push(child);
    }
    let mut reports = Vec::new();
    for mut child in children {
        let mut out = String::new();
        if let Some(mut stdout) = child.stdout.take() {
            let _ = tokio::time::timeout(WORKER_LIMIT, stdout.read_to_string(&mut out)).await;
        }
        let status = tokio::time::timeout(WORKER_LIMIT, child.wait())
            .await
            .map_err(|_| Error::new(distlock::ErrorKind::Timeout, "a demo worker did not finish"))?
            .map_err(|e| Error::invalid(format!("lost a demo worker: {e}")))?;
        if !status.success() {
            return Err(Error::new(
                distlock::ErrorKind::Backend,
                format!("a demo worker failed ({status})"),
            ));
        }
        let report = serde_json::from_str(out.trim()).map_err(|e| {
            Error::new(
                distlock::ErrorKind::Backend,
                format!("unreadable worker report: {e}"),
            )
        })?;
        reports.push(report);
    }
    Ok(reports)
}

/// What a demo worker is to do (secrets included, so it has no `Debug`).
#[derive(Serialize, Deserialize)]
struct DemoTask {
    lock_url: String,
    shop: String,
    strategy: String,
    buyers: u32,
    concurrency: u32,
    segments: u32,
}

/// One worker process: `buyers` buyers, `concurrency` at a time, each buying once; its
/// task comes on stdin.
pub async fn worker() -> Result<u8> {
    let args: DemoTask = worker_task::receive()?;
    // Ctrl-C from a terminal reaches the workers too, and a demo stopped early sends them
    // SIGTERM: the buyers stop, and what they held or waited for is released or withdrawn
    // before the worker exits, not left to its TTL to stall the next demo.
    let mut caught = Caught::listen(&signals::ending());
    let shop = Shop::open(&args.shop, args.concurrency).await?;
    let client = match LOCKING.contains(&args.strategy.as_str()) {
        true => Some(open_client(&args.lock_url).await?),
        false => None,
    };
    let mutex = client
        .as_ref()
        .filter(|_| args.strategy == "lock")
        .map(|client| client.mutex("demo/shop/product-1"));
    let segments: Arc<[distlock::Mutex]> = match (&client, args.strategy.as_str()) {
        (Some(client), "segmented") => (0..args.segments)
            .map(|at| client.mutex(format!("demo/shop/product-1/segment-{at}")))
            .collect(),
        _ => Arc::from([]),
    };
    let local = Arc::new(tokio::sync::Mutex::new(()));
    let next = Arc::new(std::sync::atomic::AtomicU32::new(0));
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..args.concurrency.min(args.buyers) {
        let (shop, mutex, local, next) = (shop.clone(), mutex.clone(), local.clone(), next.clone());
        let (strategy, buyers, segments) = (args.strategy.clone(), args.buyers, segments.clone());
        tasks.spawn(async move {
            let mut report = WorkerReport::default();
            let mut emptied = vec![false; segments.len()];
            while next.fetch_add(1, std::sync::atomic::Ordering::SeqCst) < buyers {
                let sale = match (strategy.as_str(), &mutex) {
                    ("none", _) => shop.sell_unguarded("none").await?,
                    ("local-mutex", _) => {
                        let _held = local.lock().await;
                        shop.sell_unguarded("local-mutex").await?
                    }
                    ("redis-decr", _) => shop.sell_decr().await?,
                    ("atomic-script", _) => shop.sell_script().await?,
                    ("select-for-update", _) => shop.sell_for_update().await?,
                    ("optimistic", _) => {
                        let (sale, retries) = shop.sell_optimistic().await?;
                        report.retries += retries;
                        sale
                    }
                    ("lock", Some(mutex)) => shop.sell_locked(mutex).await?,
                    ("segmented", _) => {
                        let start = rand::random_range(0..segments.len().max(1));
                        shop.sell_segmented(&segments, start, &mut emptied).await?
                    }
                    (other, _) => {
                        return Err(Error::invalid(format!("unknown strategy `{other}`")));
                    }
                };
                match sale {
                    Sale::Sold => report.sold += 1,
                    Sale::SoldOut => report.sold_out += 1,
                }
            }
            Ok::<_, Error>(report)
        });
    }
    let bought = tokio::select! {
        bought = add_up(&mut tasks) => bought.map(Ok),
        number = caught.next() => Ok(Err(number)),
    };
    // The buyers still at work (after a signal, or another's failure) stop, dropping what
    // they hold or wait for; the client then releases and withdraws it.
    tasks.shutdown().await;
    if let Some(client) = &client
        && let Err(err) = client.close().await
    {
        errln!("distlock demo: a worker's locks were not all released ({err}); they expire");
    }
    match bought? {
        Ok(total) => {
            outln!(
                "{}",
                serde_json::to_string(&total).expect("reports serialise")
            );
            Ok(0)
        }
        // The demo tells of the signal; its workers stop quietly.
        Err(number) => Ok(signals::exit_code(number)),
    }
}

/// The reports of the buyer `tasks` added up, or the first failure.
async fn add_up(tasks: &mut tokio::task::JoinSet<Result<WorkerReport>>) -> Result<WorkerReport> {
    let mut total = WorkerReport::default();
    while let Some(joined) = tasks.join_next().await {
        let report = joined.map_err(|e| {
            Error::new(
                distlock::ErrorKind::Backend,
                format!("a buyer task failed: {e}"),
            )
        })??;
        total.sold += report.sold;
        total.sold_out += report.sold_out;
        total.retries += report.retries;
    }
    Ok(total)
}
