//! The clock SQLite's leases expire by. Every process that shares a database file runs on
//! one machine, so they can share a clock no wall-clock step moves: the machine's
//! monotonic clock, the one each holder keeps its own deadline by. Its readings are
//! offset by an *anchor* kept in the database for the machine's current boot (the wall
//! clock less the monotonic clock when the boot's first distlock opened the database), so
//! that they still read as milliseconds since the Unix epoch.
//!
//! The wall clock would let a step forward (an NTP correction, a VM resumed) expire every
//! lease at once in the eyes of waiters, while each holder, on its monotonic deadline,
//! still holds a valid guard. The monotonic clock restarts with the machine: a database
//! whose anchor was set in another boot has its leases and waiters deleted (their
//! processes are gone with that boot), and a new anchor is set. Fencing counters stay, and
//! keep increasing.
//!
//! Every process that shares a database must see the same boot id and the same monotonic
//! clock: one machine, one time namespace. On Linux a process that cannot read the boot id
//! (no `/proc`) refuses to open the database rather than guess; on systems other than
//! Linux, which give no boot id, leases keep the wall clock.

use distlock_core::{Error, ErrorKind, Result};
use sqlx::{Row, SqliteConnection};

use super::db_error;
use crate::lease_table::now_ms;

/// Where the kernel tells the current boot apart from every other.
const BOOT_ID: &str = "/proc/sys/kernel/random/boot_id";

/// The lease clock of one database on this machine's current boot.
#[derive(Debug, Clone, Copy)]
pub(super) struct LeaseClock {
    /// Added to the monotonic clock's milliseconds; `None`: the wall clock is used.
    anchor_ms: Option<i64>,
}

impl LeaseClock {
    /// Now, in milliseconds that read as time since the Unix epoch.
    pub(super) fn now_ms(self) -> i64 {
        match self.anchor_ms {
            Some(anchor) => anchor.saturating_add(monotonic_ms()),
            None => now_ms(),
        }
    }

    /// The anchor of this boot, if the database has one for it; read only, so it needs
    /// no write lock.
    pub(super) async fn recorded(conn: &mut SqliteConnection) -> Result<Option<LeaseClock>> {
        let Some(boot) = boot_id()? else {
            return Ok(Some(LeaseClock { anchor_ms: None }));
        };
        Ok(match anchor_of(conn).await? {
            Some((recorded, anchor)) if recorded == boot => Some(LeaseClock {
                anchor_ms: Some(anchor),
            }),
            _ => None,
        })
    }

    /// Within the transaction that prepares the database: the anchor of this boot, set
    /// now if the database has none for it (deleting the leases and waiters of an earlier
    /// boot).
    pub(super) async fn establish(conn: &mut SqliteConnection) -> Result<LeaseClock> {
        let err = db_error("connect");
        let Some(boot) = boot_id()? else {
            return Ok(LeaseClock { anchor_ms: None });
        };
        let anchor = match anchor_of(conn).await? {
            Some((recorded, anchor)) if recorded == boot => anchor,
            recorded => {
                if let Some((earlier, _)) = recorded {
                    // Set in another boot: every holder and waiter of it is gone.
                    let leases = sqlx::query("DELETE FROM distlock_lease")
                        .execute(&mut *conn)
                        .await
                        .map_err(&err)?;
                    let waiters = sqlx::query("DELETE FROM distlock_waiter")
                        .execute(&mut *conn)
                        .await
                        .map_err(&err)?;
                    tracing::warn!(
                        earlier_boot = %earlier,
                        this_boot = %boot,
                        leases = leases.rows_affected(),
                        waiters = waiters.rows_affected(),
                        "the lock database was last opened in another boot of this machine (or by a process that sees another boot id); its leases and waiters were deleted"
                    );
                }
                let anchor = now_ms().saturating_sub(monotonic_ms());
                sqlx::query(
                    "INSERT INTO distlock_clock (id, boot, anchor_ms) VALUES (1, ?1, ?2)
                     ON CONFLICT (id) DO UPDATE SET boot = ?1, anchor_ms = ?2",
                )
                .bind(&boot)
                .bind(anchor)
                .execute(&mut *conn)
                .await
                .map_err(&err)?;
                anchor
            }
        };
        Ok(LeaseClock {
            anchor_ms: Some(anchor),
        })
    }
}

/// The boot and anchor the database records, if any.
async fn anchor_of(conn: &mut SqliteConnection) -> Result<Option<(String, i64)>> {
    let err = db_error("connect");
    sqlx::query("SELECT boot, anchor_ms FROM distlock_clock WHERE id = 1")
        .fetch_optional(&mut *conn)
        .await
        .and_then(|row| {
            row.map(|row| Ok((row.try_get(0)?, row.try_get(1)?)))
                .transpose()
        })
        .map_err(&err)
}

/// This boot's id; `None` on systems other than Linux, which give none.
fn boot_id() -> Result<Option<String>> {
    if !cfg!(target_os = "linux") {
        return Ok(None);
    }
    let id = std::fs::read_to_string(BOOT_ID).map_err(|e| {
        // A process out of file descriptors is told so (as a `Backend` error) by the source.
        Error::new(
            ErrorKind::Unsupported,
            format!("cannot read this machine's boot id from {BOOT_ID}: SQLite leases expire by the monotonic clock of one boot, and need it"),
        )
        .with_backend("sqlite")
        .with_operation("connect")
        .with_source(e)
    })?;
    Ok(Some(id.trim().to_owned()))
}

/// The monotonic clock (`CLOCK_MONOTONIC`: the same for every process of the machine,
/// never stepped) in milliseconds.
// `time_t` and `c_long` are 64 bits here, but 32 on other targets.
#[allow(clippy::unnecessary_cast)]
fn monotonic_ms() -> i64 {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `now` is a valid, writable timespec, and CLOCK_MONOTONIC is a clock every
    // Unix system has; clock_gettime writes nothing else.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now) };
    debug_assert_eq!(rc, 0, "CLOCK_MONOTONIC is always readable");
    (now.tv_sec as i64)
        .saturating_mul(1000)
        .saturating_add(now.tv_nsec as i64 / 1_000_000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_monotonic_clock_never_goes_back() {
        let first = monotonic_ms();
        std::thread::sleep(std::time::Duration::from_millis(20));
        let later = monotonic_ms();
        assert!(later >= first + 19, "{first} then {later}");
    }

    #[test]
    fn a_clock_reads_as_time_since_the_epoch() {
        let clock = LeaseClock {
            anchor_ms: Some(now_ms() - monotonic_ms()),
        };
        assert!((clock.now_ms() - now_ms()).abs() < 1000);
        let wall = LeaseClock { anchor_ms: None };
        assert!((wall.now_ms() - now_ms()).abs() < 1000);
    }
}
