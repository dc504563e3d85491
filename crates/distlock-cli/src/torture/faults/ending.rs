//! How a run's faults and workers end: the fault in force undone, stray stopped workers
//! resumed, the workers stopped early on a signal, and waited for at the end.

use std::os::unix::process::ExitStatusExt;
use std::time::Duration;

use distlock::{Error, ErrorKind, Result};
use distlock_servers::ProxyMode;

use super::{Undo, Workers};
use crate::torture::process::{fault, signal, stopped};
use crate::torture::record::Recorder;
use crate::torture::steps;

impl Workers {
    /// Resumes every worker found stopped, recording it.
    pub(super) fn resume_strays(&mut self, recorder: &Recorder) {
        let pids: Vec<(u32, u32)> = self
            .running
            .iter()
            .filter_map(|(&id, running)| Some((id, running.child.id()?)))
            .filter(|&(_, pid)| stopped(pid))
            .collect();
        if pids.is_empty() {
            return;
        }
        self.holders();
        for (id, pid) in pids {
            if self.paused.remove(&id) {
                recorder.record(id, fault("resume"));
            }
            signal(pid, libc::SIGCONT);
        }
    }

    /// Ends the fault in force, if one is (a link healed, a clock set right, the server
    /// thawed, a master back in reach), recording it.
    pub(super) fn undo_fault(&mut self, recorder: &Recorder) -> Result<()> {
        match self.undo.take() {
            Some(Undo::Link(target)) => {
                if let Some(proxy) = self.proxies.get(&target) {
                    proxy.set(ProxyMode::Pass);
                }
                recorder.record(target, fault("heal"));
            }
            Some(Undo::Clock(target)) => {
                if let Some(clocks) = &self.clocks {
                    clocks.set(target, 0)?;
                }
                recorder.record(target, fault("clock-back"));
            }
            Some(Undo::MasterAside(at)) => {
                if let Some(masters) = self.server.as_ref().and_then(|s| s.masters()) {
                    masters.reach(at, true);
                }
                recorder.record(0, fault("master-back"));
            }
            Some(Undo::ServerPause) => {
                if let Some(server) = &self.server {
                    server.resume();
                }
                recorder.record(0, fault("server-resume"));
            }
            None => {}
        }
        Ok(())
    }

    /// Stops the run early: resumes the paused workers (recording it) and orders every
    /// worker to stop.
    pub async fn stop(&mut self, recorder: &Recorder) {
        // A pause may have been recorded but not read yet.
        self.holders();
        let ids: Vec<u32> = self.running.keys().copied().collect();
        // The workers stop on a healthy store, with their clocks right.
        let _ = self.undo_fault(recorder);
        for &id in &ids {
            // An armed step fault would strike after the stop; one taken as it is
            // withdrawn still may, which `finish` undoes.
            self.order(id, steps::DISARM).await;
        }
        for id in ids {
            if self.paused.remove(&id) {
                recorder.record(id, fault("resume"));
            }
            if let Some(pid) = self.pid(id) {
                signal(pid, libc::SIGCONT);
            }
            self.order(id, steps::STOP).await;
        }
    }

    /// Waits at most `within` for every worker to end: an error naming those that did
    /// not (they are killed) or failed.
    /// A worker that stopped itself at a step after the last fault is resumed (recorded
    /// with `recorder`); one that killed itself at a step, as ordered, did not fail.
    pub async fn finish(mut self, within: Duration, recorder: &Recorder) -> Result<()> {
        let deadline = tokio::time::Instant::now() + within;
        let mut failed = Vec::new();
        while !self.running.is_empty() {
            self.resume_strays(recorder);
            let ids: Vec<u32> = self.running.keys().copied().collect();
            for id in ids {
                let Some(running) = self.running.get_mut(&id) else {
                    continue;
                };
                let status = match running.child.try_wait() {
                    Ok(Some(status)) => status,
                    Ok(None) => continue,
                    Err(err) => {
                        failed.push(format!("worker {id} was lost: {err}"));
                        self.running.remove(&id);
                        continue;
                    }
                };
                self.running.remove(&id);
                if status.signal() == Some(libc::SIGKILL) {
                    self.holders();
                    if !self.killed_itself.contains(&id) {
                        failed.push(format!("worker {id} was killed"));
                    }
                } else if !status.success() {
                    failed.push(format!("worker {id} failed ({status})"));
                }
            }
            if tokio::time::Instant::now() >= deadline {
                for (id, mut running) in std::mem::take(&mut self.running) {
                    let _ = running.child.kill().await;
                    failed.push(format!("worker {id} did not stop within {within:?}"));
                }
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        match failed.is_empty() {
            true => Ok(()),
            false => Err(Error::new(ErrorKind::Backend, failed.join("; "))),
        }
    }
}
