//! The one subscription each client keeps: wake-ups for its waiters arrive on a channel of
//! its own, and are handed to the waiting tasks; so do the messages of the channels its
//! waiters watch (see [`Channels`]).

use std::sync::Arc;
use std::time::Duration;

use distlock_core::backend::LocalWakers;
use distlock_core::{Error, ErrorKind, Result};
use futures_util::StreamExt;
use tokio::sync::oneshot;
use tokio::task::AbortHandle;

use crate::redis::channels::{Channels, Sink};
use crate::redis::connection::Conn;
use crate::redis::handovers::Handovers;
use crate::scripts::load_ours;

/// Subscribes to `channel` on the first of `servers` that answers and keeps the
/// subscription up (moving on to the next server, with backoff) until aborted; hands the
/// connection to `channels` for the channels waiters watch, and the news a release sends
/// its waiters to `handovers`. Subscribed again after losing the server (restarted, it
/// may have lost its scripts), it gives `scripts_to` the scripts back at once, so the
/// client's next calls find them, and wakes every waiter. Returns once the first subscription is in place.
pub(crate) async fn listen(
    servers: Vec<redis::Client>,
    channel: String,
    wakers: Arc<LocalWakers>,
    channels: Arc<Channels>,
    handovers: Arc<Handovers>,
    scripts_to: Conn,
) -> Result<AbortHandle> {
    let (ready, subscribed) = oneshot::channel();
    let task = tokio::spawn(async move {
        let mut ready = Some(ready);
        let mut pause = Duration::from_millis(50);
        let mut failed_in_a_row = 0;
        for client in servers.iter().cycle() {
            match subscribe(client, &channel).await {
                Ok(pubsub) => {
                    pause = Duration::from_millis(50);
                    failed_in_a_row = 0;
                    match ready.take() {
                        Some(ready) => {
                            let _ = ready.send(Ok(()));
                        }
                        None => {
                            let mut conn = scripts_to.clone();
                            tokio::spawn(async move {
                                if let Err(err) = load_ours(&mut conn).await {
                                    tracing::debug!(error = %err, "loading the lock scripts again failed");
                                }
                            });
                            // Wake-ups sent while it was down went astray: every waiter
                            // looks again now (a restarted server, or a replica promoted
                            // in its place, may have the lock free).
                            wakers.wake_all();
                        }
                    }
                    let (sink, mut messages) = pubsub.split();
                    channels.connected(Sink::Plain(sink)).await;
                    while let Some(message) = messages.next().await {
                        let Ok(payload) = message.get_payload::<String>() else {
                            continue;
                        };
                        let watched =
                            channels.deliver(message.get_channel_name(), &payload, &wakers);
                        if !watched && !handovers.deliver(&payload, &wakers) {
                            wakers.wake(&payload);
                        }
                    }
                    channels.disconnected().await;
                    tracing::debug!("wake-up subscription ended; subscribing again");
                }
                Err(err) => {
                    failed_in_a_row += 1;
                    if failed_in_a_row < servers.len() {
                        tracing::debug!(error = %err, "cannot subscribe for wake-ups; trying the next server");
                        continue;
                    }
                    if let Some(ready) = ready.take() {
                        let _ = ready.send(Err(err));
                        return;
                    }
                    tracing::debug!(error = %err, "cannot subscribe for wake-ups anywhere; retrying");
                    failed_in_a_row = 0;
                }
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_secs(2));
        }
    });
    match subscribed.await {
        Ok(Ok(())) => Ok(task.abort_handle()),
        Ok(Err(err)) => Err(crate::error::redis_error("subscribe")(err)),
        Err(_) => Err(Error::new(
            ErrorKind::Backend,
            "the wake-up listener stopped before subscribing",
        )),
    }
}

async fn subscribe(
    client: &redis::Client,
    channel: &str,
) -> redis::RedisResult<redis::aio::PubSub> {
    let mut pubsub = client.get_async_pubsub().await?;
    pubsub.subscribe(channel).await?;
    Ok(pubsub)
}
