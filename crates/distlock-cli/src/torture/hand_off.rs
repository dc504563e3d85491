//! The hand-off scheme's two ends: a worker that takes the lock or adopts a grant offered
//! in the run's mailbox, and a holder that offers its grant there instead of releasing it.

use std::path::Path;
use std::time::Duration;

use distlock::{Client, Error, ErrorKind, Guard, HandOff, LockOptions, Mutex, Result};
use distlock_check::history::{What, monotonic_ns};

use super::record::Recorder;

/// How long a worker of the hand-off scheme waits for the lock before it looks in the
/// mailbox again.
const MAILBOX_EVERY: Duration = Duration::from_millis(20);

/// The hand-off scheme's acquire: a grant offered in `mailbox` (claimed by renaming it, so
/// one worker takes it) adopted, or the lock taken as usual; until `until`.
pub async fn take_or_adopt(
    client: &Client,
    mutex: &Mutex,
    (mailbox, me): (&Path, u32),
    options: &LockOptions,
    until: u64,
) -> Result<Guard> {
    let claimed = mailbox.with_file_name(format!("offer-claimed-{me}"));
    loop {
        if std::fs::rename(mailbox, &claimed).is_ok() {
            let offer = std::fs::read_to_string(&claimed).unwrap_or_default();
            let _ = std::fs::remove_file(&claimed);
            if let Ok(offer) = offer.parse::<HandOff>()
                && let Ok(guard) = client.adopt_with(&offer, options).await
            {
                return Ok(guard);
            }
        }
        let left = Duration::from_nanos(until.saturating_sub(monotonic_ns()));
        if left.is_zero() {
            return Err(Error::new(ErrorKind::Timeout, "the run ended first"));
        }
        match mutex
            .lock_with(&options.clone().wait(left.min(MAILBOX_EVERY)))
            .await
        {
            Ok(guard) => return Ok(guard),
            Err(err) if err.kind() == ErrorKind::Timeout => {}
            Err(err) => return Err(err),
        }
    }
}

/// The hand-off scheme's release: `guard` offered in `mailbox` for `window`; `handed` once
/// it left the guard, `released` when nobody took it by the deadline.
pub async fn hand_on(
    guard: Guard,
    mailbox: &Path,
    window: Duration,
    recorder: &Recorder,
    me: u32,
) -> &'static str {
    let Ok(offer) = guard.hand_off(window) else {
        return match guard.release().await {
            Ok(()) => "ok",
            Err(_) => "fail",
        };
    };
    let deadline = monotonic_ns() + window.as_nanos() as u64;
    recorder.record(me, What::Offered { deadline });
    let draft = mailbox.with_file_name(format!("offer-draft-{me}"));
    let posted =
        std::fs::write(&draft, offer.to_string()).and_then(|()| std::fs::rename(&draft, mailbox));
    if posted.is_err() {
        return match guard.release().await {
            Ok(()) => "ok",
            Err(_) => "fail",
        };
    }
    match guard.handed_over(&offer).await {
        Ok(()) => "handed",
        Err(err) if err.kind() == ErrorKind::Timeout => "released",
        Err(_) => "unknown",
    }
}
