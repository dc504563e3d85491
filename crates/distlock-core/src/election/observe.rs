//! The observer's task: reads who leads an election, every so often and at each news the
//! store pushes of its lock, and sends it on a watch channel when it changes, until every
//! receiver is gone.

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
    let mut news = client.backend.lock_news(&name);
    tokio::spawn(async move {
        loop {
            tokio::select! {
                () = sender.closed() => return,
                () = tokio::time::sleep(every) => {}
                () = pushed(&mut news) => {}
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

/// Resolves at the store's next news of the lock, if it pushes any (and never once its
/// news ended: polling goes on).
async fn pushed(news: &mut Option<watch::Receiver<u64>>) {
    let Some(receiver) = news else {
        return std::future::pending().await;
    };
    if receiver.changed().await.is_err() {
        *news = None;
        std::future::pending::<()>().await;
    }
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
