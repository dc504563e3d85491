//! `distlock bench`: lock latency and throughput, each beside the backend's own floor
//! measured in the same run.

mod contended;
mod median;
mod names;
mod stats;
mod uncontended;

use std::time::{Duration, Instant};

use distlock::backend::{Floor, backend_of};
use distlock::{Client, Error, ErrorKind, Result};
use serde_json::json;
use tokio::task::JoinSet;

use crate::args::BenchArgs;
use crate::location::{lock_url, open_client, refuse_process_local};
use crate::output::{errln, outln};
use crate::progress;
use crate::signals::{self, Caught};
use crate::worker_task;
pub use contended::worker;
use names::BenchNames;
use stats::{Samples, ratio};

/// The shortest phase that measures anything, and the longest a bench is meant to run.
const MIN_PHASE: Duration = Duration::from_millis(10);
const MAX_PHASE: Duration = Duration::from_secs(3600);
/// The most client processes `--processes` starts.
const MAX_PROCESSES: u32 = 256;

pub async fn bench(url: &Option<String>, args: BenchArgs) -> Result<u8> {
    if let Some(kind) = args.cycles_of {
        let url = url.clone();
        return on_worker(async move { uncontended::count_cycles(&url, kind, &args).await }).await;
    }
    on_worker(run_bench(url.clone(), args)).await
}

/// How long a failed or stopped bench waits for its workers to release their locks and
/// exit.
const WORKERS_STOP_WITHIN: Duration = Duration::from_secs(5);

/// Runs `job` as a task of the runtime, where a service's own tasks take their locks: on a
/// multi-thread runtime, on its worker threads rather than on the thread blocked on the
/// runtime, where every answer would cost a wake-up of another thread, in the floor and the
/// lock figures alike.
async fn on_worker<F>(job: F) -> Result<u8>
where
    F: std::future::Future<Output = Result<u8>> + Send + 'static,
{
    tokio::spawn(job)
        .await
        .map_err(|e| Error::new(ErrorKind::Backend, format!("the bench task failed: {e}")))?
}

async fn run_bench(url: Option<String>, args: BenchArgs) -> Result<u8> {
    let url = &url;
    if !(MIN_PHASE..=MAX_PHASE).contains(&args.duration) {
        return Err(Error::invalid(format!(
            "--duration must be {} to {} per phase, got {}",
            humantime::format_duration(MIN_PHASE),
            humantime::format_duration(MAX_PHASE),
            humantime::format_duration(args.duration)
        )));
    }
    if args.processes && args.clients > MAX_PROCESSES {
        return Err(Error::invalid(format!(
            "--processes starts one process per client: at most {MAX_PROCESSES}, got {}",
            args.clients
        )));
    }
    let urls: Vec<String> = std::iter::once(lock_url(url)?)
        .chain(args.also.iter().cloned())
        .collect();
    let mut clients = Vec::new();
    for url in &urls {
        let client = open_client(url).await?;
        if args.processes {
            refuse_process_local(
                &client,
                "--processes runs its clients as separate processes",
            )?;
        }
        clients.push(client);
    }
    // A signal that would end the bench (Ctrl-C, a supervisor's SIGTERM) stops its phases
    // instead: what their clients hold is released and their waits withdrawn, and the
    // bench's names are forgotten, before it exits. A second signal ends it at once.
    let mut caught = Caught::listen(&signals::ending());
    let bar = progress::bar(4 * u64::from(args.runs) * urls.len() as u64, "floor");
    let names: Vec<BenchNames> = urls.iter().map(|_| BenchNames::new(args.clients)).collect();
    let measured = tokio::select! {
        runs = every_run(&clients, &urls, &names, &args, &bar) => runs.map(Ok),
        number = caught.next() => Ok(Err(number)),
    };
    bar.set_message("tidying up");
    let tidied = async {
        // The workers of a run that failed or was stopped (see `contend_in_processes`)
        // release their locks and exit first.
        worker_task::wait_for_stopped(WORKERS_STOP_WITHIN).await;
        tokio::time::sleep(names::IDLE).await;
        for (client, names) in clients.iter().zip(&names) {
            names.tidy_up(client).await;
        }
        for client in &clients {
            if let Err(err) = client.close().await {
                errln!("distlock bench: {err}");
            }
        }
    };
    let again = tokio::select! {
        () = tidied => None,
        number = caught.next() => Some(number),
    };
    bar.finish_and_clear();
    let runs = match (measured, again) {
        (_, Some(number)) => {
            errln!("distlock bench: stopped again by signal {number}, before it tidied up");
            return Ok(signals::exit_code(number));
        }
        (Ok(Err(number)), None) => return Ok(signals::stopped("bench", number)),
        (Err(err), None) => return Err(err),
        (Ok(Ok(runs)), None) => runs,
    };
    let reports: Vec<serde_json::Value> = runs.iter().map(|r| median::median_report(r)).collect();
    for report in &reports {
        if args.json {
            outln!("{report}");
        } else {
            print_table(report);
        }
    }
    if reports.len() > 1 && !args.json {
        print_side_by_side(&reports);
    }
    Ok(0)
}

/// Every run of every phase, on each store in turn: one list of runs per store.
async fn every_run(
    clients: &[Client],
    urls: &[String],
    names: &[BenchNames],
    args: &BenchArgs,
    bar: &indicatif::ProgressBar,
) -> Result<Vec<Vec<serde_json::Value>>> {
    let mut runs: Vec<Vec<serde_json::Value>> = vec![Vec::new(); urls.len()];
    for _ in 0..args.runs {
        for (((client, url), names), seen) in clients.iter().zip(urls).zip(names).zip(&mut runs) {
            seen.push(one_run((client, url, names), args, bar).await?);
        }
    }
    Ok(runs)
}

/// Every phase once: the floor, then each lock figure beside it.
async fn one_run(
    (client, url, names): (&Client, &str, &BenchNames),
    args: &BenchArgs,
    bar: &indicatif::ProgressBar,
) -> Result<serde_json::Value> {
    bar.set_message("floor");
    let floor = measure_floor(client, args.duration).await?;
    let floor_concurrent = measure_floor_concurrent(client, args.clients, args.duration).await?;
    bar.inc(1);
    bar.set_message("uncontended");
    let uncontended = uncontended::measure(client, names, args.duration, args.new_names).await?;
    bar.inc(1);
    bar.set_message("contended");
    let contended = contended::measure((client, url), &names.contended(), args).await?;
    bar.inc(1);
    bar.set_message("many names");
    let many = measure_many_names(client, names, args.clients, args.duration).await?;
    bar.inc(1);

    let floor_p50 = floor.percentile(50.0);
    let floor_ops = floor.len() as f64 / args.duration.as_secs_f64();
    let mut contended_json = json!({
        "transfers_vs_floor_ops": ratio(contended.transfers_per_s, floor_ops),
        "acquisitions_vs_floor_ops": ratio(contended.acquisitions_per_s, floor_ops),
        "wait_p50_vs_floor_p50": ratio(contended.wait_p50_us, floor_p50),
    });
    if let serde_json::Value::Object(map) = &mut contended_json {
        map.extend(contended.into_json());
    }
    let uncontended_json = uncontended.to_json(client, floor_p50, floor_ops)?;
    Ok(json!({
        "backend": client.scheme(),
        "runtime": args.runtime.as_str(),
        "url": distlock::redact_url(url),
        "duration_s": args.duration.as_secs_f64(),
        "floor": {
            "op": floor_of(client)?.op(),
            "p50_us": floor_p50,
            "p99_us": floor.percentile(99.0),
            "ops_per_s": floor_ops,
            "concurrent_tasks": args.clients,
            "concurrent_ops_per_s": floor_concurrent,
        },
        "uncontended": uncontended_json,
        "contended": contended_json,
        "many_names": {
            "tasks": args.clients,
            "cycles_per_s": many,
            "vs_floor_ops": ratio(many, floor_ops),
            "vs_concurrent_floor_ops": ratio(many, floor_concurrent),
        },
    }))
}

/// One line per backend with the ratios to its own floor, for comparing them.
fn print_side_by_side(reports: &[serde_json::Value]) {
    outln!("side by side (each against its own floor):");
    for r in reports {
        outln!(
            "  {:<48} uncontended p50 {:>6.2}x   contended transfers {:>6.3}x   many names {:>5.2}x",
            r["url"].as_str().unwrap_or("?"),
            r["uncontended"]["p50_vs_floor_p50"].as_f64().unwrap_or(0.0),
            r["contended"]["transfers_vs_floor_ops"]
                .as_f64()
                .unwrap_or(0.0),
            r["many_names"]["vs_floor_ops"].as_f64().unwrap_or(0.0),
        );
    }
}

fn print_table(r: &serde_json::Value) {
    let f = |path: &[&str]| {
        path.iter()
            .fold(r, |v, key| &v[*key])
            .as_f64()
            .unwrap_or(0.0)
    };
    let runs = match r["runs"].as_u64() {
        Some(1) => "one run".to_owned(),
        Some(n) => format!("medians of {n} runs"),
        None => "? runs".to_owned(),
    };
    outln!(
        "backend {}  ({}), {} runtime, {runs} of {} s per phase",
        r["backend"].as_str().unwrap_or("?"),
        r["url"].as_str().unwrap_or("?"),
        r["runtime"].as_str().unwrap_or("?"),
        r["duration_s"]
    );
    outln!(
        "floor        {:<32} p50 {:>9.2} us   {:>10.0} ops/s",
        r["floor"]["op"].as_str().unwrap_or("?"),
        f(&["floor", "p50_us"]),
        f(&["floor", "ops_per_s"])
    );
    outln!(
        "uncontended  acquire+release                  p50 {:>9.2} us ({:.2}x floor)  p99 {:.2} us  {:.0} cycles/s ({:.2}x floor)",
        f(&["uncontended", "p50_us"]),
        f(&["uncontended", "p50_vs_floor_p50"]),
        f(&["uncontended", "p99_us"]),
        f(&["uncontended", "cycles_per_s"]),
        f(&["uncontended", "cycles_vs_floor_ops"])
    );
    if let Some(op) = r["uncontended"]["minimal_cycle_op"].as_str() {
        outln!(
            "minimal lock {:<32} p50 {:>9.2} us   acquire+release p50 is {:.2}x this, measured in turns",
            op,
            f(&["uncontended", "minimal_cycle_p50_us"]),
            f(&["uncontended", "p50_vs_minimal_cycle_p50"]),
        );
    }
    if r["uncontended"]["new_names"].is_object() {
        outln!(
            "new names    acquire+release, a new name each p50 {:>9.2} us ({:.2}x minimal lock)  p99 {:.2} us  {:.0} cycles/s ({:.2}x minimal lock's)",
            f(&["uncontended", "new_names", "p50_us"]),
            f(&["uncontended", "new_names", "p50_vs_minimal_cycle_p50"]),
            f(&["uncontended", "new_names", "p99_us"]),
            f(&["uncontended", "new_names", "cycles_per_s"]),
            f(&["uncontended", "new_names", "cycles_vs_minimal_cycles"]),
        );
    }
    outln!(
        "contended    {} clients{} on one name     {:.0} acquisitions/s, {:.0} transfers/s ({:.3}x floor ops), wait p50 {:.0} us p99 {:.0} us, per client {}..{}{}",
        f(&["contended", "clients"]),
        if r["contended"]["processes"].as_bool().unwrap_or(false) {
            " (processes)"
        } else {
            ""
        },
        f(&["contended", "acquisitions_per_s"]),
        f(&["contended", "transfers_per_s"]),
        f(&["contended", "transfers_vs_floor_ops"]),
        f(&["contended", "wait_p50_us"]),
        f(&["contended", "wait_p99_us"]),
        f(&["contended", "per_client_min"]),
        f(&["contended", "per_client_max"]),
        match f(&["contended", "grants_lost"]) {
            0.0 => String::new(),
            lost => format!(", grants lost: {lost} (gone when released)"),
        }
    );
    outln!(
        "many names   {} tasks, one name each         {:.0} cycles/s ({:.2}x floor ops, {:.2}x the floor at that concurrency: {:.0} ops/s)",
        f(&["many_names", "tasks"]),
        f(&["many_names", "cycles_per_s"]),
        f(&["many_names", "vs_floor_ops"]),
        f(&["many_names", "vs_concurrent_floor_ops"]),
        f(&["floor", "concurrent_ops_per_s"])
    );
}

/// The floor the backend offers to measure its locks against.
fn floor_of(client: &Client) -> Result<&dyn Floor> {
    backend_of(client).floor().ok_or_else(|| {
        Error::new(
            ErrorKind::Unsupported,
            format!(
                "the {} backend offers no floor to measure its locks against",
                client.scheme()
            ),
        )
    })
}

async fn measure_floor(client: &Client, duration: Duration) -> Result<Samples> {
    let floor = floor_of(client)?;
    let mut samples = Samples::default();
    let end = Instant::now() + duration;
    while Instant::now() < end {
        let started = Instant::now();
        floor.round().await?;
        samples.push(started.elapsed());
    }
    Ok(samples)
}

/// The floor's throughput with `tasks` running it at once, over one shared deadline.
async fn measure_floor_concurrent(client: &Client, tasks: u32, duration: Duration) -> Result<f64> {
    rounds_per_second(tasks, duration, |_| {
        let backend = backend_of(client).clone();
        move || {
            let backend = backend.clone();
            async move {
                match backend.floor() {
                    Some(floor) => floor.round().await,
                    None => Ok(()),
                }
            }
        }
    })
    .await
}

/// What every task of `tasks` returned, once all have ended; the first failure as soon as
/// it comes, the tasks still running then aborted (the set drops).
async fn every_result<T: 'static>(mut tasks: JoinSet<Result<T>>) -> Result<Vec<T>> {
    let mut results = Vec::with_capacity(tasks.len());
    while let Some(ended) = tasks.join_next().await {
        results.push(ended.map_err(|e| Error::new(ErrorKind::Backend, e.to_string()))??);
    }
    Ok(results)
}

/// Runs `tasks` loops, each repeating the round `make` gives it, until one shared deadline;
/// rounds per second of wall time until the last loop ended. The loops stop as one fails,
/// or as this is dropped (a stopped bench).
async fn rounds_per_second<R, F>(
    tasks: u32,
    duration: Duration,
    mut make: impl FnMut(u32) -> R,
) -> Result<f64>
where
    R: Fn() -> F + Send + 'static,
    F: std::future::Future<Output = Result<()>> + Send,
{
    let started = Instant::now();
    let end = started + duration;
    let mut loops = JoinSet::new();
    for i in 0..tasks {
        let round = make(i);
        loops.spawn(async move {
            let mut rounds = 0u64;
            while Instant::now() < end {
                round().await?;
                rounds += 1;
            }
            Ok::<_, Error>(rounds)
        });
    }
    let total: u64 = every_result(loops).await?.into_iter().sum();
    Ok(total as f64 / started.elapsed().as_secs_f64())
}

/// C tasks, each on a name of its own, all until one shared deadline; the rate is over the
/// wall time until the last task finished.
async fn measure_many_names(
    client: &Client,
    names: &BenchNames,
    tasks: u32,
    duration: Duration,
) -> Result<f64> {
    rounds_per_second(tasks, duration, |i| {
        let mutex = client.mutex(names.many(i));
        move || {
            let mutex = mutex.clone();
            async move { mutex.lock().await?.release().await }
        }
    })
    .await
}
