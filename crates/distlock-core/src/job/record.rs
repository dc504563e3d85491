//! A job's run record: kept in the store as the note of the job's name, stamped with the
//! store's clock, written at each run's start and end under the run's grant.

use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

use crate::backend::{Backend, Grant, Note};
use crate::error::{Error, ErrorKind, Result};
use crate::owner::HolderMeta;
use crate::owner::at_unix_ms;

/// How a job's last run stands.
///
/// # Examples
///
/// ```
/// use distlock_core::RunState;
/// assert_eq!(RunState::Succeeded.as_str(), "succeeded");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum RunState {
    /// Started, not finished (or its holder ended without saying).
    Running,
    /// Its body returned `Ok`.
    Succeeded,
    /// Its body returned an error, panicked, ran past `at_most` or lost its grant.
    Failed,
}

impl RunState {
    /// Its name: `running`, `succeeded` or `failed`.
    ///
    /// # Examples
    ///
    /// See [`RunState`].
    pub fn as_str(self) -> &'static str {
        match self {
            RunState::Running => "running",
            RunState::Succeeded => "succeeded",
            RunState::Failed => "failed",
        }
    }
}

/// A job's run record, as [`Client::job_status`](crate::Client::job_status) reads it from
/// the store. Times are the store's clock where it has one (`None` on etcd, whose store
/// has none).
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> distlock_core::Result<()> {
/// use distlock_core::RunState;
/// # let client = distlock_core::Client::connect("memory://").await?;
/// assert!(client.job_status("jobs/report").await?.is_none());
/// client.job("jobs/report").run(async |_| Ok::<_, distlock_core::Error>(())).await?;
/// let status = client.job_status("jobs/report").await?.expect("a record");
/// assert_eq!(status.state, RunState::Succeeded);
/// assert!(status.finished >= status.started);
/// assert_eq!(status.last_success, status.started);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct JobStatus {
    /// How the last run stands.
    pub state: RunState,
    /// When the last run started.
    pub started: Option<SystemTime>,
    /// When it finished (`None` while it runs).
    pub finished: Option<SystemTime>,
    /// When the last run that succeeded started.
    pub last_success: Option<SystemTime>,
    /// The owner of the last run's grant.
    pub holder: String,
    /// Its host and process.
    pub host: String,
    /// Its process id.
    pub pid: u32,
    /// Its grant's fencing token.
    pub fencing_token: u64,
    /// What is left of the `once_per` window after the last success, measured by the
    /// store now (`None`: the job may run again).
    pub quiet_for: Option<Duration>,
}

/// The stored form: short names, as it is written twice per run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct Stored {
    /// The state.
    o: RunState,
    /// When the run started, on the store's clock (ms since the Unix epoch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    s: Option<u64>,
    /// When the last run that succeeded started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    l: Option<u64>,
    /// The owner.
    w: String,
    h: String,
    p: u32,
}

/// The record read before a run: its last success, and the quiet window it has.
#[derive(Debug, Clone, Default)]
pub(super) struct Before {
    pub(super) last_success_ms: Option<u64>,
    pub(super) quiet_for: Option<Duration>,
}

impl Before {
    /// The record of `name` before a run: `None` when the backend keeps no notes.
    pub(super) async fn read(backend: &dyn Backend, name: &str) -> Result<Option<Before>> {
        let note = match backend.read_note(name).await {
            Ok(note) => note,
            Err(err) if err.kind() == ErrorKind::Unsupported => return Ok(None),
            Err(err) => return Err(err),
        };
        let Some(note) = note else {
            return Ok(Some(Before::default()));
        };
        let stored = decode(name, &note.value)?;
        Ok(Some(Before {
            last_success_ms: stored.l,
            quiet_for: note.quiet_for,
        }))
    }
}

/// One write of a run's record.
pub(super) struct Write<'a> {
    pub(super) backend: &'a dyn Backend,
    pub(super) grant: &'a Grant,
    pub(super) fencing_token: u64,
    pub(super) owner: &'a str,
}

impl Write<'_> {
    /// Writes the run's record in `state`; answers the store's time of the write.
    pub(super) async fn write(
        &self,
        state: RunState,
        started_ms: Option<u64>,
        last_success_ms: Option<u64>,
        quiet_for: Option<Duration>,
    ) -> Result<Option<u64>> {
        let meta = HolderMeta::this_process();
        let stored = Stored {
            o: state,
            s: started_ms,
            l: last_success_ms,
            w: self.owner.to_owned(),
            h: meta.host,
            p: meta.pid,
        };
        let value = serde_json::to_string(&stored).map_err(|e| {
            Error::new(
                ErrorKind::Backend,
                format!("cannot encode a run record: {e}"),
            )
        })?;
        self.backend
            .write_note(self.grant, self.fencing_token, &value, quiet_for)
            .await
    }
}

/// The status a note of job `name` says.
pub(super) fn status(name: &str, note: Note) -> Result<JobStatus> {
    let stored = decode(name, &note.value)?;
    let at = |ms: Option<u64>| ms.map(at_unix_ms);
    let (started, finished) = match stored.o {
        RunState::Running => (note.written_unix_ms.or(stored.s), None),
        _ => (stored.s, note.written_unix_ms),
    };
    Ok(JobStatus {
        state: stored.o,
        started: at(started),
        finished: at(finished),
        last_success: at(stored.l),
        holder: stored.w,
        host: stored.h,
        pid: stored.p,
        fencing_token: note.fencing_token,
        quiet_for: note.quiet_for,
    })
}

/// The stored record `value` of job `name`.
fn decode(name: &str, value: &str) -> Result<Stored> {
    serde_json::from_str(value).map_err(|e| {
        Error::new(
            ErrorKind::Backend,
            format!(
                "the note of `{name}` is not a job's run record ({e}): another program writes it"
            ),
        )
    })
}
