//! The observer's task: reads who leads an election and sends it on a watch channel when
//! it changes, until every receiver is gone.

use std::time::{Duration, SystemTime};

use tokio::sync::watch;

use std::sync::Arc;

use crate::client::ClientInner;

use super::LeaderInfo;
use super::leader;

/// Starts the task observing election `name` every `every`, from `first`; its receiver.
/// The task holds the client's state, not a user's handle, so a program's last handle
/// still waits for its releases in flight as it ends.
pub(super) fn spawn(
    client: Arc<ClientInner>,
    name: String,
    every: Duration,
    first: Option<LeaderInfo>,
) -> watch::Receiver<Option<LeaderInfo>> {
    let (sender, receiver) = watch::channel(first);
    tokio::spawn(async move {
        loop {
            tokio::select! {
                () = sender.closed() => return,
                () = tokio::time::sleep(every) => {}
            }
            match leader::read(&client, &name).await {
                Ok(now) => {
                    sender.send_if_modified(|shown| replace(shown, now));
                }
                Err(err) => {
                    tracing::debug!(election = %name, error = %err, "cannot read the leader; keeping the last one seen");
                    let gone =
                        |l: &LeaderInfo| l.until.is_some_and(|until| until <= SystemTime::now());
                    sender.send_if_modified(|shown| match shown.as_ref().is_some_and(gone) {
                        true => replace(shown, None),
                        false => false,
                    });
                }
            }
        }
    });
    receiver
}

/// Puts `now` in `shown`; whether the leader changed (not only what is left of its lease).
fn replace(shown: &mut Option<LeaderInfo>, now: Option<LeaderInfo>) -> bool {
    let same = |a: &LeaderInfo, b: &LeaderInfo| {
        (&a.identity, a.term, &a.value, a.since) == (&b.identity, b.term, &b.value, b.since)
    };
    let changed = match (shown.as_ref(), now.as_ref()) {
        (Some(a), Some(b)) => !same(a, b),
        (None, None) => false,
        _ => true,
    };
    *shown = now;
    changed
}
