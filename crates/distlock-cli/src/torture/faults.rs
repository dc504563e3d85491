//! The workers as the coordinator runs them, and the faults it injects into them: a
//! holder paused (SIGSTOP) past its TTL and resumed, a holder killed (SIGKILL) and
//! replaced by a new worker. The schedule is drawn from a seed, so a run can be replayed.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::Duration;

use distlock::{Error, ErrorKind, Result};
use distlock_cli::history::{Event, What};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::io::AsyncWriteExt;
use tokio::process::{Child, Command};

use super::record::Recorder;
use super::worker::Task;
use crate::args::FaultKind;

/// The worker processes of a run.
pub struct Workers {
    exe: PathBuf,
    /// The task of every worker, its id and deadline to be filled in.
    template: Task,
    running: BTreeMap<u32, Child>,
    next_id: u32,
    /// How far the history has been read, and who holds the lock by it.
    read: usize,
    holding: BTreeSet<u32>,
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
            read: 0,
            holding: BTreeSet::new(),
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
        let mut child = Command::new(&self.exe)
            .arg("torture-worker")
            .env_remove("DISTLOCK_URL")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| Error::invalid(format!("cannot start a torture worker: {e}")))?;
        let input = serde_json::to_vec(&task).expect("a task is plain data");
        if let Some(mut stdin) = child.stdin.take() {
            stdin.write_all(&input).await.map_err(|e| {
                Error::new(
                    ErrorKind::Backend,
                    format!("cannot hand a worker its task: {e}"),
                )
            })?;
        }
        self.running.insert(id, child);
        Ok(())
    }

    /// Who holds the lock now, by the history written so far.
    fn holders(&mut self) -> Vec<u32> {
        let Ok(text) = std::fs::read_to_string(&self.template.history) else {
            return Vec::new();
        };
        let fresh = text.get(self.read..).unwrap_or("");
        // Only whole lines: a line being written is read next time.
        let whole = fresh.rfind('\n').map_or(0, |end| end + 1);
        for line in fresh[..whole].lines() {
            let Ok(event) = serde_json::from_str::<Event>(line) else {
                continue;
            };
            match event.what {
                What::Granted { .. } => {
                    self.holding.insert(event.worker);
                }
                What::Release | What::Fault { .. } => {
                    self.holding.remove(&event.worker);
                }
                _ => {}
            }
        }
        self.read += whole;
        self.holding
            .iter()
            .copied()
            .filter(|w| self.running.contains_key(w))
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
        let kind = kinds[rng.random_range(0..kinds.len())];
        let mut holders = self.holders();
        for _ in 0..50 {
            if !holders.is_empty() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
            holders = self.holders();
        }
        let candidates: Vec<u32> = match holders.is_empty() {
            true => self.running.keys().copied().collect(),
            false => holders,
        };
        let Some(&target) = candidates.get(rng.random_range(0..candidates.len().max(1))) else {
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
                let ttl = self.template.ttl;
                tokio::time::sleep(ttl + ttl / 2 + Duration::from_millis(rng.random_range(0..200)))
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

/// A fault schedule's random source, from `seed`.
pub fn schedule(seed: u64) -> StdRng {
    StdRng::seed_from_u64(seed)
}
