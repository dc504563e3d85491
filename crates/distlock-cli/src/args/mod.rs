//! The command line.

use std::time::Duration;

use clap::error::ErrorKind as ParseErrorKind;
use clap::{Args, Parser, Subcommand};

use crate::exit;

mod torture;

pub use torture::{FaultKind, MASTER_FAULTS, Scheme, ServerKind, TortureArgs};

/// The exit code for a command line clap refused: 64 for a value that does not parse or
/// is out of range (a bad duration, URL or number, as the README's table says), clap's own
/// (0 for `--help` and `--version`, 2 for a syntax error) otherwise.
pub fn parse_failure_code(err: &clap::Error) -> u8 {
    match err.kind() {
        ParseErrorKind::ValueValidation | ParseErrorKind::InvalidValue => exit::USAGE,
        _ => u8::try_from(err.exit_code()).unwrap_or(exit::USAGE),
    }
}

/// Distributed locks from the shell: guard a command, inspect locks, benchmark, demo.
#[derive(Debug, Parser)]
#[command(
    name = "distlock",
    version,
    about,
    after_help = "Environment:\n  \
        DISTLOCK_URL       the lock URL when neither --url nor --url-file is given (empty \
        counts as unset); a `run` command gets it only if it holds no password\n  \
        DISTLOCK_URL_FILE  a file holding the lock URL, instead of DISTLOCK_URL\n  \
        DISTLOCK_LOG       what to log to stderr, as a tracing filter: `debug`, \
        `distlock_redis=trace,warn`, … (default: `warn`)\n\n\
        Exit codes: 64 for a bad value (URL, name, duration, number), 2 for other \
        command-line errors, 74 when a run that succeeded could not write all its output \
        (a closed pipe, a full disk); see each command's --help for the rest."
)]
pub struct Cli {
    /// Lock backend URL (memory://, sqlite:///path/locks.db, redis://…, zk://…, …). Default:
    /// --url-file, DISTLOCK_URL or DISTLOCK_URL_FILE, else a SQLite file in the user's state
    /// directory. A password here is visible in `ps`: give it in a file.
    #[arg(long, global = true)]
    pub url: Option<String>,
    /// A file holding the lock URL, read once at the start: its password is then neither on
    /// the command line, where `ps` shows it to every user, nor in the environment. Keep it
    /// private (`chmod 600`); a file others can read is warned about.
    #[arg(long, global = true, value_name = "FILE", conflicts_with = "url")]
    pub url_file: Option<std::path::PathBuf>,
    #[command(subcommand)]
    pub command: Command,
}

/// What to do.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Hold a lock while a command runs.
    ///
    /// The command runs in its own process group; every signal a supervisor forwards is
    /// passed on to it, it gets SIGTERM if distlock dies, and in a terminal it is the
    /// foreground job while it runs (Ctrl-Z stops both; the lease is not renewed then).
    ///
    /// Exit codes: the command's own (128+N if it died of signal N); 75 if the lock is busy
    /// (--no-wait) or the wait timed out; 76 if the lock was lost while the command ran, or
    /// it ran past --max-hold (it is then stopped with SIGTERM, then SIGKILL); 128+N if signal N (130 Ctrl-C, 143
    /// SIGTERM, 129 SIGHUP) came while it waited (its request is withdrawn first); 126/127
    /// if the command cannot be run; 64 bad input (a bad value, or a URL the store refuses);
    /// 2 a command-line syntax error; 69 backend unavailable; 70 other errors.
    Run(RunArgs),
    /// Campaign in a leader election, and run a command while leading.
    ///
    /// Waits until this candidate leads election --name, then runs the command as `run`
    /// does (its own process group, signals forwarded, SIGTERM if distlock dies), with
    /// DISTLOCK_TERM (the leadership's term: its fencing token, above every earlier
    /// leader's) and DISTLOCK_IDENTITY in its environment. When the leadership is lost the
    /// command gets SIGTERM, before another candidate can win (and SIGKILL after
    /// --kill-grace, by when another may lead: pass DISTLOCK_TERM to what it writes); with
    /// --requeue distlock then campaigns again (and after a campaign the store failed, with
    /// a growing pause) and runs it anew. When the command ends, distlock resigns.
    ///
    /// Exit codes: the command's own (128+N if it died of signal N); 75 if --wait ran out
    /// before this candidate led; 76 if the leadership was lost (without --requeue); 128+N
    /// if signal N came while it campaigned; 126/127 if the command cannot be run; 64 bad
    /// input; 69 backend unavailable; 70 other errors.
    Elect(ElectArgs),
    /// Show who leads an election: identity, term, proclaimed value, since when.
    ///
    /// Exit codes: 0 if someone leads, 1 if nobody does; with --watch, a line per change
    /// until a signal ends it (128+N); 64 bad input; 69 backend unavailable; 70 other
    /// errors.
    Leader(LeaderArgs),
    /// Show holders, fencing tokens, remaining TTLs and waiters.
    Status(StatusArgs),
    /// Free a stuck lock: show its grants, ask, then delete them whoever holds them.
    ///
    /// The fencing counter is bumped first (the name's; on Redis, the one its cluster slot
    /// shares), so every later grant's token is above
    /// the broken holder's: a resource that checks tokens refuses its late writes. The
    /// broken holder's own guard goes lost at its next renewal (or at once where the store
    /// tells it). Only the grants shown are broken, each by its token. A PostgreSQL or MySQL
    /// session-mode lock cannot be broken from another connection: the refusal names the
    /// statement that ends its holder's connection.
    ///
    /// Exit codes: 0 if grants were broken; 1 if none was (the lock is free, no holder has
    /// --token, or the prompt was declined); 64 bad input (or no --yes when stdin is not a
    /// terminal, or a store that cannot break the lock); 69 backend unavailable; 70 other
    /// errors.
    Break(BreakArgs),
    /// Replay the overselling story: worker processes buy from a stock with and without locks.
    ///
    /// Exit codes: 0 when every strategy ran; 75 if another demo holds the shop; 64 bad
    /// input; 69 backend unavailable; 70 other errors; 128+N if signal N stopped it (the
    /// shop is removed all the same).
    Demo(DemoArgs),
    /// Measure lock latency and throughput against the backend's own floor.
    Bench(BenchArgs),
    /// Run a lock under faults, record every operation, and check the history: at most one
    /// valid holder at a time, no lost update, no stale write accepted, tokens in grant
    /// order, no lock left free while workers wait.
    ///
    /// Exit codes: 0 if the history is clean, 1 if the checker found a violation; 64 bad
    /// input; 69 backend unavailable; 70 other errors.
    Torture(TortureArgs),
    /// (internal) One worker process of `distlock torture`; reads its task from stdin.
    #[command(hide = true)]
    TortureWorker,
    /// (internal) One worker process of `distlock demo`; reads its task from stdin.
    #[command(hide = true)]
    DemoWorker,
    /// (internal) One client process of `distlock bench --processes`; reads its task from
    /// stdin.
    #[command(hide = true)]
    BenchWorker(BenchWorkerArgs),
}

/// `distlock run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// The lock's name.
    #[arg(long)]
    pub name: String,
    /// Lease length (at least 1s, 3s on SQLite); renewed every third of it while the command
    /// runs.
    #[arg(long, default_value = "30s", value_parser = humantime::parse_duration)]
    pub ttl: Duration,
    /// How long to wait for the lock (default: forever).
    #[arg(long, value_parser = humantime::parse_duration, conflicts_with = "no_wait")]
    pub wait: Option<Duration>,
    /// Fail at once (exit 75) if the lock is held.
    #[arg(long)]
    pub no_wait: bool,
    /// How long the command gets to exit after SIGTERM when the lock is lost.
    #[arg(long, default_value = "5s", value_parser = humantime::parse_duration)]
    pub kill_grace: Duration,
    /// Take the name as a read lock: other --shared runs hold it at once, an --exclusive
    /// run waits for them all (and new readers wait behind a waiting --exclusive).
    #[arg(long, conflicts_with_all = ["exclusive", "permits", "of"])]
    pub shared: bool,
    /// Take the name as the write lock of a read/write lock: alone, excluding --shared runs
    /// (a run with neither flag takes a plain mutex, which is another lock).
    #[arg(long, conflicts_with_all = ["permits", "of"])]
    pub exclusive: bool,
    /// Take N permits of a semaphore of --of M permits (default 1 with --of).
    #[arg(long, value_name = "N", requires = "of", value_parser = clap::value_parser!(u32).range(1..))]
    pub permits: Option<u32>,
    /// The semaphore's size: at most M permits are held at once across every run.
    #[arg(long, value_name = "M", value_parser = clap::value_parser!(u32).range(1..))]
    pub of: Option<u32>,
    /// Grant in arrival order (FIFO), on backends with a fair queue.
    #[arg(long)]
    pub fair: bool,
    /// Stop the command after this long (SIGTERM, then SIGKILL after --kill-grace; exit
    /// 76); the lock is released once it has ended.
    #[arg(long, value_name = "D", value_parser = humantime::parse_duration)]
    pub max_hold: Option<Duration>,
    /// Keep the lock until D after it was granted, however soon the command ends, so that
    /// a run started a little later elsewhere (another replica's cron) finds it busy. The
    /// store keeps it where grants outlive their clients (Redis, SQLite, PostgreSQL and
    /// MySQL in lease mode) and distlock exits with the command; elsewhere distlock holds
    /// it until then.
    #[arg(long, value_name = "D", value_parser = humantime::parse_duration, conflicts_with_all = ["shared", "permits", "of"])]
    pub at_least: Option<Duration>,
    /// Run the command only if its last successful run (exit 0) started D ago or more, by
    /// the run record the lock store keeps with its own clock; else exit 0 at once, saying
    /// when it may run next. Makes "once an hour" hold across replicas whose clocks differ.
    #[arg(long, value_name = "D", value_parser = humantime::parse_duration, conflicts_with_all = ["shared", "permits", "of"])]
    pub once_per: Option<Duration>,
    /// The command and its arguments.
    #[arg(last = true, required = true, num_args = 1..)]
    pub command: Vec<String>,
}

/// `distlock elect`.
#[derive(Debug, Args)]
pub struct ElectArgs {
    /// The election's name.
    #[arg(long)]
    pub name: String,
    /// This candidate's identity, as `distlock leader` shows it (default: host:pid).
    #[arg(long)]
    pub identity: Option<String>,
    /// A value to proclaim once leading (an address, a version), as `distlock leader`
    /// shows it.
    #[arg(long, value_name = "VALUE")]
    pub proclaim: Option<String>,
    /// Campaign again after the leadership is lost, and run the command anew.
    #[arg(long)]
    pub requeue: bool,
    /// Lease length (at least 1s, 3s on SQLite); renewed every third of it while leading.
    #[arg(long, default_value = "30s", value_parser = humantime::parse_duration)]
    pub ttl: Duration,
    /// How long to campaign before giving up (default: forever).
    #[arg(long, value_parser = humantime::parse_duration)]
    pub wait: Option<Duration>,
    /// How long the command gets to exit after SIGTERM when the leadership is lost.
    #[arg(long, default_value = "5s", value_parser = humantime::parse_duration)]
    pub kill_grace: Duration,
    /// The command and its arguments.
    #[arg(last = true, required = true, num_args = 1..)]
    pub command: Vec<String>,
}

/// `distlock leader`.
#[derive(Debug, Args)]
pub struct LeaderArgs {
    /// The election's name.
    pub name: String,
    /// Keep watching: print a line for each change of leader (or of its value) until
    /// stopped.
    #[arg(long)]
    pub watch: bool,
    /// Print JSON (one object per line with --watch).
    #[arg(long)]
    pub json: bool,
}

/// `distlock status`.
#[derive(Debug, Args)]
pub struct StatusArgs {
    /// One lock (default: every lock with holders or waiters).
    pub name: Option<String>,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// `distlock break`.
#[derive(Debug, Args)]
pub struct BreakArgs {
    /// The lock to free.
    pub name: String,
    /// Break only the grant with this fencing token (as `status` shows it), so that a
    /// holder that came since is never broken.
    #[arg(long, value_name = "T")]
    pub token: Option<u64>,
    /// Break without asking (needed when stdin is not a terminal).
    #[arg(long)]
    pub yes: bool,
}

/// `distlock demo`.
#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Units in stock at the start.
    #[arg(long, default_value_t = 100)]
    pub stock: u32,
    /// Buyers in all, each trying to buy one unit.
    #[arg(long, default_value_t = 300)]
    pub buyers: u32,
    /// Worker processes the buyers are spread over.
    #[arg(long, default_value_t = 4)]
    pub workers: u32,
    /// Buyers running at once inside each worker.
    #[arg(long, default_value_t = 8)]
    pub concurrency: u32,
    /// Strategies to run, comma-separated (default: every one the shop has). A SQL shop:
    /// none, local-mutex, optimistic, select-for-update, lock, segmented. A Redis shop:
    /// none, local-mutex, optimistic (WATCH/MULTI), lock, segmented, redis-decr,
    /// atomic-script.
    #[arg(long, value_delimiter = ',')]
    pub strategies: Vec<String>,
    /// How many segments `segmented` splits the stock into, each its own row under its own
    /// lock: at least 1, at most the stock (default 5, or the stock if it is smaller).
    #[arg(long, value_name = "K")]
    pub segments: Option<u32>,
    /// The shop: a SQLite file, a postgres:// or mysql:// URL, or a redis:// URL (default:
    /// the lock database itself when it is PostgreSQL or MySQL; otherwise shop.db beside the
    /// SQLite lock file, or in the state directory).
    #[arg(long)]
    pub shop: Option<String>,
    /// Print one JSON object per strategy.
    #[arg(long)]
    pub json: bool,
    /// Keep the shop's tables (and the shop file the demo made beside a SQLite lock file)
    /// after the run, to look at its orders; by default they are removed.
    #[arg(long)]
    pub keep: bool,
}

/// `distlock bench`.
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Clients contending on one name (and tasks over distinct names).
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub clients: u32,
    /// Run the contending clients as separate OS processes.
    #[arg(long)]
    pub processes: bool,
    /// How long each phase runs.
    #[arg(long, default_value = "3s", value_parser = humantime::parse_duration)]
    pub duration: Duration,
    /// How many times to run every phase; each figure reported is the median of the runs.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub runs: u32,
    /// Another backend to measure in the same runs, phases interleaved, reported beside
    /// the first (repeatable): e.g. the same PostgreSQL with `?mode=lease`.
    #[arg(long, value_name = "URL")]
    pub also: Vec<String>,
    /// Print one JSON object (one per backend, one per line) instead of a table.
    #[arg(long)]
    pub json: bool,
    /// The async runtime the bench runs on: tokio's multi-thread runtime, or the
    /// current-thread one many services (and every `#[tokio::test]`) run on.
    #[arg(long, value_enum, default_value_t = Runtime::MultiThread)]
    pub runtime: Runtime,
    /// Also measure, in turns with the other uncontended cycles, a cycle on a new name
    /// each time (as services lock `orders/<id>`): a store's first grant on a name may
    /// cost it more.
    #[arg(long)]
    pub new_names: bool,
    /// Run only `--cycles` cycles of this kind, one after another, and print how long
    /// they took: for counting what a cycle costs the server (run it twice with different
    /// counts under `valgrind --tool=callgrind` and divide the difference).
    #[arg(long, value_enum, value_name = "KIND")]
    pub cycles_of: Option<CycleKind>,
    /// How many cycles `--cycles-of` runs.
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u32).range(1..=10_000_000))]
    pub cycles: u32,
}

/// The cycles `distlock bench --cycles-of` runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum CycleKind {
    /// The backend's minimal lock cycle (on Redis: `SET NX PX`, then a compare-and-delete).
    Minimal,
    /// A lock cycle on one name.
    SameName,
    /// A lock cycle on a new name each time.
    NewNames,
}

impl CycleKind {
    /// The kind's name, as given on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            CycleKind::Minimal => "minimal",
            CycleKind::SameName => "same-name",
            CycleKind::NewNames => "new-names",
        }
    }
}

/// A flavour of tokio runtime.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Runtime {
    /// Every task on the one thread that runs the runtime.
    CurrentThread,
    /// Tasks on a pool of worker threads, one per core.
    MultiThread,
}

impl Runtime {
    /// The flavour's name, as given on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            Runtime::CurrentThread => "current-thread",
            Runtime::MultiThread => "multi-thread",
        }
    }

    /// A runtime of this flavour, with its timers and I/O.
    pub fn build(self) -> std::io::Result<tokio::runtime::Runtime> {
        match self {
            Runtime::CurrentThread => tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build(),
            Runtime::MultiThread => tokio::runtime::Runtime::new(),
        }
    }
}

/// `distlock bench-worker`: its task comes on stdin; the runtime is chosen before it is read.
#[derive(Debug, Args)]
pub struct BenchWorkerArgs {
    /// The async runtime to contend on, as the bench that started this worker.
    #[arg(long, value_enum, default_value_t = Runtime::MultiThread)]
    pub runtime: Runtime,
}
