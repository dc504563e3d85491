//! Exit codes (after sysexits.h), documented in `distlock run --help` and the README.

use distlock::{Error, ErrorKind};

/// Bad input: a malformed URL, name or duration.
pub const USAGE: u8 = 64;
/// The backend could not be reached.
pub const UNAVAILABLE: u8 = 69;
/// Anything else that went wrong inside distlock.
pub const SOFTWARE: u8 = 70;
/// The run succeeded, but its output could not all be written (a closed pipe, a full disk).
pub const IO_ERROR: u8 = 74;
/// The lock is busy (`--no-wait`) or the wait timed out.
pub const BUSY: u8 = 75;
/// The lock was lost while the command ran.
pub const LOST: u8 = 76;
/// The command exists but cannot be executed.
pub const NOT_EXECUTABLE: u8 = 126;
/// The command was not found.
pub const NOT_FOUND: u8 = 127;

/// The exit code for an error that ended a command.
pub fn for_error(err: &Error) -> u8 {
    match err.kind() {
        ErrorKind::InvalidInput | ErrorKind::Unsupported => USAGE,
        ErrorKind::Unavailable | ErrorKind::QuorumNotReached => UNAVAILABLE,
        ErrorKind::Timeout => BUSY,
        ErrorKind::LockLost | ErrorKind::NotHeld => LOST,
        _ => SOFTWARE,
    }
}
