//! A runtime of a backend's own, on a thread of its own, for the sessions a client keeps in
//! the background: a client outlives whichever runtime connected it (a service's runtimes
//! come and go; every `#[tokio::test]` makes one), and its session's heartbeats and watches
//! go on while the caller's runtime is busy.

use std::future::Future;
use std::sync::OnceLock;
use std::time::Duration;

use tokio::sync::watch;

use crate::error::{Error, ErrorKind, Result};

/// How long a broken watch of a lock's news waits before it is set again.
const REWATCH_AFTER: Duration = Duration::from_millis(500);

/// A lazily started runtime with one worker thread, for one backend's background tasks.
///
/// # Examples
///
/// ```
/// # async fn demo() -> distlock_core::Result<()> {
/// use distlock_core::backend::SideRuntime;
///
/// static SESSIONS: SideRuntime = SideRuntime::new("example", "distlock-example");
/// let answer = SESSIONS.run(async { Ok(6 * 7) }).await?;
/// assert_eq!(answer, 42);
/// # Ok(()) }
/// ```
pub struct SideRuntime {
    backend: &'static str,
    thread_name: &'static str,
    runtime: OnceLock<std::result::Result<tokio::runtime::Runtime, String>>,
}

impl std::fmt::Debug for SideRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SideRuntime")
            .field("thread_name", &self.thread_name)
            .finish()
    }
}

impl SideRuntime {
    /// A runtime for `backend`'s tasks (the name is used in errors), whose thread is called
    /// `thread_name`; nothing starts until its first task.
    ///
    /// # Examples
    ///
    /// See [`SideRuntime`].
    pub const fn new(backend: &'static str, thread_name: &'static str) -> Self {
        SideRuntime {
            backend,
            thread_name,
            runtime: OnceLock::new(),
        }
    }

    /// The runtime's handle; an error if its thread could not be started.
    fn handle(&self) -> Result<tokio::runtime::Handle> {
        let runtime = self.runtime.get_or_init(|| {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .thread_name(self.thread_name)
                .enable_all()
                .build()
                .map_err(|e| e.to_string())
        });
        match runtime {
            Ok(runtime) => Ok(runtime.handle().clone()),
            Err(why) => Err(Error::new(
                ErrorKind::Unavailable,
                format!(
                    "cannot start the thread {} runs on: {why}",
                    self.thread_name
                ),
            )
            .with_backend(self.backend)),
        }
    }

    /// Runs `task` on this runtime and waits for its answer.
    ///
    /// # Examples
    ///
    /// See [`SideRuntime`].
    pub async fn run<T: Send + 'static>(
        &self,
        task: impl Future<Output = Result<T>> + Send + 'static,
    ) -> Result<T> {
        self.handle()?.spawn(task).await.map_err(|e| {
            Error::new(
                ErrorKind::Backend,
                format!("a task on {} failed: {e}", self.thread_name),
            )
            .with_backend(self.backend)
        })?
    }

    /// Starts `task` on this runtime, where it keeps running whatever runtime the caller is
    /// on; without this runtime, on the caller's.
    ///
    /// # Examples
    ///
    /// ```
    /// # async fn demo() {
    /// use distlock_core::backend::SideRuntime;
    ///
    /// static SESSIONS: SideRuntime = SideRuntime::new("example", "distlock-example");
    /// SESSIONS.spawn(async { /* a heartbeat loop */ });
    /// # }
    /// ```
    pub fn spawn(&self, task: impl Future<Output = ()> + Send + 'static) {
        match self.handle() {
            Ok(handle) => drop(handle.spawn(task)),
            Err(_) => drop(tokio::spawn(task)),
        }
    }

    /// News of a lock for its observers (see
    /// [`Backend::lock_news`](crate::backend::Backend::lock_news)), kept on this runtime
    /// while a receiver lives: `follow` sets the store's watches, adds one to the count it
    /// is given at each event, and returns when a watch breaks (the session ended, the
    /// store cancelled it); it is started again half a second later. A watch set again
    /// should count one, in case a change went unseen while it was down.
    ///
    /// # Examples
    ///
    /// ```
    /// # async fn demo() {
    /// use distlock_core::backend::SideRuntime;
    ///
    /// static SESSIONS: SideRuntime = SideRuntime::new("example", "distlock-example");
    /// let mut news = SESSIONS.follow_news(|count| async move {
    ///     // set the watches, then at each event:
    ///     count.send_modify(|n| *n += 1);
    ///     std::future::pending::<()>().await
    /// });
    /// news.changed().await.unwrap();
    /// assert_eq!(*news.borrow(), 1);
    /// # }
    /// ```
    pub fn follow_news<F, Fut>(&self, follow: F) -> watch::Receiver<u64>
    where
        F: Fn(watch::Sender<u64>) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send,
    {
        let (sender, receiver) = watch::channel(0);
        self.spawn(async move {
            loop {
                tokio::select! {
                    () = sender.closed() => return,
                    () = follow(sender.clone()) => {}
                }
                tokio::select! {
                    () = sender.closed() => return,
                    () = tokio::time::sleep(REWATCH_AFTER) => {}
                }
            }
        });
        receiver
    }
}
