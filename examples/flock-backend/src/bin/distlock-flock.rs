//! `distlock-flock`: the whole `distlock` command — `run`, `status`, `break`, `bench`,
//! `torture` — for `flock://` URLs, from [`distlock_cli::main_with`] and this crate's
//! connector.

fn main() -> std::process::ExitCode {
    distlock_cli::main_with(distlock_flock_example::install)
}
