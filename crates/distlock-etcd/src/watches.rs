//! One watch stream per client: every wait and every held key's watch of a client is a
//! watch on it, told apart by a watch id the client picks (etcd 3.4 takes ids from the
//! client), instead of a gRPC stream each. Opening a stream costs etcd two goroutines and
//! the client an HTTP/2 stream: under contention, a waiter set up a watch per hand-off.
//!
//! A task of the client's own owns the stream: it sends the creates and cancels, and
//! hands each answer to the watch it names. The stream is opened at the first watch and
//! again at the first watch after it broke; when it breaks, every watch on it ends with a
//! temporary error (its caller reads the state again and watches anew).

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use distlock_core::{Error, ErrorKind, Result};
use etcd_client::{Client, WatchOptions, WatchRequestSender, WatchResponse, WatchResponseStream};
use tokio::sync::mpsc;

use crate::error::etcd_error;

/// The handle to a client's watch stream; cheap to clone.
#[derive(Debug, Clone)]
pub(crate) struct Watches {
    commands: mpsc::UnboundedSender<Command>,
    /// The next watch id: ids are never used twice on a client's streams, so an answer to
    /// a cancelled watch can never reach a newer one.
    next_id: Arc<AtomicI64>,
}

/// What the stream's task is asked.
enum Command {
    Watch {
        id: i64,
        key: Vec<u8>,
        options: WatchOptions,
        answers: mpsc::UnboundedSender<Result<WatchResponse>>,
    },
    Cancel(i64),
}

/// One watch on a client's stream: its answers, in order. Dropped, it is cancelled.
#[derive(Debug)]
pub(crate) struct Watch {
    id: i64,
    answers: mpsc::UnboundedReceiver<Result<WatchResponse>>,
    commands: mpsc::UnboundedSender<Command>,
}

impl Watches {
    /// Starts the task that will own `client`'s watch stream, on the sessions' runtime; it
    /// ends when the last handle is dropped.
    pub(crate) fn start(client: Client) -> Watches {
        let (commands, received) = mpsc::unbounded_channel();
        crate::runtime::SESSIONS.spawn(serve(client, received));
        Watches {
            commands,
            next_id: Arc::new(AtomicI64::new(1)),
        }
    }

    /// Watches `key` with `options` (their watch id is set here).
    pub(crate) fn watch(&self, key: &str, options: WatchOptions) -> Result<Watch> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (answers, received) = mpsc::unbounded_channel();
        self.commands
            .send(Command::Watch {
                id,
                key: key.as_bytes().to_vec(),
                options: options.with_watch_id(id),
                answers,
            })
            .map_err(|_| ended("the etcd client's watch task is gone"))?;
        Ok(Watch {
            id,
            answers: received,
            commands: self.commands.clone(),
        })
    }
}

impl Watch {
    /// The watch's next answer: its creation first, then its events; an error once the
    /// stream broke.
    pub(crate) async fn message(&mut self) -> Result<WatchResponse> {
        match self.answers.recv().await {
            Some(answer) => answer,
            None => Err(ended("the etcd watch stream ended")),
        }
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        let _ = self.commands.send(Command::Cancel(self.id));
    }
}

/// A temporary error: the watch must be set again.
fn ended(what: &str) -> Error {
    Error::new(ErrorKind::Unavailable, what)
        .with_backend("etcd")
        .temporary()
}

/// The stream, while it is open.
struct Stream {
    requests: WatchRequestSender,
    answers: WatchResponseStream,
}

/// Serves `client`'s watches until every handle is gone.
async fn serve(client: Client, mut commands: mpsc::UnboundedReceiver<Command>) {
    let mut routes: HashMap<i64, mpsc::UnboundedSender<Result<WatchResponse>>> = HashMap::new();
    let mut stream: Option<Stream> = None;
    loop {
        tokio::select! {
            command = commands.recv() => match command {
                None => return,
                Some(Command::Watch { id, key, options, answers }) => {
                    match send_watch(&client, &mut stream, key, options).await {
                        Ok(()) => {
                            routes.insert(id, answers);
                        }
                        Err(err) => {
                            stream = None;
                            let _ = answers.send(Err(err));
                            broken(&mut routes, "the etcd watch stream broke");
                        }
                    }
                }
                Some(Command::Cancel(id)) => {
                    if routes.remove(&id).is_some()
                        && let Some(open) = stream.as_mut()
                        && open.requests.cancel(id).await.is_err()
                    {
                        stream = None;
                        broken(&mut routes, "the etcd watch stream broke");
                    }
                }
            },
            answer = next(stream.as_mut()) => match answer {
                Ok(Some(answer)) => {
                    let id = answer.watch_id();
                    let done = answer.canceled();
                    if let Some(route) = routes.get(&id)
                        && (route.send(Ok(answer)).is_err() || done)
                    {
                        routes.remove(&id);
                    }
                }
                Ok(None) | Err(_) => {
                    stream = None;
                    broken(&mut routes, "the etcd watch stream ended");
                }
            },
        }
    }
}

/// The next answer on the stream, if one is open (else never).
async fn next(
    stream: Option<&mut Stream>,
) -> std::result::Result<Option<WatchResponse>, etcd_client::Error> {
    match stream {
        Some(open) => open.answers.message().await,
        None => std::future::pending().await,
    }
}

/// Sends the create of a watch, opening the stream with it if none is open.
async fn send_watch(
    client: &Client,
    stream: &mut Option<Stream>,
    key: Vec<u8>,
    options: WatchOptions,
) -> Result<()> {
    match stream.as_mut() {
        Some(open) => open
            .requests
            .watch(key, Some(options))
            .await
            .map_err(etcd_error("watch")),
        None => {
            let (requests, answers) = client
                .watch_client()
                .watch(key, Some(options))
                .await
                .map_err(etcd_error("watch"))?
                .split();
            *stream = Some(Stream { requests, answers });
            Ok(())
        }
    }
}

/// Ends every watch of a stream that broke.
fn broken(routes: &mut HashMap<i64, mpsc::UnboundedSender<Result<WatchResponse>>>, why: &str) {
    for (_, route) in routes.drain() {
        let _ = route.send(Err(ended(why)));
    }
}
