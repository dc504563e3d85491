//! The task of a worker process (`demo`, `bench --processes`, `torture`), handed over on the
//! worker's standard input as one line of JSON: a lock URL may carry a password, and
//! nothing on a command line is secret (`ps` shows it to every user).

use distlock::{Error, ErrorKind, Result};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::io::AsyncWriteExt;
use tokio::process::{Child, ChildStdin, Command};

/// A worker process [`start`] started. Dropped while it runs (this process stopped early,
/// or another worker failed), it is sent SIGTERM rather than killed: it stops, releases
/// the locks it holds and withdraws its waits, and exits. [`wait_for_stopped`] waits for
/// that; one still running as this process exits is killed.
pub struct Worker(Option<Child>);

impl std::ops::Deref for Worker {
    type Target = Child;

    fn deref(&self) -> &Child {
        self.0
            .as_ref()
            .expect("a worker's process is there until the worker drops")
    }
}

impl std::ops::DerefMut for Worker {
    fn deref_mut(&mut self) -> &mut Child {
        self.0
            .as_mut()
            .expect("a worker's process is there until the worker drops")
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        let Some(mut child) = self.0.take() else {
            return;
        };
        if let (Ok(None), Some(pid)) = (child.try_wait(), child.id()) {
            // SAFETY: kill(2) on a child of ours that has not been reaped.
            unsafe { libc::kill(pid as libc::pid_t, libc::SIGTERM) };
            stopping().push(child);
        }
    }
}

/// The workers sent SIGTERM as they dropped, until [`wait_for_stopped`] waits for them.
fn stopping() -> std::sync::MutexGuard<'static, Vec<Child>> {
    static STOPPING: std::sync::Mutex<Vec<Child>> = std::sync::Mutex::new(Vec::new());
    STOPPING
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Waits, at most `within`, for the workers stopped by a drop (see [`Worker`]) to exit:
/// call it before this process exits, which kills those still running, in the middle of
/// releasing their locks perhaps.
pub async fn wait_for_stopped(within: std::time::Duration) {
    let workers = std::mem::take(&mut *stopping());
    let exited = async {
        for mut worker in workers {
            let _ = worker.wait().await;
        }
    };
    let _ = tokio::time::timeout(within, exited).await;
}

/// Starts `command` (a worker subcommand of this binary) and writes `task` to its standard
/// input, which is closed after. The worker's stdout is piped when `report` is set. The
/// worker dies with this process, however it ends (SIGKILL included): a demo or bench
/// killed outright leaves no worker buying from its shop or taking its locks. Stopped
/// early, this process lets the worker stop by itself first (see [`Worker`]).
pub async fn start(mut command: Command, task: &impl Serialize, report: bool) -> Result<Worker> {
    // SAFETY: getpid is async-signal-safe.
    let parent = unsafe { libc::getpid() };
    // SAFETY: the closure runs between fork and exec and calls only async-signal-safe
    // functions (prctl, getppid), allocating nothing.
    unsafe {
        command.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // This process died before the death signal was armed.
            if libc::getppid() != parent {
                return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
            }
            Ok(())
        });
    }
    let (child, _closed) = spawn(command, task, report, false).await?;
    Ok(Worker(Some(child)))
}

/// Like [`start`], but keeps the worker's standard input open after the task for orders,
/// one line each; the worker reads them after [`receive`]. A worker dropped while it runs
/// is killed: its orders say when to stop.
pub async fn start_with_orders(
    command: Command,
    task: &impl Serialize,
    report: bool,
) -> Result<(Child, ChildStdin)> {
    spawn(command, task, report, true).await
}

/// Spawns the worker of `command` and writes it its `task` (see [`start`]); a worker
/// dropped while it runs is killed where `kill_on_drop` says so.
async fn spawn(
    mut command: Command,
    task: &impl Serialize,
    report: bool,
    kill_on_drop: bool,
) -> Result<(Child, ChildStdin)> {
    let stdout = match report {
        true => std::process::Stdio::piped(),
        false => std::process::Stdio::null(),
    };
    let mut child = command
        .env_remove("DISTLOCK_URL")
        .stdin(std::process::Stdio::piped())
        .stdout(stdout)
        .kill_on_drop(kill_on_drop)
        .spawn()
        .map_err(|e| Error::invalid(format!("cannot start a worker process: {e}")))?;
    let mut input = serde_json::to_vec(task).expect("a task is plain data");
    input.push(b'\n');
    let mut stdin = child.stdin.take().expect("the worker's stdin is piped");
    stdin.write_all(&input).await.map_err(|e| {
        Error::new(
            ErrorKind::Backend,
            format!("cannot hand a worker its task: {e}"),
        )
    })?;
    Ok((child, stdin))
}

/// The task this worker process was started with: the first line of its standard input.
pub fn receive<T: DeserializeOwned>() -> Result<T> {
    let mut input = String::new();
    std::io::stdin()
        .read_line(&mut input)
        .map_err(|e| Error::invalid(format!("cannot read the worker's task: {e}")))?;
    serde_json::from_str(&input).map_err(|e| Error::invalid(format!("unreadable worker task: {e}")))
}
