//! The contended phase: C clients on one name, as tasks of the bench's own client or as
//! worker processes (`--processes`), and what their grants come to in fencing-token order.

use std::collections::HashMap;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use distlock::{Client, Error, ErrorKind, Result};
use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio::io::AsyncReadExt;
use tokio::task::JoinSet;

use super::stats::Samples;
use super::{every_result, on_worker};
use crate::args::BenchArgs;
use crate::location::open_client;
use crate::output::outln;
use crate::signals::{self, Caught};
use crate::worker_task;

/// One grant seen by a contending client.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Acquisition {
    client: u32,
    token: u64,
    wait_ns: u64,
    /// Whether the grant was gone when the client released it: a hand-off the client did
    /// not confirm in time (its runtime or connection too busy) lapsed and passed on.
    #[serde(default)]
    lost: bool,
}

/// C clients (`--clients`) contend on `name` for `--duration`, as tasks of `client` or as
/// worker processes on `url` (`--processes`).
pub(super) async fn measure(
    (client, url): (&Client, &str),
    name: &str,
    args: &BenchArgs,
) -> Result<Contended> {
    let acquisitions = match args.processes {
        true => contend_in_processes(url, name, args).await?,
        false => contend_in_tasks(client, name, args.clients, args.duration).await?,
    };
    Ok(summarize(
        &acquisitions,
        args.clients,
        args.processes,
        args.duration,
    ))
}

/// Each client loops: lock, note the token, release; until `duration` passes. A grant
/// found gone at its release is counted as lost, not taken for a failed bench: the lock
/// kept its promise (the core logs each such loss as a warning).
async fn contend(mutex: distlock::Mutex, client: u32, end: Instant) -> Result<Vec<Acquisition>> {
    let mut seen = Vec::new();
    while Instant::now() < end {
        let started = Instant::now();
        let guard = match mutex
            .lock_timeout(end.saturating_duration_since(Instant::now()))
            .await
        {
            Ok(guard) => guard,
            Err(err) if err.kind() == ErrorKind::Timeout => break,
            Err(err) => return Err(err),
        };
        let (token, wait_ns) = (guard.fencing_token(), started.elapsed().as_nanos() as u64);
        let lost = match guard.release().await {
            Ok(()) => false,
            Err(err) if matches!(err.kind(), ErrorKind::NotHeld | ErrorKind::LockLost) => true,
            Err(err) => return Err(err),
        };
        seen.push(Acquisition {
            client,
            token,
            wait_ns,
            lost,
        });
    }
    Ok(seen)
}

async fn contend_in_tasks(
    client: &Client,
    name: &str,
    clients: u32,
    duration: Duration,
) -> Result<Vec<Acquisition>> {
    let end = Instant::now() + duration;
    // The clients stop as one fails, or as this is dropped (a stopped bench).
    let mut contending = JoinSet::new();
    for i in 0..clients {
        contending.spawn(contend(client.mutex(name), i, end));
    }
    Ok(every_result(contending).await?.concat())
}

async fn contend_in_processes(url: &str, name: &str, args: &BenchArgs) -> Result<Vec<Acquisition>> {
    let (clients, duration) = (args.clients, args.duration);
    let exe = std::env::current_exe()
        .map_err(|e| Error::invalid(format!("cannot find the distlock binary: {e}")))?;
    let start_at_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
        + 1500;
    let mut children = Vec::new();
    for client in 0..clients {
        let mut command = tokio::process::Command::new(&exe);
        command
            .arg("bench-worker")
            .args(["--runtime", args.runtime.as_str()]);
        let task = BenchTask {
            lock_url: url.to_owned(),
            name: name.to_owned(),
            client,
            start_at_ms,
            duration,
        };
        let child = worker_task::start(command, &task, true).await?;
        children.push(child);
    }
    let limit = duration + Duration::from_secs(60);
    let mut all = Vec::new();
    for mut child in children {
        let mut out = String::new();
        if let Some(mut stdout) = child.stdout.take() {
            let _ = tokio::time::timeout(limit, stdout.read_to_string(&mut out)).await;
        }
        let status = child
            .wait()
            .await
            .map_err(|e| Error::invalid(format!("lost a bench worker: {e}")))?;
        if !status.success() {
            return Err(Error::new(
                ErrorKind::Backend,
                format!("a bench worker failed ({status})"),
            ));
        }
        let seen: Vec<Acquisition> = serde_json::from_str(out.trim()).map_err(|e| {
            Error::new(
                ErrorKind::Backend,
                format!("unreadable bench worker report: {e}"),
            )
        })?;
        all.extend(seen);
    }
    Ok(all)
}

/// One client process of `bench --processes`: contends from `start_at_ms` for `duration`
/// and prints its acquisitions as JSON.
pub async fn worker() -> Result<u8> {
    on_worker(run_worker()).await
}

/// What a bench worker is to do (the URL may hold a password, so it has no `Debug`).
#[derive(Serialize, Deserialize)]
struct BenchTask {
    lock_url: String,
    name: String,
    client: u32,
    /// Unix time in ms when to start, so all workers start together.
    start_at_ms: u64,
    duration: Duration,
}

async fn run_worker() -> Result<u8> {
    let args: BenchTask = worker_task::receive()?;
    let client = open_client(&args.lock_url).await?;
    let mutex = client.mutex(&args.name);
    let now_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0);
    tokio::time::sleep(Duration::from_millis(
        args.start_at_ms.saturating_sub(now_ms),
    ))
    .await;
    // A bench stopped early (Ctrl-C, or another worker failed) sends its workers SIGTERM
    // (a terminal's Ctrl-C reaches them too): the contention stops.
    let mut caught = Caught::listen(&signals::ending());
    let seen = tokio::select! {
        seen = contend(mutex, args.client, Instant::now() + args.duration) => seen.map(Ok),
        number = caught.next() => Ok(Err(number)),
    };
    // Before the runtime ends with the process: the wait the deadline or a signal cut
    // short withdraws, and a release still in flight lands (the next run contends on the
    // same name).
    let closed = client.close().await;
    let (seen, ()) = (seen?, closed?);
    let seen = match seen {
        Ok(seen) => seen,
        Err(number) => return Ok(signals::exit_code(number)),
    };
    outln!(
        "{}",
        serde_json::to_string(&seen).expect("acquisitions serialise")
    );
    Ok(0)
}

/// What the contended phase came to.
pub(super) struct Contended {
    clients: u32,
    processes: bool,
    pub(super) acquisitions_per_s: f64,
    pub(super) transfers_per_s: f64,
    pub(super) wait_p50_us: f64,
    wait_p99_us: f64,
    per_client_min: u64,
    per_client_max: u64,
    grants_lost: u64,
}

impl Contended {
    pub(super) fn into_json(self) -> serde_json::Map<String, serde_json::Value> {
        let value = json!({
            "clients": self.clients,
            "processes": self.processes,
            "acquisitions_per_s": self.acquisitions_per_s,
            "transfers_per_s": self.transfers_per_s,
            "wait_p50_us": self.wait_p50_us,
            "wait_p99_us": self.wait_p99_us,
            "per_client_min": self.per_client_min,
            "per_client_max": self.per_client_max,
            "grants_lost": self.grants_lost,
        });
        match value {
            serde_json::Value::Object(map) => map,
            _ => serde_json::Map::new(),
        }
    }
}

/// Orders every grant by fencing token (the backend's own grant order) and counts the
/// hand-offs between different clients.
fn summarize(
    acquisitions: &[Acquisition],
    clients: u32,
    processes: bool,
    duration: Duration,
) -> Contended {
    let mut ordered = acquisitions.to_vec();
    ordered.sort_by_key(|a| a.token);
    let transfers = ordered
        .windows(2)
        .filter(|w| w[0].client != w[1].client)
        .count();
    let mut per_client: HashMap<u32, u64> = (0..clients).map(|c| (c, 0)).collect();
    for a in &ordered {
        *per_client.entry(a.client).or_default() += 1;
    }
    let mut waits = Samples::default();
    waits.extend_ns(ordered.iter().map(|a| a.wait_ns));
    let secs = duration.as_secs_f64();
    Contended {
        clients,
        processes,
        acquisitions_per_s: ordered.len() as f64 / secs,
        transfers_per_s: transfers as f64 / secs,
        wait_p50_us: waits.percentile(50.0),
        wait_p99_us: waits.percentile(99.0),
        per_client_min: per_client.values().copied().min().unwrap_or(0),
        per_client_max: per_client.values().copied().max().unwrap_or(0),
        grants_lost: ordered.iter().filter(|a| a.lost).count() as u64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transfers_count_hand_offs_in_token_order() {
        let a = |client, token| Acquisition {
            client,
            token,
            wait_ns: 10,
            lost: token == 4,
        };
        let seen = [a(0, 3), a(1, 1), a(0, 2), a(0, 4), a(1, 5)];
        let c = summarize(&seen, 3, false, Duration::from_secs(1));
        assert_eq!(c.transfers_per_s, 2.0);
        assert_eq!(c.per_client_min, 0, "client 2 never got the lock");
        assert_eq!(c.per_client_max, 3);
        assert_eq!(c.grants_lost, 1);
    }
}
