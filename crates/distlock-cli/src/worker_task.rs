//! The task of a worker process (`demo`, `bench --processes`, `torture`), handed over on the
//! worker's standard input as one line of JSON: a lock URL may carry a password, and
//! nothing on a command line is secret (`ps` shows it to every user).

use distlock::{Error, ErrorKind, Result};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::io::AsyncWriteExt;
use tokio::process::{Child, ChildStdin, Command};

/// Starts `command` (a worker subcommand of this binary) and writes `task` to its standard
/// input, which is closed after. The worker's stdout is piped when `report` is set. The
/// worker dies with this process, however it ends (SIGKILL included): a demo or bench
/// killed outright leaves no worker buying from its shop or taking its locks.
pub async fn start(mut command: Command, task: &impl Serialize, report: bool) -> Result<Child> {
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
    let (child, _closed) = start_with_orders(command, task, report).await?;
    Ok(child)
}

/// Like [`start`], but keeps the worker's standard input open after the task for orders,
/// one line each; the worker reads them after [`receive`].
pub async fn start_with_orders(
    mut command: Command,
    task: &impl Serialize,
    report: bool,
) -> Result<(Child, ChildStdin)> {
    let stdout = match report {
        true => std::process::Stdio::piped(),
        false => std::process::Stdio::null(),
    };
    let mut child = command
        .env_remove("DISTLOCK_URL")
        .stdin(std::process::Stdio::piped())
        .stdout(stdout)
        .kill_on_drop(true)
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
