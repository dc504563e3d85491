//! One watch stream per client: every wait and every held key's watch of a client is a
//! watch on it, told apart by a watch id the client picks (etcd 3.4 takes ids from the
//! client), instead of a gRPC stream each. Opening a stream costs etcd two goroutines and
//! the client an HTTP/2 stream: under contention, a waiter set up a watch per hand-off.
//!
//! A task of the client's own owns the stream: it sends the creates and cancels, and
//! hands each answer to the watch it names. The stream is opened at the first watch and
//! again at the first watch after it broke; when it breaks, every watch on it ends with a
//! temporary error (its caller reads the state again and watches anew).

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use distlock_core::{Error, ErrorKind, Result};
use tokio::sync::mpsc;
use tonic::metadata::AsciiMetadataValue;
use tonic::{Status, Streaming};

use crate::error::etcd_error;
use crate::grpc::pb::{self, WatchResponse, watch_request::RequestUnion};
use crate::grpc::{Client, TOKEN_REFUSED};

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
        create: pb::WatchCreateRequest,
        answers: mpsc::UnboundedSender<Result<WatchResponse>>,
    },
    Cancel(i64),
    /// Drop the stream (its member stopped serving): the next watch opens another.
    Reset,
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

    /// Sets the watch `create` asks for (its watch id is set here).
    pub(crate) fn watch(&self, create: pb::WatchCreateRequest) -> Result<Watch> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (answers, received) = mpsc::unbounded_channel();
        self.commands
            .send(Command::Watch {
                id,
                create: pb::WatchCreateRequest {
                    watch_id: id,
                    ..create
                },
                answers,
            })
            .map_err(|_| ended("the etcd client's watch task is gone"))?;
        Ok(Watch {
            id,
            answers: received,
            commands: self.commands.clone(),
        })
    }

    /// Moves the watches off the current stream: its watches end with a temporary error
    /// and are set again on a new one. Called when a member stops serving, which may hold
    /// the stream without breaking it.
    pub(crate) fn reset(&self) {
        let _ = self.commands.send(Command::Reset);
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

/// Where a watch's answers go.
type Route = mpsc::UnboundedSender<Result<WatchResponse>>;

/// A request to create a watch on the stream.
fn create(create: pb::WatchCreateRequest) -> pb::WatchRequest {
    pb::WatchRequest {
        request_union: Some(RequestUnion::CreateRequest(create)),
    }
}

/// A request to cancel watch `id`.
fn cancel(id: i64) -> pb::WatchRequest {
    pb::WatchRequest {
        request_union: Some(RequestUnion::CancelRequest(pb::WatchCancelRequest {
            watch_id: id,
        })),
    }
}

/// The stream, while it is open. Its requests queue without bound, so the serving task
/// never waits to send while answers wait to be read.
struct Stream {
    requests: mpsc::UnboundedSender<pb::WatchRequest>,
    answers: Streaming<WatchResponse>,
    /// The watches whose creation etcd has not answered yet, in the order they were sent
    /// (etcd answers a stream's creates in order).
    creating: VecDeque<i64>,
    /// The auth token the stream was opened with.
    opened_with: Option<AsciiMetadataValue>,
}

/// The state of the serving task: the watches, and the stream they are on.
struct Hub {
    client: Client,
    routes: HashMap<i64, Route>,
    stream: Option<Stream>,
    /// The auth token a stream was opened with, once etcd refused a watch on it as
    /// unknown (it checks every create against the token of the stream's opening): the
    /// next stream is opened with a new one.
    stale_token: Option<AsciiMetadataValue>,
}

/// Serves `client`'s watches until every handle is gone.
async fn serve(client: Client, mut commands: mpsc::UnboundedReceiver<Command>) {
    let mut hub = Hub {
        client,
        routes: HashMap::new(),
        stream: None,
        stale_token: None,
    };
    loop {
        tokio::select! {
            command = commands.recv() => match command {
                None => return,
                Some(command) => hub.obey(command).await,
            },
            answer = next(hub.stream.as_mut()) => match answer {
                Ok(Some(answer)) => hub.route(answer),
                Ok(None) | Err(_) => hub.break_stream("the etcd watch stream ended"),
            },
        }
    }
}

impl Hub {
    async fn obey(&mut self, command: Command) {
        match command {
            Command::Watch {
                id,
                create,
                answers,
            } => match self.send_watch(id, create).await {
                Ok(()) => {
                    self.routes.insert(id, answers);
                }
                Err(err) => {
                    let _ = answers.send(Err(err));
                }
            },
            // A watch whose answers were refused stays routed until its cancel: etcd is
            // told to drop every watch a caller let go of.
            Command::Cancel(id) => {
                if self.routes.remove(&id).is_some() {
                    self.send(cancel(id));
                }
            }
            Command::Reset => self
                .break_stream("the etcd watch stream was moved off a member that stopped serving"),
        }
    }

    /// Sends the create of watch `id`, opening the stream with it if none is open.
    async fn send_watch(&mut self, id: i64, request: pb::WatchCreateRequest) -> Result<()> {
        if let Some(open) = self.stream.as_mut() {
            if open.requests.send(create(request.clone())).is_ok() {
                open.creating.push_back(id);
                return Ok(());
            }
            self.break_stream("the etcd watch stream broke");
            return Err(ended("the etcd watch stream broke"));
        }
        if let Some(stale) = self.stale_token.take() {
            self.client
                .renew_token(&stale)
                .await
                .map_err(etcd_error("watch"))?;
        }
        let opened_with = self.client.token();
        let (requests, answers) = self
            .client
            .watch(create(request))
            .await
            .map_err(etcd_error("watch"))?;
        self.stream = Some(Stream {
            requests,
            answers,
            creating: VecDeque::from([id]),
            opened_with,
        });
        Ok(())
    }

    /// Queues `request` on the open stream; a stream whose sending task is gone broke.
    fn send(&mut self, request: pb::WatchRequest) {
        let sent = self
            .stream
            .as_ref()
            .is_some_and(|open| open.requests.send(request).is_ok());
        if !sent && self.stream.is_some() {
            self.break_stream("the etcd watch stream broke");
        }
    }

    /// Hands `answer` to the watch it is for. The answer to a create goes to the oldest
    /// create not answered yet, whatever id it carries: a create etcd refused carries -1.
    fn route(&mut self, answer: WatchResponse) {
        let mut id = answer.watch_id;
        let created = answer.created;
        if let Some(expected) = self
            .stream
            .as_mut()
            .filter(|_| created)
            .and_then(|open| open.creating.pop_front())
            && expected != id
        {
            if !answer.canceled {
                // A server that numbers watches itself (etcd before 3.4): its watch is
                // dropped, and the caller told, as no answer could be told apart.
                self.send(cancel(id));
                if let Some(route) = self.routes.remove(&expected) {
                    let _ = route.send(Err(Error::new(
                        ErrorKind::Unsupported,
                        "this etcd numbers watches itself: distlock needs etcd 3.4 or later",
                    )
                    .with_backend("etcd")));
                }
                return;
            }
            id = expected;
        }
        let ended = answer.canceled;
        let token_refused = ended && answer.cancel_reason.contains(TOKEN_REFUSED);
        if let Some(route) = self.routes.get(&id) {
            let _ = route.send(Ok(answer));
        }
        if ended {
            self.routes.remove(&id);
        }
        if token_refused {
            // Every create on this stream would be refused: its watches are set again on a
            // stream opened with a new token.
            self.stale_token = self.stream.as_ref().and_then(|s| s.opened_with.clone());
            self.break_stream("etcd refused the watch stream's auth token");
        }
    }

    /// Drops the stream and ends every watch on it (their callers read the state again and
    /// watch anew, on a new stream).
    fn break_stream(&mut self, why: &str) {
        self.stream = None;
        for (_, route) in self.routes.drain() {
            let _ = route.send(Err(ended(why)));
        }
    }
}

/// The next answer on the stream, if one is open (else never).
async fn next(stream: Option<&mut Stream>) -> std::result::Result<Option<WatchResponse>, Status> {
    match stream {
        Some(open) => open.answers.message().await,
        None => std::future::pending().await,
    }
}
