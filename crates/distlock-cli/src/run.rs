//! `distlock run`: hold a lock while a command runs.

use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::time::Duration;

use distlock::{ErrorKind, Guard, LockOptions, Result};
use tokio::process::Command;
use tokio::signal::unix::{Signal, SignalKind, signal};

use crate::args::RunArgs;
use crate::exit;
use crate::location::connect;

pub async fn run(url: &Option<String>, args: RunArgs) -> Result<u8> {
    let (_, client) = connect(url).await?;
    let mut options = LockOptions::new().ttl(args.ttl);
    if let Some(wait) = args.wait {
        options = options.wait(wait);
    }
    let mutex = client.mutex(&args.name).with_options(options.clone());
    let acquired = if args.no_wait {
        mutex.try_lock().await
    } else {
        match until_signalled(mutex.lock_with(&options)).await {
            Ok(acquired) => acquired.map(Some),
            Err(number) => {
                // The wait was given up: its request is withdrawn in the background, and
                // waited for, so the next holder is not kept waiting for it to expire.
                if !client.settle(SETTLE).await {
                    eprintln!(
                        "distlock: warning: the request was not withdrawn within {SETTLE:?}; it expires on its own"
                    );
                }
                return Ok(128u8.saturating_add(number as u8));
            }
        }
    };
    let guard = match acquired {
        Ok(Some(guard)) => guard,
        Ok(None) => {
            eprintln!("distlock: lock `{}` is busy", args.name);
            return Ok(exit::BUSY);
        }
        Err(err) if err.kind() == ErrorKind::Timeout => {
            eprintln!("distlock: {err}");
            return Ok(exit::BUSY);
        }
        Err(err) => return Err(err),
    };
    let code = supervise(&args, &guard).await;
    match guard.release().await {
        Ok(()) => {}
        Err(err) if err.kind() == ErrorKind::NotHeld => {
            if code != exit::LOST {
                eprintln!("distlock: warning: the lock was already gone at release: {err}");
            }
        }
        Err(err) => eprintln!("distlock: warning: release failed (the lease will expire): {err}"),
    }
    Ok(code)
}

/// How long a run interrupted while it waits waits for its request to be withdrawn.
const SETTLE: Duration = Duration::from_secs(5);

/// Runs `wait` until it ends or SIGINT, SIGTERM or SIGHUP arrives (what a terminal, a
/// supervisor or a closed session sends): `Err` with the signal's number then, `wait`
/// dropped. Without signal listeners, just `wait`.
async fn until_signalled<T>(
    wait: impl std::future::Future<Output = T>,
) -> std::result::Result<T, libc::c_int> {
    let listeners = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
        signal(SignalKind::hangup()),
    );
    let (Ok(mut interrupt), Ok(mut terminate), Ok(mut hangup)) = listeners else {
        return Ok(wait.await);
    };
    tokio::select! {
        done = wait => Ok(done),
        Some(()) = interrupt.recv() => Err(libc::SIGINT),
        Some(()) = terminate.recv() => Err(libc::SIGTERM),
        Some(()) = hangup.recv() => Err(libc::SIGHUP),
    }
}

/// Runs the command in its own process group and waits for it, forwarding signals and
/// stopping it if the lease is lost. Returns the exit code for distlock.
async fn supervise(args: &RunArgs, guard: &Guard) -> u8 {
    let mut command = Command::new(&args.command[0]);
    command
        .args(&args.command[1..])
        .env("DISTLOCK_NAME", &args.name)
        .env("DISTLOCK_FENCING_TOKEN", guard.fencing_token().to_string())
        .process_group(0);
    // Listen before the command starts, so no signal sent from then on is lost.
    let (mut interrupt, mut terminate, mut hangup, mut quit) = match forwarded_signals() {
        Ok(streams) => streams,
        Err(err) => {
            eprintln!("distlock: cannot listen for signals: {err}");
            return exit::SOFTWARE;
        }
    };
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(err) => {
            eprintln!("distlock: cannot run `{}`: {err}", args.command[0]);
            return match err.kind() {
                std::io::ErrorKind::NotFound => exit::NOT_FOUND,
                _ => exit::NOT_EXECUTABLE,
            };
        }
    };
    let group = child.id().map(|pid| pid as libc::pid_t);
    let lost = guard.lost();
    tokio::pin!(lost);
    let mut lost_at: Option<tokio::time::Instant> = None;
    let status = loop {
        // A grace period past the clock's range is no limit.
        let kill_at = lost_at.and_then(|at| at.checked_add(args.kill_grace));
        tokio::select! {
            status = child.wait() => break status,
            _ = &mut lost, if lost_at.is_none() => {
                eprintln!("distlock: lock `{}` was lost; stopping the command", args.name);
                signal_group(group, libc::SIGTERM);
                lost_at = Some(tokio::time::Instant::now());
            }
            _ = sleep_until_opt(kill_at) => {
                eprintln!("distlock: the command outlived the {:?} grace period; killing it", args.kill_grace);
                signal_group(group, libc::SIGKILL);
                lost_at = Some(tokio::time::Instant::now() + Duration::from_secs(3600));
            }
            Some(()) = interrupt.recv() => signal_group(group, libc::SIGINT),
            Some(()) = terminate.recv() => signal_group(group, libc::SIGTERM),
            Some(()) = hangup.recv() => signal_group(group, libc::SIGHUP),
            Some(()) = quit.recv() => signal_group(group, libc::SIGQUIT),
        }
    };
    if lost_at.is_some() {
        return exit::LOST;
    }
    match status {
        Ok(status) => exit_code(status),
        Err(err) => {
            eprintln!("distlock: lost track of the command: {err}");
            exit::SOFTWARE
        }
    }
}

fn exit_code(status: ExitStatus) -> u8 {
    match (status.code(), status.signal()) {
        (Some(code), _) => code as u8,
        (None, Some(signal)) => 128u8.saturating_add(signal as u8),
        (None, None) => exit::SOFTWARE,
    }
}

fn signal_group(group: Option<libc::pid_t>, number: libc::c_int) {
    if let Some(group) = group {
        // SAFETY: killpg(2) has no memory-safety preconditions.
        unsafe {
            libc::killpg(group, number);
        }
    }
}

async fn sleep_until_opt(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// SIGINT, SIGTERM, SIGHUP and SIGQUIT, which are forwarded to the command's group.
fn forwarded_signals() -> std::io::Result<(Signal, Signal, Signal, Signal)> {
    Ok((
        signal(SignalKind::interrupt())?,
        signal(SignalKind::terminate())?,
        signal(SignalKind::hangup())?,
        signal(SignalKind::quit())?,
    ))
}
