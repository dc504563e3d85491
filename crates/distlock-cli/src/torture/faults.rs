//! The workers as the coordinator runs them, and the faults it injects into them: a
//! holder paused (SIGSTOP) past its TTL and resumed, a holder killed (SIGKILL) and
//! replaced by a new worker, and the same done by a worker to itself at a step of its lock
//! scheme on the coordinator's order. The kinds asked for take turns, and step faults of
//! a kind take the scheme's steps in turn; on which worker each lands is drawn from a
//! seed. The timing of a run is its own, so a seed repeats the choices, not the run. A
//! paused worker is resumed past its TTL and its validity, at a moment another worker
//! holds the lock if one does soon: the moment a stale holder does the most harm.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::time::Duration;

use distlock::{Error, ErrorKind, Result};
use distlock_check::history::{Event, What, monotonic_ns};
use rand::Rng;
use rand::rngs::StdRng;
use tokio::io::AsyncWriteExt;
use tokio::process::{Child, ChildStdin, Command};

use distlock_servers::{FaultProxy, ProxyMode};

use super::clock::Clocks;
use super::link::Link;
use super::process::{State, fault, signal, stopped};
use super::record::Recorder;
use super::server::OwnServer;
use super::steps::{self, Act};
use super::worker::Task;
use crate::args::FaultKind;

mod ending;
mod masters;
use crate::worker_task;

/// How long a worker ordered to fault at a step gets to reach it.
const STEP_WAIT: Duration = Duration::from_secs(5);

/// How long a worker that recorded a step fault gets to do it.
const STRUCK_WAIT: Duration = Duration::from_secs(2);

/// How long a resume may wait for another worker to hold the lock.
const RESUME_WAIT: Duration = Duration::from_millis(300);

/// A running worker: its process, and the pipe its orders go down.
struct Running {
    child: Child,
    orders: ChildStdin,
}

/// The worker processes of a run.
pub struct Workers {
    exe: PathBuf,
    /// The task of every worker, its id to be filled in.
    template: Task,
    running: BTreeMap<u32, Running>,
    next_id: u32,
    /// How many faults were injected: the kinds asked for take turns.
    injected: usize,
    /// How many step faults of each act were ordered: they take the scheme's steps in turn.
    stepped: [usize; 2],
    /// How far the history has been read, and who holds the lock by it, valid until when
    /// (on the shared clock).
    read: u64,
    holding: BTreeMap<u32, u64>,
    /// When the last grant was made, by the history.
    last_grant: u64,
    /// Who is paused, by the history.
    paused: BTreeSet<u32>,
    /// When each worker last did a step fault to itself, by the history; who killed
    /// itself so.
    struck: BTreeMap<u32, u64>,
    killed_itself: BTreeSet<u32>,
    /// The store's server, when workers reach it through proxies; each worker's proxy.
    link: Option<Link>,
    proxies: BTreeMap<u32, FaultProxy>,
    /// The workers' fake clocks, for clock faults.
    clocks: Option<Clocks>,
    /// The server the run started, for server faults.
    server: Option<OwnServer>,
    /// How to end the fault in force, if it lasts a while and is not a worker's pause.
    undo: Option<Undo>,
}

/// A fault in force that the coordinator ends.
enum Undo {
    /// Worker's link cut or black-holed.
    Link(u32),
    /// Worker's wall clock ahead.
    Clock(u32),
    /// The server frozen.
    ServerPause,
    /// A RedLock master out of its clients' reach.
    MasterAside(usize),
}

impl Workers {
    /// Starts `count` workers on `template` (workers 1..=count), each through a proxy of
    /// its own on `link` if there is one, and under a fake clock with `clocks`; `server`
    /// is the run's own, if it started one.
    pub async fn start(
        template: Task,
        count: u32,
        (link, clocks): (Option<Link>, Option<Clocks>),
        server: Option<OwnServer>,
    ) -> Result<Workers> {
        let exe = std::env::current_exe()
            .map_err(|e| Error::invalid(format!("cannot find the distlock binary: {e}")))?;
        let mut workers = Workers {
            exe,
            template,
            running: BTreeMap::new(),
            next_id: 1,
            injected: 0,
            stepped: [0; 2],
            read: 0,
            holding: BTreeMap::new(),
            last_grant: 0,
            paused: BTreeSet::new(),
            struck: BTreeMap::new(),
            killed_itself: BTreeSet::new(),
            link,
            proxies: BTreeMap::new(),
            clocks,
            server,
            undo: None,
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
        let mut task = Task {
            worker: id,
            ..self.template.clone()
        };
        if let Some(link) = &self.link {
            let proxy = FaultProxy::start(link.server).await.map_err(|e| {
                Error::new(
                    ErrorKind::Backend,
                    format!("cannot start a fault proxy: {e}"),
                )
            })?;
            task.url = link.through(proxy.addr());
            self.proxies.insert(id, proxy);
        }
        let mut command = Command::new(&self.exe);
        command.arg("torture-worker");
        // A worker's warnings are the faults the run injects (a lease lost to a pause, a
        // connection cut), each in the history and the report: above the verdict they would
        // read as trouble. Errors still show; DISTLOCK_LOG, when set, is the user's choice.
        if std::env::var_os("DISTLOCK_LOG").is_none() {
            command.env("DISTLOCK_LOG", "error");
        }
        if let Some(clocks) = &self.clocks {
            clocks.prepare(&mut command, id)?;
        }
        // SAFETY: prctl and signal are async-signal-safe. A worker dies with the
        // coordinator (killed, or ending on an error), stopped or not, instead of running
        // on. It ignores the terminal's Ctrl-C and hangup, which reach its whole process
        // group: the coordinator stops it cleanly on those.
        unsafe {
            command.pre_exec(|| {
                libc::signal(libc::SIGINT, libc::SIG_IGN);
                libc::signal(libc::SIGHUP, libc::SIG_IGN);
                match libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) {
                    0 => Ok(()),
                    _ => Err(std::io::Error::last_os_error()),
                }
            });
        }
        let (child, orders) = worker_task::start_with_orders(command, &task, false).await?;
        self.running.insert(id, Running { child, orders });
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
                What::Granted { safe_until, .. } => {
                    self.holding.insert(event.worker, safe_until);
                    self.last_grant = self.last_grant.max(event.at);
                }
                What::Renewed { safe_until } => {
                    self.holding.insert(event.worker, safe_until);
                }
                What::Release => {
                    self.holding.remove(&event.worker);
                }
                What::Fault { fault, step } if fault == "kill" => {
                    self.holding.remove(&event.worker);
                    if step.is_some() {
                        self.struck.insert(event.worker, event.at);
                        self.killed_itself.insert(event.worker);
                    }
                }
                What::Fault { fault, step } if fault == "pause" => {
                    self.paused.insert(event.worker);
                    if step.is_some() {
                        self.struck.insert(event.worker, event.at);
                    }
                }
                What::Fault { fault, .. } if fault == "resume" => {
                    self.paused.remove(&event.worker);
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

    /// Injects one fault of `kinds`: into a holder (a random worker if none holds within a
    /// second) for a pause or a kill, into a random worker for a step fault. Records it
    /// (a step fault is recorded by the worker that does it).
    pub async fn inject(
        &mut self,
        kinds: &[FaultKind],
        rng: &mut StdRng,
        recorder: &Recorder,
    ) -> Result<()> {
        // A worker that took a step order as it was withdrawn may have stopped itself
        // since: no fault is in force between two, so it is resumed.
        self.resume_strays(recorder);
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
        match kind {
            FaultKind::StepPause => self.at_step(Act::Pause, rng, recorder).await,
            FaultKind::StepCrash => self.at_step(Act::Crash, rng, recorder).await,
            FaultKind::Pause | FaultKind::Kill => self.at_holder(kind, rng, recorder).await,
            FaultKind::Cut => self.at_link((ProxyMode::Cut, "cut"), rng, recorder).await,
            FaultKind::BlackHole => {
                self.at_link((ProxyMode::BlackHole, "black-hole"), rng, recorder)
                    .await
            }
            FaultKind::ClockJump => self.at_clock(rng, recorder).await,
            FaultKind::ServerPause | FaultKind::ServerRestart => {
                self.at_server(kind == FaultKind::ServerRestart, recorder)
                    .await
            }
            FaultKind::MasterRestart | FaultKind::Failover | FaultKind::MasterClockJump => {
                self.at_master(kind, rng, recorder).await
            }
            FaultKind::None => Ok(()),
        }
    }

    /// Pauses or kills a holder from outside, at whatever it is doing.
    async fn at_holder(
        &mut self,
        kind: FaultKind,
        rng: &mut StdRng,
        recorder: &Recorder,
    ) -> Result<()> {
        let Some((target, valid_until)) = self.pick_holder(rng).await else {
            return Ok(());
        };
        let Some(pid) = self.pid(target) else {
            return Ok(());
        };
        match kind {
            FaultKind::Pause => {
                signalled(recorder, (target, pid), (libc::SIGSTOP, "pause"));
                self.resume(target, pid, valid_until, recorder).await;
            }
            _ => {
                killed(recorder, target, pid).await;
                self.replace(target).await?;
            }
        }
        Ok(())
    }

    /// Cuts or black-holes a holder's link to the store past its TTL and its validity,
    /// then heals it.
    async fn at_link(
        &mut self,
        (mode, name): (ProxyMode, &str),
        rng: &mut StdRng,
        recorder: &Recorder,
    ) -> Result<()> {
        let Some((target, valid_until)) = self.pick_holder(rng).await else {
            return Ok(());
        };
        let Some(proxy) = self.proxies.get(&target) else {
            return Ok(());
        };
        proxy.set(mode);
        recorder.record(target, fault(name));
        self.undo = Some(Undo::Link(target));
        self.wait_out(target, valid_until).await;
        self.undo_fault(recorder)
    }

    /// Jumps a waiting worker's wall clock ahead by ten TTLs, past the holders' validity,
    /// then sets it right.
    async fn at_clock(&mut self, rng: &mut StdRng, recorder: &Recorder) -> Result<()> {
        let Some(target) = self.pick_waiter(rng) else {
            return Ok(());
        };
        let Some(clocks) = &self.clocks else {
            return Ok(());
        };
        clocks.set(target, (self.template.ttl * 10).as_secs().max(10))?;
        recorder.record(target, fault("clock-jump"));
        self.undo = Some(Undo::Clock(target));
        let valid_until = self.holders().iter().map(|&(_, until)| until).max();
        self.wait_out(target, valid_until.unwrap_or(0)).await;
        self.undo_fault(recorder)
    }

    /// A worker that waits for the lock (any worker, if none does).
    fn pick_waiter(&mut self, rng: &mut StdRng) -> Option<u32> {
        let holders: BTreeSet<u32> = self.holders().iter().map(|&(w, _)| w).collect();
        let ids: Vec<u32> = self.running.keys().copied().collect();
        let waiting: Vec<u32> = ids
            .iter()
            .copied()
            .filter(|w| !holders.contains(w))
            .collect();
        let pool = if waiting.is_empty() { ids } else { waiting };
        pool.get(rng.random_range(0..pool.len().max(1))).copied()
    }

    /// Freezes the server past the holders' validity and thaws it, or restarts it
    /// (`restart`); recorded as the coordinator's (worker 0) with when it served again.
    async fn at_server(&mut self, restart: bool, recorder: &Recorder) -> Result<()> {
        let Some(server) = self.server.clone() else {
            return Ok(());
        };
        if restart {
            recorder.record(0, fault("server-restart"));
            server.restart().await?;
            recorder.record(0, fault("server-up"));
            return Ok(());
        }
        let valid_until = self.holders().iter().map(|&(_, until)| until).max();
        server.pause();
        recorder.record(0, fault("server-pause"));
        self.undo = Some(Undo::ServerPause);
        self.wait_out(0, valid_until.unwrap_or(0)).await;
        self.undo_fault(recorder)
    }

    /// A holder and until when it is valid (a random worker, valid until 0, if none holds
    /// within a second).
    async fn pick_holder(&mut self, rng: &mut StdRng) -> Option<(u32, u64)> {
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
        candidates
            .get(rng.random_range(0..candidates.len().max(1)))
            .copied()
    }

    /// Orders a worker (the holder, for a step the holder reaches next; else one that
    /// waits) to pause or crash at the next step of the scheme's steps in turn, and waits for it to get there (at most [`STEP_WAIT`], or the run's end):
    /// resumes it, or starts another worker in its place.
    async fn at_step(&mut self, act: Act, rng: &mut StdRng, recorder: &Recorder) -> Result<()> {
        let steps = steps::of(self.template.scheme);
        let taken = match act {
            Act::Pause => &mut self.stepped[0],
            Act::Crash => &mut self.stepped[1],
        };
        let step = steps[*taken % steps.len()];
        *taken += 1;
        // The holder for a step it reaches next; else a worker that waits, if one does.
        let target = match steps::holder_reaches(step) {
            true => self.pick_holder(rng).await.map(|(holder, _)| holder),
            false => self.pick_waiter(rng),
        };
        let Some(target) = target else {
            return Ok(());
        };
        let Some(pid) = self.pid(target) else {
            return Ok(());
        };
        let ordered_at = monotonic_ns();
        if !self.order(target, &act.order(step)).await {
            return Ok(());
        }
        let deadline = (monotonic_ns() + STEP_WAIT.as_nanos() as u64).min(self.template.until);
        let mut disarmed = false;
        loop {
            match self.state(target, pid) {
                State::Stopped => {
                    let valid_until = self.holders().into_iter().find(|(w, _)| *w == target);
                    let valid_until = valid_until.map_or(0, |(_, until)| until);
                    self.resume(target, pid, valid_until, recorder).await;
                    return Ok(());
                }
                State::Killed => return self.replace(target).await,
                State::Ended => return Ok(()),
                // It took the order as it was withdrawn (it records the fault, then does
                // it): wait for that, bounded.
                State::Running if disarmed && self.struck_since(target, ordered_at) => {
                    if monotonic_ns() >= deadline + STRUCK_WAIT.as_nanos() as u64 {
                        return Ok(());
                    }
                    tokio::time::sleep(Duration::from_millis(2)).await;
                }
                State::Running if disarmed => return Ok(()),
                State::Running if monotonic_ns() >= deadline => {
                    // It never got there: withdraw the order, and look once more in case
                    // it got there as the order was withdrawn.
                    self.order(target, steps::DISARM).await;
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    disarmed = true;
                }
                State::Running => tokio::time::sleep(Duration::from_millis(2)).await,
            }
        }
    }

    /// Whether worker `id` did a step fault to itself at or after `since`, by the history.
    fn struck_since(&mut self, id: u32, since: u64) -> bool {
        self.holders();
        self.struck.get(&id).is_some_and(|&at| at >= since)
    }

    /// Sends `line` down worker `id`'s order pipe: whether it went.
    async fn order(&mut self, id: u32, line: &str) -> bool {
        let Some(running) = self.running.get_mut(&id) else {
            return false;
        };
        let line = format!("{line}\n");
        running.orders.write_all(line.as_bytes()).await.is_ok()
    }

    /// Worker `id`'s process id, if it runs.
    fn pid(&self, id: u32) -> Option<u32> {
        self.running.get(&id).and_then(|running| running.child.id())
    }

    /// What became of worker `id` (process `pid`).
    fn state(&mut self, id: u32, pid: u32) -> State {
        let Some(running) = self.running.get_mut(&id) else {
            return State::Ended;
        };
        match running.child.try_wait() {
            Ok(Some(status)) if status.signal() == Some(libc::SIGKILL) => return State::Killed,
            Ok(Some(_)) | Err(_) => return State::Ended,
            Ok(None) => {}
        }
        match stopped(pid) {
            true => State::Stopped,
            false => State::Running,
        }
    }

    /// Resumes the stopped worker `target` (process `pid`): past its TTL, and past the
    /// validity its guard was given, `valid_until` (a session backend's outlasts the TTL;
    /// 0 when it holds nothing), but not past the run's end by more than a TTL; then at a
    /// moment another worker holds the lock, if one does within [`RESUME_WAIT`].
    async fn resume(&mut self, target: u32, pid: u32, valid_until: u64, recorder: &Recorder) {
        self.wait_out(target, valid_until).await;
        signalled(recorder, (target, pid), (libc::SIGCONT, "resume"));
    }

    /// Waits until a fault on `target` has outlasted its TTL and its validity,
    /// `valid_until`, as [`Workers::resume`] tells.
    async fn wait_out(&mut self, target: u32, valid_until: u64) {
        let ttl = self.template.ttl;
        let past_ttl = monotonic_ns() + (ttl + ttl / 2).as_nanos() as u64;
        // A holder that never looks at its lease (validity u64::MAX) is paused past its TTL.
        let past_validity = match valid_until {
            u64::MAX => 0,
            until => until.saturating_add(300_000_000),
        };
        let latest = self.template.until + ttl.as_nanos() as u64;
        let resume = past_ttl.max(past_validity).min(latest.max(past_ttl));
        tokio::time::sleep(Duration::from_nanos(resume.saturating_sub(monotonic_ns()))).await;
        let give_up = monotonic_ns() + RESUME_WAIT.as_nanos() as u64;
        while monotonic_ns() < give_up {
            let now = monotonic_ns();
            let others_hold = self
                .holders()
                .iter()
                .any(|&(worker, until)| worker != target && until > now);
            if others_hold {
                break;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }

    /// Reaps the killed worker `target` and starts another in its place.
    async fn replace(&mut self, target: u32) -> Result<()> {
        if let Some(mut running) = self.running.remove(&target) {
            let _ = running.child.wait().await;
        }
        self.proxies.remove(&target);
        self.spawn().await
    }
}

/// Sends `signal` to worker `target` (process `pid`) and records it as the fault `name`,
/// at the moment before it was sent (its worker may still record what it did until it
/// stops: a pause is no hold's end, and a resume lets it go on).
fn signalled(recorder: &Recorder, (target, pid): (u32, u32), (signal_number, name): (i32, &str)) {
    let at = monotonic_ns();
    signal(pid, signal_number);
    recorder.record_at(target, at, fault(name));
}

/// How long a worker sent SIGSTOP before its kill is given to stop.
const STOP_WAIT: Duration = Duration::from_millis(200);

/// Kills worker `target` (process `pid`) and records it at a moment when the worker can no
/// longer record anything, nor has lost anything it holds: stopped first, then the time
/// taken, then killed. Recorded after the kill, another worker's grant (of a session lock
/// the store frees as the killed connection closes) could come first in the history;
/// recorded before a kill that is not yet done, a grant of the victim's own could come
/// after it; either is a false overlap.
async fn killed(recorder: &Recorder, target: u32, pid: u32) {
    signal(pid, libc::SIGSTOP);
    let deadline = monotonic_ns() + STOP_WAIT.as_nanos() as u64;
    while !stopped(pid) && monotonic_ns() < deadline {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let at = monotonic_ns();
    signal(pid, libc::SIGKILL);
    recorder.record_at(target, at, fault("kill"));
}
