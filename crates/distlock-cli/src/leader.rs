//! `distlock leader`: who leads an election, once or as it changes.

use std::time::{SystemTime, UNIX_EPOCH};

use distlock::{LeaderInfo, LockOptions, Result};
use serde::Serialize;

use crate::args::LeaderArgs;
use crate::deadline::{unanswered, within};
use crate::location::connect_shared;
use crate::output::outln;
use crate::signals::{self, Caught};

pub async fn leader(url: &Option<String>, args: LeaderArgs) -> Result<u8> {
    distlock::validate_name(&args.name)?;
    // Connecting and the first read, together within the default operation timeout: a
    // store that hangs is told of, not waited on.
    let ask = async {
        let (_, client) =
            connect_shared(url, "`leader` shows who leads among other processes").await?;
        let election = client.election(&args.name);
        match args.watch {
            true => Ok((client, Watched::Channel(election.observe().await?))),
            false => Ok((client, Watched::Once(election.leader().await?))),
        }
    };
    let (_client, watched) = within(LockOptions::new().op_timeout_value(), ask, unanswered).await?;
    let mut seen = match watched {
        Watched::Once(leader) => {
            show(&args, leader.as_ref());
            return Ok(match leader {
                Some(_) => 0,
                None => 1,
            });
        }
        Watched::Channel(seen) => seen,
    };
    let mut caught = Caught::listen(&signals::forwarded());
    loop {
        show(&args, seen.borrow_and_update().as_ref());
        tokio::select! {
            changed = seen.changed() => {
                if changed.is_err() {
                    return Err(distlock::Error::new(
                        distlock::ErrorKind::Backend,
                        "the observer of the election stopped",
                    ));
                }
            }
            number = caught.next() => {
                if signals::ends_a_wait(number) {
                    return Ok(signals::exit_code(number));
                }
            }
        }
    }
}

/// What the first read gave: the leader, or the observer's channel with `--watch`.
enum Watched {
    Once(Option<LeaderInfo>),
    Channel(tokio::sync::watch::Receiver<Option<LeaderInfo>>),
}

/// Prints `leader` of election `args.name`: a line of text, or a JSON object.
fn show(args: &LeaderArgs, leader: Option<&LeaderInfo>) {
    if args.json {
        let shown = Shown {
            name: &args.name,
            leader: leader.map(Leader::of),
        };
        match serde_json::to_string(&shown) {
            Ok(json) => outln!("{json}"),
            Err(err) => outln!("{{\"error\":\"cannot encode the leader: {err}\"}}"),
        }
        return;
    }
    let Some(leader) = leader else {
        outln!("{}: nobody leads", args.name);
        return;
    };
    let since = leader.since.map_or_else(String::new, |at| {
        format!(" since {}", humantime::format_rfc3339_seconds(at))
    });
    let value = leader
        .value
        .as_deref()
        .map_or_else(String::new, |value| format!(" value {value:?}"));
    outln!(
        "{}: {} leads, term {}{since}{value} ({} pid {})",
        args.name,
        leader.identity,
        leader.term,
        leader.host,
        leader.pid
    );
}

/// The JSON form of one reading.
#[derive(Serialize)]
struct Shown<'a> {
    name: &'a str,
    leader: Option<Leader<'a>>,
}

/// The JSON form of a leader.
#[derive(Serialize)]
struct Leader<'a> {
    identity: &'a str,
    term: u64,
    value: Option<&'a str>,
    since_unix_ms: Option<u64>,
    lease_ends_unix_ms: Option<u64>,
    host: &'a str,
    pid: u32,
}

impl<'a> Leader<'a> {
    fn of(leader: &'a LeaderInfo) -> Self {
        let ms = |at: SystemTime| {
            at.duration_since(UNIX_EPOCH)
                .map_or(0, |since| since.as_millis() as u64)
        };
        Leader {
            identity: &leader.identity,
            term: leader.term,
            value: leader.value.as_deref(),
            since_unix_ms: leader.since.map(ms),
            lease_ends_unix_ms: leader.until.map(ms),
            host: &leader.host,
            pid: leader.pid,
        }
    }
}
