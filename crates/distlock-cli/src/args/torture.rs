//! `distlock torture`'s arguments: the run, its lock schemes, the servers it starts and
//! the faults it injects.

use std::time::Duration;

use clap::Args;

/// `distlock torture`.
#[derive(Debug, Args)]
pub struct TortureArgs {
    /// Worker processes contending on one lock.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=256))]
    pub workers: u32,
    /// How long the workload runs.
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    pub duration: Duration,
    /// Each lease's TTL.
    #[arg(long, default_value = "1s", value_parser = humantime::parse_duration)]
    pub ttl: Duration,
    /// How long each critical section lasts (default 20 ms; with `--server redlock`, half
    /// the TTL, so that a holder is still at work when a master loses its grant, and at
    /// most a tenth of the run).
    #[arg(long, value_parser = humantime::parse_duration)]
    pub hold: Option<Duration>,
    /// The faults to inject, comma-separated, taking turns: step-crash (a worker killed at
    /// a step of its lock scheme, say between two store calls), step-pause (a worker stopped
    /// at such a step past its TTL), pause (a holder stopped past its TTL and its guard's
    /// validity at a random moment), kill (a holder killed at a random moment), cut and
    /// black-hole (a holder's link to the store), clock-jump (a waiter's wall clock),
    /// server-pause and server-restart (with --server), master-restart, failover and
    /// master-clock-jump (with --server redlock), or none. A killed worker is replaced by a
    /// new one; a paused one is resumed while another holds the lock. Default:
    /// step-crash,step-pause,pause,kill, after the three master faults with --server
    /// redlock.
    #[arg(long, value_enum, value_delimiter = ',')]
    pub faults: Vec<FaultKind>,
    /// The lock scheme the workers use: distlock, its election or job, or a broken scheme
    /// as a negative control the checker must catch.
    #[arg(long, value_enum, default_value_t = Scheme::Distlock)]
    pub scheme: Scheme,
    /// With --scheme job: how long each run keeps the lock after its grant.
    #[arg(long, value_name = "D", value_parser = humantime::parse_duration)]
    pub at_least: Option<Duration>,
    /// With --scheme job: skip a run (its body) that comes sooner than this after the
    /// start of the last run that succeeded, by the run record the store keeps.
    #[arg(long, value_name = "D", value_parser = humantime::parse_duration)]
    pub once_per: Option<Duration>,
    /// Start the store here (from the installed server, on a free loopback port, in a
    /// temporary directory removed after), instead of using the URL, so that the server
    /// can be paused and restarted (`--faults server-pause,server-restart`).
    #[arg(long, value_enum)]
    pub server: Option<ServerKind>,
    /// Ask for fair (FIFO) grants, and check that the lock granted them in the order they
    /// were asked (distlock's schemes, on a backend with a fair queue).
    #[arg(long)]
    pub fair: bool,
    /// How long to wait between faults (after the last one ended).
    #[arg(long, default_value = "1s", value_parser = humantime::parse_duration)]
    pub fault_every: Duration,
    /// The seed of the fault schedule (default: random; the verdict prints it).
    #[arg(long)]
    pub seed: Option<u64>,
    /// The longest the lock may sit free while a worker waits (default: twice the TTL
    /// plus 2 s). A killed holder's lease counts as held until its guard's validity.
    #[arg(long, value_parser = humantime::parse_duration)]
    pub liveness: Option<Duration>,
    /// Where to write the history, as JSON lines (default: `history.jsonl` in the run's
    /// directory, `torture/<id>` in the state directory, kept and named in the verdict).
    #[arg(long)]
    pub history: Option<std::path::PathBuf>,
    /// Where to write the report, one self-contained HTML file that draws the run (default:
    /// `report.html` in the run's directory, named in the verdict).
    #[arg(long)]
    pub report: Option<std::path::PathBuf>,
    /// Print the verdict as one JSON object.
    #[arg(long)]
    pub json: bool,
}

/// The critical section of a run that does not say (`--hold`).
const DEFAULT_HOLD: Duration = Duration::from_millis(20);

/// The faults of a run that does not say (`--faults`).
const DEFAULT_FAULTS: [FaultKind; 4] = [
    FaultKind::StepCrash,
    FaultKind::StepPause,
    FaultKind::Pause,
    FaultKind::Kill,
];

/// The faults a RedLock run adds to them: the documents' three ways to grant it twice.
pub const MASTER_FAULTS: [FaultKind; 3] = [
    FaultKind::MasterRestart,
    FaultKind::Failover,
    FaultKind::MasterClockJump,
];

impl TortureArgs {
    /// How long each critical section lasts.
    pub fn hold(&self) -> Duration {
        self.hold.unwrap_or(match self.server {
            Some(ServerKind::Redlock) => (self.ttl / 2).min(self.duration / 10),
            _ => DEFAULT_HOLD,
        })
    }

    /// The faults to inject, in turn.
    pub fn faults(&self) -> Vec<FaultKind> {
        if !self.faults.is_empty() {
            return self.faults.clone();
        }
        let masters: &[FaultKind] = match self.server {
            Some(ServerKind::Redlock) => &MASTER_FAULTS,
            _ => &[],
        };
        masters.iter().chain(&DEFAULT_FAULTS).copied().collect()
    }
}

/// A lock scheme `distlock torture` runs.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum Scheme {
    /// distlock's guard, renewed, checked before each unfenced write.
    Distlock,
    /// A lease taken once and never renewed, whose holder never looks at it again: a
    /// critical section longer than the TTL overlaps the next holder's.
    NoRenewal,
    /// distlock's guard, with a resource that ignores fencing tokens: a holder paused
    /// after its last check writes after its lease ended.
    NoFencing,
    /// Redis `SETNX key 1`, then `PEXPIRE key ttl`; released with `DEL key`: a crash
    /// between the two leaves the lock held for ever.
    SetnxExpire,
    /// Redis `SETNX key <expiry time>`; a waiter that reads an expired time takes the lock
    /// over with `GETSET`; released with `GET`, then `DEL` if the time read has not
    /// passed: it trusts every client's clock, and a late holder deletes another's lock.
    GetsetTimestamp,
    /// Redis `SET key <id> NX PX ttl`; released with `GET`, then `DEL` if the id is its
    /// own: not atomic, so a holder paused between them deletes the next holder's lock.
    GetThenDel,
    /// A database transaction that holds a row `SELECT … FOR UPDATE` until it commits
    /// (PostgreSQL, MySQL/MariaDB).
    SelectForUpdate,
    /// Optimistic: read a row's value and version, write the value back with
    /// `… WHERE version = <read>`, try again when it changed nothing (PostgreSQL,
    /// MySQL/MariaDB).
    VersionCas,
    /// distlock's leader election: each worker campaigns; a leader writes its term to the
    /// fenced resource as its term begins, works, and resigns, then campaigns again.
    Election,
    /// distlock's job: each run keeps its lock until --at-least after its grant
    /// (`Guard::release_at`), so no run starts sooner than that after a kept run.
    Job,
    /// distlock's hand-off: a holder offers its grant to the next worker (for a TTL) in a
    /// shared mailbox instead of releasing it; a waiting worker adopts it with a greater
    /// token, or takes the lock as usual.
    HandOff,
}

impl Scheme {
    /// The scheme's name, as given on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            Scheme::Distlock => "distlock",
            Scheme::NoRenewal => "no-renewal",
            Scheme::NoFencing => "no-fencing",
            Scheme::SetnxExpire => "setnx-expire",
            Scheme::GetsetTimestamp => "getset-timestamp",
            Scheme::GetThenDel => "get-then-del",
            Scheme::SelectForUpdate => "select-for-update",
            Scheme::VersionCas => "version-cas",
            Scheme::Election => "election",
            Scheme::Job => "job",
            Scheme::HandOff => "hand-off",
        }
    }
}

/// A store `distlock torture --server` starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ServerKind {
    /// `redis-server`, writing every command to its append-only file before answering.
    Redis,
    /// PostgreSQL, session mode.
    Postgres,
    /// PostgreSQL, lease mode.
    PostgresLease,
    /// MariaDB, session mode.
    Mariadb,
    /// MariaDB, lease mode.
    MariadbLease,
    /// ZooKeeper, with 2 s sessions.
    Zookeeper,
    /// etcd, with 2 s session leases.
    Etcd,
    /// A RedLock over three `redis-server` masters that keep nothing on disk, each with a
    /// replica, each reached through a proxy of the run's (so that a failover can move it)
    /// and run under libfaketime (so that its clock can jump).
    Redlock,
}

impl ServerKind {
    /// The kind's name, as given on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            ServerKind::Redis => "redis",
            ServerKind::Postgres => "postgres",
            ServerKind::PostgresLease => "postgres-lease",
            ServerKind::Mariadb => "mariadb",
            ServerKind::MariadbLease => "mariadb-lease",
            ServerKind::Zookeeper => "zookeeper",
            ServerKind::Etcd => "etcd",
            ServerKind::Redlock => "redlock",
        }
    }
}

/// A fault `distlock torture` injects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum FaultKind {
    /// Kill a worker (it kills itself) when it reaches a step of its lock scheme, and
    /// start another worker.
    StepCrash,
    /// Stop a worker (it stops itself) when it reaches a step of its lock scheme, past its
    /// TTL; then resume it.
    StepPause,
    /// Stop the lock's holder (SIGSTOP) past its TTL, then resume it.
    Pause,
    /// Kill the lock's holder (SIGKILL) and start another worker.
    Kill,
    /// Cut the holder's link to the store (every connection closed, new ones refused)
    /// past its TTL, then heal it. Each worker reaches the one server of the URL through
    /// a proxy of its own.
    Cut,
    /// Black-hole the holder's link to the store (connections open, nothing forwarded)
    /// past its TTL, then heal it.
    BlackHole,
    /// Jump a waiting worker's wall clock ahead by ten TTLs past the holder's validity,
    /// then set it right (libfaketime, from Debian's `faketime`): for stores that read
    /// their clients' clocks.
    ClockJump,
    /// Freeze the server (SIGSTOP) past the holder's validity, then thaw it (`--server`).
    ServerPause,
    /// Kill the server (SIGKILL) and start it again on its port and data (`--server`).
    ServerRestart,
    /// Kill a RedLock master of the holder's and start it again empty, as a master that
    /// keeps nothing on disk (or had not yet written the grant) comes back
    /// (`--server redlock`). Like the two below, it strikes a grant made while one other
    /// master was out of reach, so held on a bare majority, as the documents' ABC of five.
    MasterRestart,
    /// Kill a RedLock master of the holder's and promote its replica, which had not yet
    /// received the grant (`--server redlock`).
    Failover,
    /// Step a RedLock master's wall clock ahead past the lease, under libfaketime, so the
    /// grant expires there early (`--server redlock`).
    MasterClockJump,
    /// No faults.
    None,
}
