//! The runtime the ZooKeeper sessions of this process live on: a thread of its own, so a
//! client outlives whichever runtime connected it (a service's runtimes come and go; every
//! `#[tokio::test]` makes one). zookeeper-client runs each session's task on the runtime
//! that connects it, and distlock's heartbeats and watches run beside it.

use std::future::Future;
use std::sync::LazyLock;

use distlock_core::{Error, ErrorKind, Result};

static RUNTIME: LazyLock<std::result::Result<tokio::runtime::Runtime, String>> =
    LazyLock::new(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("distlock-zookeeper")
            .enable_all()
            .build()
            .map_err(|e| e.to_string())
    });

/// The sessions' runtime; an error if its thread could not be started.
fn handle() -> Result<tokio::runtime::Handle> {
    match &*RUNTIME {
        Ok(runtime) => Ok(runtime.handle().clone()),
        Err(why) => Err(Error::new(
            ErrorKind::Unavailable,
            format!("cannot start the thread ZooKeeper sessions run on: {why}"),
        )
        .with_backend("zookeeper")),
    }
}

/// Runs `task` on the sessions' runtime and waits for its answer.
pub(crate) async fn run<T: Send + 'static>(
    task: impl Future<Output = Result<T>> + Send + 'static,
) -> Result<T> {
    handle()?.spawn(task).await.map_err(|e| {
        Error::new(
            ErrorKind::Backend,
            format!("a task on the ZooKeeper sessions' runtime failed: {e}"),
        )
        .with_backend("zookeeper")
    })?
}

/// Starts `task` on the sessions' runtime (where it keeps running, whatever runtime the
/// caller is on); without that runtime, on the caller's.
pub(crate) fn spawn(task: impl Future<Output = ()> + Send + 'static) {
    match handle() {
        Ok(handle) => drop(handle.spawn(task)),
        Err(_) => drop(tokio::spawn(task)),
    }
}
