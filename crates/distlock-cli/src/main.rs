//! `distlock`: guard any command with a distributed lock, inspect locks, benchmark a
//! backend, and replay the overselling demo.

fn main() -> std::process::ExitCode {
    distlock_cli::main_with(|| {})
}
