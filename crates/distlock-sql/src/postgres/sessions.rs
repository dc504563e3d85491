//! Session mode's connections: each lock is held by a connection of its own, taken from a
//! small set of idle connections that hold nothing, and given back only after its lock was
//! released cleanly. A connection that failed, or whose state is in doubt, is closed
//! instead, which makes the server release whatever it held.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use distlock_core::{Error, ErrorKind, LockRequest, PollOutcome, Result};
use sqlx::postgres::PgConnectOptions;
use sqlx::{ConnectOptions, Connection, PgConnection, PgPool};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::advisory::{self, Share, advisory_key};
use super::db_error;

/// How many idle connections are kept for later locks.
const IDLE_KEPT: usize = 16;
/// How long a cancellation waits for the server to stop a wait before closing the
/// connection instead.
const CANCEL_WITHIN: Duration = Duration::from_secs(2);

/// One connection and the server process serving it.
struct Session {
    conn: PgConnection,
    backend_pid: i32,
}

/// A lock held by a session.
struct Held {
    session: tokio::sync::Mutex<Option<Session>>,
    key: i64,
    share: Share,
}

/// A request waiting in the server's lock queue, on a task of its own.
struct Waiting {
    backend_pid: i32,
    key: i64,
    share: Share,
    done: watch::Receiver<bool>,
    task: JoinHandle<Waited>,
}

/// How a wait ended.
struct Waited {
    session: Session,
    fence: sqlx::Result<i64>,
}

enum Slot {
    Waiting(Waiting),
    Held(Arc<Held>),
}

/// The session-mode locks of one client.
pub(super) struct Sessions {
    options: PgConnectOptions,
    idle: Mutex<Vec<Session>>,
    slots: Mutex<HashMap<String, Slot>>,
    collisions: Mutex<BTreeSet<(String, String)>>,
}

impl Sessions {
    /// Session connections commit asynchronously (a lock dies with its session, and fencing
    /// tokens stay ahead of the clock; see [`advisory`]) and let the server notice a client
    /// that went away within a second, even during a wait.
    pub(super) fn new(options: &PgConnectOptions) -> Sessions {
        let options = options.clone().options([
            ("synchronous_commit", "off"),
            ("client_connection_check_interval", "1000"),
        ]);
        Sessions {
            options,
            idle: Mutex::default(),
            slots: Mutex::default(),
            collisions: Mutex::default(),
        }
    }

    /// Pairs of names found to share an advisory-lock key, so far.
    pub(super) fn collisions(&self) -> Vec<(String, String)> {
        locked(&self.collisions).iter().cloned().collect()
    }

    /// Whether `token` names a session lock (held or waiting).
    pub(super) fn knows(&self, token: &str) -> bool {
        locked(&self.slots).contains_key(token)
    }

    /// One poll of a session-mode request: the outcome of its wait if it is waiting, or a
    /// try of the lock, which starts a wait when the request waits and the lock is taken.
    pub(super) async fn poll(self: &Arc<Self>, request: &LockRequest) -> Result<PollOutcome> {
        let waited = {
            let mut slots = locked(&self.slots);
            match slots.get(&request.token) {
                Some(Slot::Waiting(w)) if !*w.done.borrow() => return Ok(pending()),
                Some(Slot::Waiting(_)) => match slots.remove(&request.token) {
                    Some(Slot::Waiting(w)) => Some(w),
                    _ => None,
                },
                Some(Slot::Held(_)) => {
                    return Err(Error::new(
                        ErrorKind::Backend,
                        "a session lock was polled after its grant",
                    ));
                }
                None => None,
            }
        };
        match waited {
            Some(waiting) => self.finish_wait(request, waiting).await,
            None => self.try_lock(request).await,
        }
    }

    async fn finish_wait(&self, request: &LockRequest, waiting: Waiting) -> Result<PollOutcome> {
        let key = waiting.key;
        let waited = waiting.task.await.map_err(task_failed)?;
        match waited.fence {
            Ok(fence) => {
                self.hold(request, key, waited.session);
                Ok(granted(fence))
            }
            Err(err) => {
                close(waited.session);
                Err(db_error("acquire")(err))
            }
        }
    }

    async fn try_lock(self: &Arc<Self>, request: &LockRequest) -> Result<PollOutcome> {
        let key = advisory_key(&request.name);
        loop {
            let (mut session, reused) = self.checkout().await?;
            let tried = match advisory::try_lock(&mut session.conn, request, key).await {
                Ok(tried) => tried,
                Err(err) if reused && connection_gone(&err) => {
                    // The server went away since the connection was last used (a restart,
                    // say): every idle connection is as stale, so start afresh.
                    close(session);
                    let stale: Vec<Session> = locked(&self.idle).drain(..).collect();
                    stale.into_iter().for_each(close);
                    continue;
                }
                Err(err) => {
                    close(session);
                    return Err(db_error("acquire")(err));
                }
            };
            session.backend_pid = tried.backend_pid;
            self.report_collisions(&request.name, key, tried.others);
            if tried.semaphore {
                self.checkin(session);
                return Err(advisory::kind_clash(&request.name, "a semaphore"));
            }
            return Ok(match tried.fence {
                Some(fence) => {
                    self.hold(request, key, session);
                    granted(fence)
                }
                None if request.wait => {
                    self.start_wait(request, key, session);
                    pending()
                }
                None => {
                    self.checkin(session);
                    pending()
                }
            });
        }
    }

    fn start_wait(self: &Arc<Self>, request: &LockRequest, key: i64, mut session: Session) {
        let (done, receiver) = watch::channel(false);
        let backend_pid = session.backend_pid;
        let share = Share::of(request);
        let request = request.clone();
        let token = request.token.clone();
        let task = tokio::spawn(async move {
            let fence = async {
                advisory::queue(&mut session.conn, &request, key).await?;
                advisory::wait(&mut session.conn, share, key).await?;
                advisory::granted(&mut session.conn, &request).await
            }
            .await;
            let _ = done.send(true);
            Waited { session, fence }
        });
        locked(&self.slots).insert(
            token,
            Slot::Waiting(Waiting {
                backend_pid,
                key,
                share,
                done: receiver,
                task,
            }),
        );
    }

    fn hold(&self, request: &LockRequest, key: i64, session: Session) {
        let held = Held {
            session: tokio::sync::Mutex::new(Some(session)),
            key,
            share: Share::of(request),
        };
        locked(&self.slots).insert(request.token.clone(), Slot::Held(Arc::new(held)));
    }

    /// Waits until the request's wait ended or `backstop` passed.
    pub(super) async fn wait_for_change(&self, token: &str, backstop: Duration) {
        let done = match locked(&self.slots).get(token) {
            Some(Slot::Waiting(w)) => w.done.clone(),
            _ => return,
        };
        let mut done = done;
        let _ = tokio::time::timeout(backstop, done.wait_for(|d| *d)).await;
    }

    /// Withdraws a request: stops its wait (asking the server through `pool`, or closing
    /// the connection if the server does not answer in time), or releases what it got.
    pub(super) async fn cancel(&self, pool: &PgPool, token: &str) -> Result<()> {
        let slot = locked(&self.slots).remove(token);
        match slot {
            None => Ok(()),
            Some(Slot::Held(held)) => self.unlock(&held).await.map(drop),
            Some(Slot::Waiting(waiting)) => self.stop_wait(pool, token, waiting).await,
        }
    }

    async fn stop_wait(&self, pool: &PgPool, token: &str, waiting: Waiting) -> Result<()> {
        let asked = sqlx::query("SELECT pg_cancel_backend($1)")
            .bind(waiting.backend_pid)
            .execute(pool);
        let _ = tokio::time::timeout(CANCEL_WITHIN, asked).await;
        let mut task = waiting.task;
        let stopped = match tokio::time::timeout(CANCEL_WITHIN, &mut task).await {
            // Granted just before the cancellation arrived: give it back.
            Ok(Ok(Waited {
                session,
                fence: Ok(_),
            })) => {
                let held = Held {
                    session: tokio::sync::Mutex::new(Some(session)),
                    key: waiting.key,
                    share: waiting.share,
                };
                return self.unlock(&held).await.map(drop);
            }
            // The statement was cancelled, possibly after the lock was taken: closing the
            // connection is the one sure way to leave nothing held.
            Ok(Ok(Waited { session, .. })) => {
                close(session);
                Ok(())
            }
            Ok(Err(err)) => Err(task_failed(err)),
            // The server does not answer: dropping the connection closes it, and the server
            // ends the wait once it notices (within `client_connection_check_interval`).
            Err(_) => {
                task.abort();
                Ok(())
            }
        };
        let forget =
            sqlx::query("DELETE FROM distlock_session WHERE backend_pid = $1 AND token = $2")
                .bind(waiting.backend_pid)
                .bind(token)
                .execute(pool);
        let _ = tokio::time::timeout(CANCEL_WITHIN, forget).await;
        stopped
    }

    /// Re-arms the idle limit of a held lock's session; `false` if the session is gone
    /// (which means the server released the lock).
    pub(super) async fn renew(&self, token: &str, ttl: Duration) -> Result<bool> {
        let held = match locked(&self.slots).get(token) {
            Some(Slot::Held(held)) => held.clone(),
            _ => return Ok(false),
        };
        let mut session = held.session.lock().await;
        let Some(current) = session.as_mut() else {
            return Ok(false);
        };
        let idle = advisory::idle_limit(ttl);
        match tokio::time::timeout(ttl, advisory::renew(&mut current.conn, &idle)).await {
            Ok(Ok(())) => Ok(true),
            Ok(Err(_)) | Err(_) => {
                if let Some(gone) = session.take() {
                    close(gone);
                }
                Ok(false)
            }
        }
    }

    /// Releases a held lock; `false` if its session was already gone.
    pub(super) async fn release(&self, token: &str) -> Result<bool> {
        let held = match locked(&self.slots).remove(token) {
            Some(Slot::Held(held)) => held,
            Some(other) => {
                locked(&self.slots).insert(token.to_owned(), other);
                return Ok(false);
            }
            None => return Ok(false),
        };
        self.unlock(&held).await
    }

    async fn unlock(&self, held: &Held) -> Result<bool> {
        let Some(mut session) = held.session.lock().await.take() else {
            return Ok(false);
        };
        match advisory::unlock(&mut session.conn, held.share, held.key).await {
            Ok(true) => {
                self.checkin(session);
                Ok(true)
            }
            Ok(false) | Err(_) => {
                close(session);
                Ok(false)
            }
        }
    }

    /// An idle connection (`true`: reused), or a new one.
    async fn checkout(&self) -> Result<(Session, bool)> {
        if let Some(session) = locked(&self.idle).pop() {
            return Ok((session, true));
        }
        let conn = self.options.connect().await.map_err(db_error("connect"))?;
        Ok((
            Session {
                conn,
                backend_pid: 0,
            },
            false,
        ))
    }

    fn checkin(&self, session: Session) {
        let mut idle = locked(&self.idle);
        if idle.len() < IDLE_KEPT {
            idle.push(session);
        } else {
            drop(idle);
            close(session);
        }
    }

    fn report_collisions(&self, name: &str, key: i64, others: Vec<String>) {
        for other in others {
            let pair = match name < other.as_str() {
                true => (name.to_owned(), other),
                false => (other, name.to_owned()),
            };
            if locked(&self.collisions).insert(pair.clone()) {
                tracing::warn!(
                    first = %pair.0,
                    second = %pair.1,
                    key,
                    "two lock names share one PostgreSQL advisory-lock key; they exclude each other"
                );
            }
        }
    }
}

impl Drop for Sessions {
    /// Stops every wait of a client that goes away (held locks are released by their
    /// connections closing).
    fn drop(&mut self) {
        for slot in locked(&self.slots).values() {
            if let Slot::Waiting(waiting) = slot {
                waiting.task.abort();
            }
        }
    }
}

/// Closes a connection in the background; the server releases everything it held.
fn close(session: Session) {
    tokio::spawn(async move {
        let _ = tokio::time::timeout(Duration::from_secs(5), session.conn.close()).await;
    });
}

/// Whether a statement failed because the connection is gone (a stale idle connection,
/// e.g. after a database restart), so a new connection may be tried.
fn connection_gone(err: &sqlx::Error) -> bool {
    match err {
        sqlx::Error::Io(_) | sqlx::Error::Protocol(_) => true,
        sqlx::Error::Database(db) => db
            .code()
            .is_some_and(|c| c.starts_with("08") || c.starts_with("57P")),
        _ => false,
    }
}

fn granted(fence: i64) -> PollOutcome {
    PollOutcome::Granted {
        fencing_token: fence as u64,
    }
}

fn pending() -> PollOutcome {
    PollOutcome::Pending { retry_within: None }
}

fn task_failed(err: tokio::task::JoinError) -> Error {
    Error::new(ErrorKind::Backend, format!("a database task failed: {err}"))
        .with_backend("postgres")
}

fn locked<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}
