//! The uncontended phases of `distlock bench`: a lock cycle (acquire, release) on one
//! name, the backend's minimal lock cycle beside it, and with `--new-names` a cycle on a
//! new name each time (as `orders/<id>`), all in turns so they see the same machine; and
//! `--cycles-of`, a fixed count of one of those cycles alone, for counting what a cycle
//! costs the server (`valgrind --tool=callgrind` on it).

use std::time::{Duration, Instant};

use distlock::{Client, Error, ErrorKind, Result};
use serde_json::json;

use super::names::BenchNames;
use super::stats::{Samples, ratio};
use super::{floor_of, names};
use crate::args::{BenchArgs, CycleKind};
use crate::location::{lock_url, open_client};
use crate::output::{errln, outln};
use crate::signals::{self, Caught};

/// The uncontended cycles, each measured in turns with the others.
pub(super) struct Uncontended {
    /// On one name.
    cycles: Samples,
    /// The backend's minimal lock cycle, where it has one.
    minimal: Option<Samples>,
    /// On a new name each time (`--new-names`).
    new_names: Option<Samples>,
}

/// Runs the uncontended cycles in turns until `duration` passes.
pub(super) async fn measure(
    client: &Client,
    names: &BenchNames,
    duration: Duration,
    new_names: bool,
) -> Result<Uncontended> {
    let floor = floor_of(client)?;
    let mutex = client.mutex(names.uncontended());
    let minimal_name = names.minimal_cycle();
    let mut measured = Uncontended {
        cycles: Samples::default(),
        minimal: floor.cycle_op().map(|_| Samples::default()),
        new_names: new_names.then(Samples::default),
    };
    let end = Instant::now() + duration;
    while Instant::now() < end {
        let started = Instant::now();
        mutex.lock().await?.release().await?;
        measured.cycles.push(started.elapsed());
        if let Some(minimal) = &mut measured.minimal {
            let started = Instant::now();
            floor.cycle_round(&minimal_name).await?;
            minimal.push(started.elapsed());
        }
        if let Some(new_names) = &mut measured.new_names {
            let mutex = client.mutex(names.new_name());
            let started = Instant::now();
            mutex.lock().await?.release().await?;
            new_names.push(started.elapsed());
        }
    }
    Ok(measured)
}

impl Uncontended {
    /// The phase's figures, with ratios to the floor's round (`floor_p50` µs, `floor_ops`
    /// per second) and to the minimal cycle.
    pub(super) fn to_json(
        &self,
        client: &Client,
        floor_p50: f64,
        floor_ops: f64,
    ) -> Result<serde_json::Value> {
        let cycles = &self.cycles;
        // The loops ran in turns for the phase: each one's rate is over its own time.
        let cycle_p50 = cycles.percentile(50.0);
        let mut figures = json!({
            "cycles_per_s": ratio(1e6, cycles.mean_us()),
            "p50_us": cycle_p50,
            "p99_us": cycles.percentile(99.0),
            "p50_vs_floor_p50": ratio(cycle_p50, floor_p50),
            "cycles_vs_floor_ops": ratio(ratio(1e6, cycles.mean_us()), floor_ops),
        });
        let serde_json::Value::Object(map) = &mut figures else {
            unreachable!("a JSON object");
        };
        let minimal = self.minimal.as_ref().zip(floor_of(client)?.cycle_op());
        if let Some((minimal, op)) = minimal {
            let minimal_p50 = minimal.percentile(50.0);
            map.insert("minimal_cycle_op".into(), json!(op));
            map.insert("minimal_cycle_p50_us".into(), json!(minimal_p50));
            map.insert(
                "minimal_cycles_per_s".into(),
                json!(ratio(1e6, minimal.mean_us())),
            );
            map.insert(
                "p50_vs_minimal_cycle_p50".into(),
                json!(ratio(cycle_p50, minimal_p50)),
            );
        }
        if let Some(new_names) = &self.new_names {
            let p50 = new_names.percentile(50.0);
            let per_s = ratio(1e6, new_names.mean_us());
            let mut new_figures = json!({
                "cycles_per_s": per_s,
                "p50_us": p50,
                "p99_us": new_names.percentile(99.0),
                "p50_vs_floor_p50": ratio(p50, floor_p50),
            });
            let new = &mut new_figures;
            if let (Some(minimal), serde_json::Value::Object(new)) = (&self.minimal, new) {
                new.insert(
                    "p50_vs_minimal_cycle_p50".into(),
                    json!(ratio(p50, minimal.percentile(50.0))),
                );
                new.insert(
                    "cycles_vs_minimal_cycles".into(),
                    json!(ratio(per_s, ratio(1e6, minimal.mean_us()))),
                );
            }
            map.insert("new_names".into(), new_figures);
        }
        Ok(figures)
    }
}

/// `--cycles-of`: `--cycles` cycles of one kind alone, one after another, on the first
/// URL; prints how long they took. Running it twice with different counts under
/// `valgrind --tool=callgrind` on the server, the difference of the server's instructions
/// over the difference of the counts is what one cycle costs it, connecting and
/// subscribing left out. A signal stops the cycles; the names are forgotten all the same.
pub(super) async fn count_cycles(
    url: &Option<String>,
    kind: CycleKind,
    args: &BenchArgs,
) -> Result<u8> {
    let client = open_client(&lock_url(url)?).await?;
    let names = BenchNames::new(0);
    let mut caught = Caught::listen(&signals::ending());
    let started = Instant::now();
    let counted = tokio::select! {
        counted = cycles_of(&client, &names, kind, args.cycles) => counted.map(Ok),
        number = caught.next() => Ok(Err(number)),
    };
    let took = started.elapsed();
    // Told before the names are forgotten, which `scripts/callgrind-redis` leaves out of
    // its count.
    let code = match counted {
        Ok(Ok(())) => {
            outln!(
                "{} {} cycles in {:.3} s: {:.0} cycles/s",
                args.cycles,
                kind.as_str(),
                took.as_secs_f64(),
                ratio(f64::from(args.cycles), took.as_secs_f64())
            );
            Ok(0)
        }
        Ok(Err(number)) => Ok(signals::stopped("bench", number)),
        Err(err) => Err(err),
    };
    if kind != CycleKind::Minimal {
        tokio::time::sleep(names::IDLE).await;
        names.tidy_up(&client).await;
    }
    if let Err(err) = client.close().await {
        errln!("distlock bench: {err}");
    }
    code
}

/// `count` cycles of `kind` on `client`, one after another, on `names`.
async fn cycles_of(client: &Client, names: &BenchNames, kind: CycleKind, count: u32) -> Result<()> {
    let floor = floor_of(client)?;
    match kind {
        CycleKind::Minimal => {
            if floor.cycle_op().is_none() {
                return Err(Error::new(
                    ErrorKind::Unsupported,
                    format!("the {} backend has no minimal lock cycle", client.scheme()),
                ));
            }
            let name = names.minimal_cycle();
            for _ in 0..count {
                floor.cycle_round(&name).await?;
            }
        }
        CycleKind::SameName => {
            let mutex = client.mutex(names.uncontended());
            for _ in 0..count {
                mutex.lock().await?.release().await?;
            }
        }
        CycleKind::NewNames => {
            for _ in 0..count {
                client
                    .mutex(names.new_name())
                    .lock()
                    .await?
                    .release()
                    .await?;
            }
        }
    }
    Ok(())
}
