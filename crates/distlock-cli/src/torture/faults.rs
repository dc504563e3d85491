//! The workers as the coordinator runs them, and the faults it injects into them: a
//! holder paused (SIGSTOP) past its TTL and resumed, a holder killed (SIGKILL) and
//! replaced by a new worker. The kinds asked for take turns; on which holder each lands,
//! and how long a pause lasts beyond the holder's validity, is drawn from a seed. The
//! timing of a run is its own, so a seed repeats the choices, not the run.

use std::collections::BTreeMap;
use std::io::{Read, Seek, SeekFrom};
use std::path::PathBuf;
use std::time::Duration;

use distlock::{Error, ErrorKind, Result};
use distlock_cli::history::{Event, What, monotonic_ns};
use rand::Rng;
use rand::rngs::StdRng;
use tokio::process::{Child, Command};

use super::record::Recorder;
use super::worker::Task;
use crate::args::FaultKind;
use crate::worker_task;

/// The worker processes of a run.
pub struct Workers {
    exe: PathBuf,
    /// The task of every worker, its id to be filled in.
    template: Task,
    running: BTreeMap<u32, Child>,
    next_id: u32,
    /// How many faults were injected: the kinds asked for take turns.
    injected: usize,
    /// How far the history has been read, and who holds the lock by it, valid until when
    /// (on the shared clock).
    read: u64,
    holding: BTreeMap<u32, u64>,
}

impl Workers {
    /// Starts `count` workers on `template` (workers 1..=count).
    pub async fn start(template: Task, count: u32) -> Result<Workers> {
        let exe = std::env::current_exe()
            .map_err(|e| Error::invalid(format!("cannot find the distlock binary: {e}")))?;
        let mut workers = Workers {
            exe,
            template,
            running: BTreeMap::new(),
            next_id: 1,
            injected: 0,
            read: 0,
            holding: BTreeMap::new(),
        };
        for _ in 0..count {
            workers.spawn().await?;
        }
        Ok(workers)
    }

    /// Starts one more worker, with the next id.
    async fn spawn(&mut self) -> Result<()> {
        let id = self.next_id;
        self.next_id += 1;
        let task = Task {
            worker: id,
            ..self.template.clone()
        };
        let mut command = Command::new(&self.exe);
        command.arg("torture-worker");
        // SAFETY: prctl is async-signal-safe. A worker dies with the coordinator (killed,
        // interrupted, or ending on an error), stopped or not, instead of running on.
        unsafe {
            command.pre_exec(
                || match libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) {
                    0 => Ok(()),
                    _ => Err(std::io::Error::last_os_error()),
                },
            );
        }
        let child = worker_task::start(command, &task, false).await?;
        self.running.insert(id, child);
        Ok(())
    }

    /// Who holds the lock now, by the history written since the last look, and until
    /// when each is valid.
    fn holders(&mut self) -> Vec<(u32, u64)> {
        let mut fresh = Vec::new();
        let read = std::fs::File::open(&self.template.history).and_then(|mut file| {
            file.seek(SeekFrom::Start(self.read))?;
            file.read_to_end(&mut fresh)
        });
        if read.is_err() {
            return Vec::new();
        }
        // Only whole lines: a line being written is read next time.
        let whole = fresh
            .iter()
            .rposition(|b| *b == b'\n')
            .map_or(0, |end| end + 1);
        for line in fresh[..whole].split(|b| *b == b'\n') {
            let Ok(event) = serde_json::from_slice::<Event>(line) else {
                continue;
            };
            match event.what {
                What::Granted { safe_until, .. } | What::Renewed { safe_until } => {
                    self.holding.insert(event.worker, safe_until);
                }
                What::Release => {
                    self.holding.remove(&event.worker);
                }
                What::Fault { fault } if fault == "kill" => {
                    self.holding.remove(&event.worker);
                }
                _ => {}
            }
        }
        self.read += whole as u64;
        self.holding
            .iter()
            .map(|(w, until)| (*w, *until))
            .filter(|(w, _)| self.running.contains_key(w))
            .collect()
    }

    /// Injects one fault of `kinds` into a holder (a random worker if none holds within
    /// a second), recording it.
    pub async fn inject(
        &mut self,
        kinds: &[FaultKind],
        rng: &mut StdRng,
        recorder: &Recorder,
    ) -> Result<()> {
        let kinds: Vec<FaultKind> = kinds
            .iter()
            .copied()
            .filter(|k| *k != FaultKind::None)
            .collect();
        if kinds.is_empty() {
            return Ok(());
        }
        let kind = kinds[self.injected % kinds.len()];
        self.injected += 1;
        let mut holders = self.holders();
        for _ in 0..50 {
            if !holders.is_empty() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
            holders = self.holders();
        }
        let candidates: Vec<(u32, u64)> = match holders.is_empty() {
            true => self.running.keys().map(|w| (*w, 0)).collect(),
            false => holders,
        };
        let Some(&(target, valid_until)) =
            candidates.get(rng.random_range(0..candidates.len().max(1)))
        else {
            return Ok(());
        };
        let Some(pid) = self.running.get(&target).and_then(|c| c.id()) else {
            return Ok(());
        };
        let signal = |signal| {
            // SAFETY: kill(2) on a child of ours that has not been reaped.
            unsafe { libc::kill(pid as i32, signal) };
        };
        match kind {
            FaultKind::Pause => {
                signal(libc::SIGSTOP);
                recorder.record(
                    target,
                    What::Fault {
                        fault: "pause".into(),
                    },
                );
                // Past its TTL, and past the validity its guard was given (a session
                // backend's outlasts the TTL), but not past the run's end by more than a
                // TTL.
                let ttl = self.template.ttl;
                let past_ttl = monotonic_ns() + (ttl + ttl / 2).as_nanos() as u64;
                let past_validity = valid_until.saturating_add(300_000_000);
                let latest = self.template.until + ttl.as_nanos() as u64;
                let resume = past_ttl.max(past_validity).min(latest.max(past_ttl))
                    + rng.random_range(0..200_000_000);
                tokio::time::sleep(Duration::from_nanos(resume.saturating_sub(monotonic_ns())))
                    .await;
                recorder.record(
                    target,
                    What::Fault {
                        fault: "resume".into(),
                    },
                );
                signal(libc::SIGCONT);
            }
            FaultKind::Kill => {
                signal(libc::SIGKILL);
                recorder.record(
                    target,
                    What::Fault {
                        fault: "kill".into(),
                    },
                );
                if let Some(mut child) = self.running.remove(&target) {
                    let _ = child.wait().await;
                }
                self.spawn().await?;
            }
            FaultKind::None => {}
        }
        Ok(())
    }

    /// Waits at most `within` for every worker to end: an error naming those that did
    /// not (they are killed) or failed.
    pub async fn finish(mut self, within: Duration) -> Result<()> {
        let deadline = tokio::time::Instant::now() + within;
        let mut failed = Vec::new();
        for (id, mut child) in std::mem::take(&mut self.running) {
            match tokio::time::timeout_at(deadline, child.wait()).await {
                Ok(Ok(status)) if status.success() => {}
                Ok(Ok(status)) => failed.push(format!("worker {id} failed ({status})")),
                Ok(Err(err)) => failed.push(format!("worker {id} was lost: {err}")),
                Err(_) => {
                    let _ = child.kill().await;
                    failed.push(format!("worker {id} did not stop within {within:?}"));
                }
            }
        }
        match failed.is_empty() {
            true => Ok(()),
            false => Err(Error::new(ErrorKind::Backend, failed.join("; "))),
        }
    }
}
