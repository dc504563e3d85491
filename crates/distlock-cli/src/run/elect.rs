//! `distlock elect`: campaign in a leader election and run a command while leading.

use std::time::{Duration, Instant};

use distlock::{ErrorKind, LockOptions, Result};

use super::supervise::{self, Supervised};
use super::{
    LEAST_WAIT, RELEASE_WITHIN, WITHDRAW_AFTER_TIMEOUT, check_ttl, scheme_of, shortest_ttl,
    until_signalled, withdrawn,
};
use crate::args::ElectArgs;
use crate::exit;
use crate::location::connect_shared;
use crate::output::errln;
use crate::signals::{self, Caught};

/// What `elect` is for, in the error that refuses a store no other process sees.
const PURPOSE: &str = "`elect` campaigns against other processes";

/// The pause before campaigning again after a campaign the store failed (`--requeue`),
/// doubling up to [`RETRY_CAP`].
const RETRY_FIRST: Duration = Duration::from_millis(100);
/// The longest such pause.
const RETRY_CAP: Duration = Duration::from_secs(5);

pub async fn elect(url: &Option<String>, args: ElectArgs) -> Result<u8> {
    let started = Instant::now();
    // What is wrong whatever the store is refused before a store is asked.
    distlock::validate_name(&args.name)?;
    if let Some(identity) = &args.identity {
        distlock::validate_identity(identity)?;
    }
    if let Some(value) = &args.proclaim {
        distlock::validate_proclamation(value)?;
    }
    let scheme = scheme_of(url);
    check_ttl(args.ttl, scheme, shortest_ttl(scheme))?;
    let op_timeout = (args.ttl / 3).min(RELEASE_WITHIN);
    let options = LockOptions::new().ttl(args.ttl).op_timeout(op_timeout);
    options.validate()?;
    let mut caught = Caught::listen(&signals::forwarded());
    let connecting = connect_shared(url, PURPOSE);
    let (url, client) = match until_signalled(connecting, None, &mut caught).await {
        Ok(connected) => connected?,
        Err(number) => return Ok(signals::exit_code(number)),
    };
    let mut election = client.election(&args.name);
    if let Some(identity) = &args.identity {
        election = election.identity(identity);
    }
    let (mut first, mut pause) = (true, RETRY_FIRST);
    loop {
        // Each campaign waits --wait; the first, what connecting left of it.
        let options = match (args.wait, first) {
            (Some(wait), true) => options
                .clone()
                .wait(wait.saturating_sub(started.elapsed()).max(LEAST_WAIT)),
            (Some(wait), false) => options.clone().wait(wait),
            (None, _) => options.clone(),
        };
        first = false;
        let candidate = election.clone().with_options(options);
        let campaign = candidate.campaign();
        let leadership = match until_signalled(campaign, Some(&client), &mut caught).await {
            Ok(Ok(leadership)) => leadership,
            Ok(Err(err)) if err.kind() == ErrorKind::Timeout => {
                errln!(
                    "distlock: election `{}` was not won within --wait {}",
                    args.name,
                    humantime::format_duration(args.wait.unwrap_or_default())
                );
                client.settle(WITHDRAW_AFTER_TIMEOUT).await;
                return Ok(exit::BUSY);
            }
            Ok(Err(err))
                if args.requeue
                    && (err.is_temporary()
                        || matches!(err.kind(), ErrorKind::LockLost | ErrorKind::NotHeld)) =>
            {
                errln!(
                    "distlock: the campaign for `{}` failed ({err}); campaigning again in {}",
                    args.name,
                    humantime::format_duration(pause)
                );
                let pausing = tokio::time::sleep(pause);
                if let Err(number) = until_signalled(pausing, Some(&client), &mut caught).await {
                    return Ok(withdrawn(&client, number).await);
                }
                pause = (pause * 2).min(RETRY_CAP);
                continue;
            }
            Ok(Err(err)) => {
                client.settle(WITHDRAW_AFTER_TIMEOUT).await;
                return Err(err);
            }
            Err(number) => return Ok(withdrawn(&client, number).await),
        };
        pause = RETRY_FIRST;
        let proclaimed = match &args.proclaim {
            Some(value) => leadership.proclaim(value.clone()).await,
            None => Ok(()),
        };
        let code = match proclaimed {
            Ok(()) => {
                let term = leadership.term();
                let command = Supervised {
                    name: &args.name,
                    command: &args.command,
                    kill_grace: args.kill_grace,
                    max_hold: None,
                    held: "leadership of",
                    env: vec![
                        ("DISTLOCK_TERM", term.to_string()),
                        ("DISTLOCK_IDENTITY", leadership.identity().to_owned()),
                    ],
                };
                let lost = leadership.lost();
                supervise::supervise(&command, (&url, &client), term, lost, &mut caught).await
            }
            Err(err) if err.kind() == ErrorKind::NotHeld => exit::LOST,
            Err(err) => {
                // The leadership goes with the error, released before distlock exits.
                let _ = leadership.resign().await;
                client.settle(RELEASE_WITHIN).await;
                return Err(err);
            }
        };
        let lost = code == exit::LOST || !leadership.health().is_valid();
        match leadership.resign().await {
            Ok(()) => {}
            Err(err) if err.kind() == ErrorKind::NotHeld => {}
            Err(err) => {
                errln!("distlock: warning: resigning failed (the lease will expire): {err}")
            }
        }
        // A signal forwarded to the command as the leadership was lost asked for the end,
        // not for another term.
        if lost && args.requeue && !caught.asked_to_end() {
            errln!(
                "distlock: the leadership of `{}` was lost; campaigning again",
                args.name
            );
            continue;
        }
        client.settle(RELEASE_WITHIN).await;
        return Ok(code);
    }
}
