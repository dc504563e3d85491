#![doc = include_str!("../docs.md")]

mod args;
mod bench;
mod breaking;
mod deadline;
mod demo;
mod exit;
mod leader;
mod location;
mod output;
mod progress;
mod run;
mod signals;
mod status;
mod torture;
mod worker_task;

use std::io::IsTerminal;
use std::process::ExitCode;

use clap::Parser;

use args::{Cli, Command};
use output::errln;

/// Runs the `distlock` command on this process's arguments, after `install` has run (it
/// registers the connectors of backends outside distlock's crates with
/// [`distlock::backend::register`], and may set up a tracing subscriber of its own, which
/// then replaces the command's), and returns the exit code: 0 on success, the guarded
/// command's own code for `run`, the codes of `sysexits.h` for distlock's failures.
///
/// # Examples
///
/// ```no_run
/// fn main() -> std::process::ExitCode {
///     distlock_cli::main_with(|| {})
/// }
/// ```
pub fn main_with(install: impl FnOnce()) -> ExitCode {
    install();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(err) => {
            let code = args::parse_failure_code(&err);
            // Help (0) that could not be printed is output lost, as for any run; a usage
            // error keeps its code.
            return ExitCode::from(match err.print() {
                Err(_) if code == 0 => {
                    errln!("distlock: the help could not be written (a closed pipe, a full disk)");
                    exit::IO_ERROR
                }
                _ => output::exit_code(code),
            });
        }
    };
    // A subscriber `install` set up stays: `try_init` leaves it.
    let _ = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        // A closed or full stderr loses the line; the default would report it with a
        // panicking `eprintln!`.
        .log_internal_errors(false)
        .with_ansi(std::io::stderr().is_terminal())
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("DISTLOCK_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(DEFAULT_LOG)),
        )
        .try_init();
    let flavour = match &cli.command {
        Command::Bench(args) => args.runtime,
        Command::BenchWorker(args) => args.runtime,
        _ => args::Runtime::MultiThread,
    };
    if let Err(err) = descriptors_to_start() {
        errln!(
            "distlock: this process has no file descriptors left to start with (raise `ulimit -n`): {err}"
        );
        return ExitCode::from(exit::SOFTWARE);
    }
    let runtime = match flavour.build() {
        Ok(runtime) => runtime,
        Err(err) => {
            errln!("distlock: cannot start the async runtime: {err}");
            return ExitCode::from(exit::SOFTWARE);
        }
    };
    // Read once, here: a worker gets its URL with its task, not from the environment.
    let worker = matches!(
        cli.command,
        Command::DemoWorker | Command::BenchWorker(_) | Command::TortureWorker
    );
    let url = match worker {
        true => Ok(None),
        false => location::given_url(cli.url, cli.url_file.as_deref()),
    };
    let code = runtime.block_on(async move {
        let outcome = match (url, cli.command) {
            (Err(err), _) => Err(err),
            (Ok(url), Command::Run(args)) => run::run(&url, args).await,
            (Ok(url), Command::Elect(args)) => run::elect(&url, args).await,
            (Ok(url), Command::Leader(args)) => leader::leader(&url, args).await,
            (Ok(url), Command::Status(args)) => status::status(&url, args).await,
            (Ok(url), Command::Break(args)) => breaking::break_lock(&url, args).await,
            (Ok(url), Command::Demo(args)) => demo::demo(&url, args).await,
            (Ok(_), Command::DemoWorker) => demo::worker().await,
            (Ok(url), Command::Bench(args)) => bench::bench(&url, args).await,
            (Ok(_), Command::BenchWorker(_)) => bench::worker().await,
            (Ok(url), Command::Torture(args)) => torture::torture(&url, args).await,
            (Ok(_), Command::TortureWorker) => torture::worker().await,
        };
        outcome.unwrap_or_else(|err| {
            errln!("distlock: {err}");
            exit::for_error(&err)
        })
    });
    ExitCode::from(output::exit_code(code))
}

/// What is logged without DISTLOCK_LOG: distlock's warnings. sqlx warns of every statement
/// over a second, and here those are waits on purpose (a busy SQLite file, the demo's row
/// locks); the ZooKeeper and Redis Cluster clients warn of each connection they fail to
/// make, above the error that says the same for the run: only their errors are shown.
const DEFAULT_LOG: &str =
    "warn,sqlx::query=error,zookeeper_client=error,redis::cluster_handling=error";

/// Opens, and closes again, more descriptors than the runtime takes when it starts (its
/// poller, its waker, its signal pipe): Tokio panics where one of them cannot be had.
fn descriptors_to_start() -> std::io::Result<()> {
    let pairs: std::io::Result<Vec<_>> = (0..4)
        .map(|_| std::os::unix::net::UnixStream::pair())
        .collect();
    pairs.map(drop)
}
