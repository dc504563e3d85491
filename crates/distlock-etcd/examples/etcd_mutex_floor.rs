//! The contended floor of etcd's own mutex: N processes lock and unlock one name as etcd's
//! `concurrency.Mutex` (and so `etcdctl lock`) does, with nothing of distlock's — no
//! holder record, no fencing stamp, no session health — to tell what any client of that
//! layout can reach on a given etcd and machine. `distlock bench --processes` on the same
//! server measures distlock beside it.
//!
//! ```text
//! cargo run --release -p distlock-etcd --example etcd_mutex_floor -- 127.0.0.1:2379 now 32 3s
//! ```
//!
//! The second argument is how a waiter watches the key ahead of it: `from-listing` watches
//! from the revision of the read that found it, as etcd's `waitDeletes` does (etcd serves
//! such a watch from a loop that runs every 100 ms once anything was written since), `now`
//! watches from the current revision and reads the key once the watch stands, as distlock
//! does. Both watch for deletions only (etcd's `waitDelete` takes every event and looks for
//! the deletion): the same wake-ups.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use etcd_client::{
    Client, Compare, CompareOp, EventType, GetOptions, PutOptions, SortOrder, SortTarget, Txn,
    TxnOp, TxnOpResponse, WatchFilterType, WatchOptions,
};

/// Where the processes' contender keys go.
const PREFIX: &str = "etcd-mutex-floor/lock/";

type Failure = Box<dyn std::error::Error>;

/// Seconds since the epoch: the moment every process starts at.
fn epoch_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |since| since.as_secs_f64())
}

/// Waits until `key`, found by a read at revision `read_at`, is deleted.
async fn wait_deleted(
    client: &mut Client,
    key: &str,
    read_at: i64,
    from_listing: bool,
) -> Result<(), Failure> {
    let mut options = WatchOptions::new().with_filters([WatchFilterType::NoPut]);
    if from_listing {
        options = options.with_start_revision(read_at + 1);
    }
    let mut stream = client.watch_client().watch(key, Some(options)).await?;
    if !from_listing {
        stream.message().await?;
        if client.kv_client().get(key, None).await?.kvs().is_empty() {
            return Ok(());
        }
    }
    while let Some(answer) = stream.message().await? {
        if answer
            .events()
            .iter()
            .any(|event| event.event_type() == EventType::Delete)
        {
            return Ok(());
        }
    }
    Err("the watch ended".into())
}

/// The read of the first contender under the prefix, by create revision.
fn first_contender() -> TxnOp {
    let options = GetOptions::new()
        .with_prefix()
        .with_sort(SortTarget::Create, SortOrder::Ascend)
        .with_limit(1);
    TxnOp::get(PREFIX, Some(options))
}

/// One process: locks and unlocks until `seconds` after `start`; how many times.
async fn contend(
    endpoint: &str,
    from_listing: bool,
    start: f64,
    seconds: f64,
) -> Result<u64, Failure> {
    let mut client = Client::connect([endpoint], None).await?;
    let lease = client.lease_client().grant(30, None).await?.id();
    let key = format!("{PREFIX}{lease:x}");
    tokio::time::sleep(Duration::from_secs_f64((start - epoch_now()).max(0.0))).await;
    let end = Instant::now() + Duration::from_secs_f64(seconds);
    let mut cycles = 0;
    while Instant::now() < end {
        let put = TxnOp::put(key.as_str(), "", Some(PutOptions::new().with_lease(lease)));
        let queue = Txn::new()
            .when([Compare::create_revision(key.as_str(), CompareOp::Equal, 0)])
            .and_then([put, first_contender()])
            .or_else([TxnOp::get(key.as_str(), None), first_contender()]);
        let queued = client.kv_client().txn(queue).await?;
        let mine = queued.header().map_or(0, |h| h.revision());
        // The first contender is the last read in either branch.
        let first = queued
            .op_responses()
            .into_iter()
            .rev()
            .find_map(|op| match op {
                TxnOpResponse::Get(get) => get.kvs().first().map(|kv| kv.create_revision()),
                _ => None,
            });
        if first != Some(mine) {
            let ahead = GetOptions::new()
                .with_prefix()
                .with_sort(SortTarget::Create, SortOrder::Descend)
                .with_limit(1)
                .with_max_create_revision(mine - 1);
            loop {
                let listing = client.kv_client().get(PREFIX, Some(ahead.clone())).await?;
                let Some(last) = listing.kvs().first() else {
                    break;
                };
                let last = last.key_str()?.to_owned();
                let read_at = listing.header().map_or(0, |h| h.revision());
                wait_deleted(&mut client, &last, read_at, from_listing).await?;
            }
            // etcd's mutex reads its own key once more: the session may have expired.
            client.kv_client().get(key.as_str(), None).await?;
        }
        client.kv_client().delete(key.as_str(), None).await?;
        cycles += 1;
    }
    client.lease_client().revoke(lease).await?;
    Ok(cycles)
}

#[tokio::main]
async fn main() -> Result<(), Failure> {
    let args: Vec<String> = std::env::args().collect();
    if let [_, role, endpoint, mode, start, seconds] = args.as_slice()
        && role == "process"
    {
        let cycles = contend(
            endpoint,
            mode == "from-listing",
            start.parse()?,
            seconds.parse()?,
        );
        match cycles.await {
            Ok(cycles) => println!("{cycles}"),
            Err(err) => {
                eprintln!("etcd_mutex_floor: a process failed: {err}");
                std::process::exit(1);
            }
        }
        return Ok(());
    }
    let [program, endpoint, mode, processes, duration] = args.as_slice() else {
        return Err("usage: etcd_mutex_floor ENDPOINT now|from-listing PROCESSES DURATION".into());
    };
    let seconds = humantime::parse_duration(duration)?.as_secs_f64();
    let processes: usize = processes.parse()?;
    if processes == 0 || !(0.1..=3600.0).contains(&seconds) {
        return Err("PROCESSES must be 1 or more, DURATION from 100ms to 1h".into());
    }
    if !["now", "from-listing"].contains(&mode.as_str()) {
        return Err(format!("the watch is `now` or `from-listing`, not `{mode}`").into());
    }
    let start = (epoch_now() + 1.5).to_string();
    let children = (0..processes)
        .map(|_| {
            Command::new(program)
                .args(["process", endpoint, mode, &start, &seconds.to_string()])
                .stdout(Stdio::piped())
                .spawn()
        })
        .collect::<Result<Vec<_>, _>>()?;
    let mut counts = Vec::new();
    for child in children {
        let out = child.wait_with_output()?;
        if !out.status.success() {
            return Err(format!("a process failed (above): is etcd at {endpoint}?").into());
        }
        counts.push(String::from_utf8(out.stdout)?.trim().parse::<u64>()?);
    }
    let total: u64 = counts.iter().sum();
    println!(
        "etcd's mutex, watching {mode}: {} processes, {:.0} transfers/s, per process {}..{}",
        counts.len(),
        total as f64 / seconds,
        counts.iter().min().unwrap_or(&0),
        counts.iter().max().unwrap_or(&0)
    );
    Ok(())
}
