//! Standard output and standard error that a closed pipe (`distlock status | head -1`) or a
//! full disk (`> /dev/full`) cannot turn into a panic.
//!
//! `println!` panics when its write fails, which would skip the clean-up a run owes (the
//! demo's tables, torture's paused workers) and exit 101. Here a failed write is noted and
//! the run goes on to its end; [`exit_code`] then reports 74 (`EX_IOERR`) for a run that
//! otherwise succeeded but whose output did not all reach standard output. A failed write
//! to standard error changes no exit code: it carries diagnostics, and there is nowhere
//! left to say that they were lost.

use std::fmt;
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::exit;

/// Set once a write to standard output has failed.
static STDOUT_FAILED: AtomicBool = AtomicBool::new(false);

/// Writes `text` and a newline to standard output; a failure is noted, not raised.
pub fn stdout_line(text: fmt::Arguments<'_>) {
    let mut stdout = std::io::stdout().lock();
    if stdout
        .write_fmt(text)
        .and_then(|()| stdout.write_all(b"\n"))
        .is_err()
    {
        STDOUT_FAILED.store(true, Ordering::Relaxed);
    }
}

/// Writes `text` as it is to standard output; a failure is noted, not raised.
pub fn stdout_text(text: &str) {
    if std::io::stdout().lock().write_all(text.as_bytes()).is_err() {
        STDOUT_FAILED.store(true, Ordering::Relaxed);
    }
}

/// Writes `text` and a newline to standard error; a failure is ignored.
pub fn stderr_line(text: fmt::Arguments<'_>) {
    let mut stderr = std::io::stderr().lock();
    let _ = stderr
        .write_fmt(text)
        .and_then(|()| stderr.write_all(b"\n"));
}

/// The exit code of a run that earned `earned`: 74 instead of 0 when some of its standard
/// output could not be written (a closed pipe, a full disk), including what was still
/// buffered at the end.
pub fn exit_code(earned: u8) -> u8 {
    if std::io::stdout().lock().flush().is_err() {
        STDOUT_FAILED.store(true, Ordering::Relaxed);
    }
    match earned == 0 && STDOUT_FAILED.load(Ordering::Relaxed) {
        true => {
            errln!("distlock: the output could not all be written (a closed pipe, a full disk)");
            exit::IO_ERROR
        }
        false => earned,
    }
}

/// `println!` that notes a failed write instead of panicking (see [`stdout_line`]).
macro_rules! outln {
    ($($arg:tt)*) => {
        $crate::output::stdout_line(format_args!($($arg)*))
    };
}

/// `eprintln!` that ignores a failed write instead of panicking (see [`stderr_line`]).
macro_rules! errln {
    ($($arg:tt)*) => {
        $crate::output::stderr_line(format_args!($($arg)*))
    };
}

pub(crate) use {errln, outln};
