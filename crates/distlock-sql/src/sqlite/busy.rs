//! The lock database's busy handler: how a writer waits for another process's write.
//!
//! SQLite's own (`busy_timeout`) sleeps 1, 2, 5, 10, 15, 20, 25, 25, 25, 50, 50 and then 100
//! ms between tries, so a write that found the database locked by another process for a
//! moment waits tens of milliseconds, while the write it waited for took well under one.
//! With several processes on one lock database every hand-off paid that: four demo workers
//! sold a third of what one did. This handler tries again after 100 µs, 200 µs, … up to
//! 2 ms, until the busy timeout has passed.

use std::cell::Cell;
use std::ffi::{c_int, c_void};
use std::time::{Duration, Instant};

use sqlx::sqlite::SqliteConnection;

/// The pause before try `tries + 1`: 100 µs more each time, at most 2 ms.
fn pause(tries: u32) -> Duration {
    Duration::from_micros(100 * u64::from(tries.min(19) + 1))
}

thread_local! {
    /// When the wait now going on began, on the connection's thread (each connection has
    /// one of its own, and waits for one busy write at a time).
    static WAITING_SINCE: Cell<Option<Instant>> = const { Cell::new(None) };
}

/// SQLite's callback: `timeout_ms` is the busy timeout in milliseconds (an integer, not a
/// pointer to anything), `tries` how often this wait has been called before. Nonzero tries
/// again; zero gives up with `SQLITE_BUSY` once the timeout has passed since the wait's
/// first call. It runs on the connection's own thread, which it may block.
extern "C" fn retry(timeout_ms: *mut c_void, tries: c_int) -> c_int {
    let timeout = Duration::from_millis(timeout_ms as usize as u64);
    let now = Instant::now();
    let since = WAITING_SINCE.with(|since| match (tries, since.get()) {
        (0, _) | (_, None) => {
            since.set(Some(now));
            now
        }
        (_, Some(began)) => began,
    });
    if now.duration_since(since) >= timeout {
        return 0;
    }
    std::thread::sleep(pause(u32::try_from(tries).unwrap_or(0)));
    1
}

/// Makes `connection` wait for other writers with [`retry`], for up to `timeout`.
pub(super) async fn install(
    connection: &mut SqliteConnection,
    timeout: Duration,
) -> Result<(), sqlx::Error> {
    let timeout_ms = usize::try_from(timeout.as_millis()).unwrap_or(usize::MAX);
    let mut handle = connection.lock_handle().await?;
    let db = handle.as_raw_handle();
    // SAFETY: `db` is the open connection, locked for this call so no statement runs on it
    // meanwhile; the handler is a plain function and its argument an integer, so nothing
    // it is given can dangle.
    let code = unsafe {
        libsqlite3_sys::sqlite3_busy_handler(db.as_ptr(), Some(retry), timeout_ms as *mut c_void)
    };
    match code {
        libsqlite3_sys::SQLITE_OK => Ok(()),
        code => Err(sqlx::Error::Protocol(format!(
            "sqlite3_busy_handler failed with code {code}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pauses_ramp_to_2ms() {
        assert_eq!(pause(0), Duration::from_micros(100));
        assert_eq!(pause(19), Duration::from_millis(2));
        assert_eq!(pause(500), Duration::from_millis(2));
    }

    #[test]
    fn the_handler_gives_up_once_the_timeout_has_passed() {
        let timeout_ms = 30usize as *mut c_void;
        let began = Instant::now();
        let mut tries = 0;
        while retry(timeout_ms, tries) != 0 {
            tries += 1;
            assert!(tries < 10_000, "bounded");
        }
        let waited = began.elapsed();
        assert!(waited >= Duration::from_millis(30), "{waited:?}");
        assert!(waited < Duration::from_secs(2), "{waited:?}");
        // A new wait starts its own count.
        assert_eq!(retry(timeout_ms, 0), 1);
    }
}
