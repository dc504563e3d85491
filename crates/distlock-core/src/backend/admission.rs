//! The grant rules, written once and shared by every backend that decides grants itself
//! (memory, the SQL lease table): who may hold a name at the same time, and who goes first.

use std::time::Duration;

use super::LockKind;
use crate::error::{Error, Result};

/// How long a waiter may be passed over before newcomers must let it go first. Below it,
/// a lock that is released and taken again by a busy holder stays cheap (no hand-off);
/// above it, nobody starves.
pub const STARVATION: Duration = Duration::from_millis(5);

/// A grant or a request, as far as the rules care.
///
/// # Examples
///
/// ```
/// use distlock_core::LockKind;
/// use distlock_core::backend::Claim;
/// let claim = Claim { kind: LockKind::Read, permits: 1 };
/// assert!(!claim.kind.is_exclusive());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Claim {
    /// What is held or asked for.
    pub kind: LockKind,
    /// How many permits.
    pub permits: u32,
}

/// A queued request: its claim and its place in the queue.
///
/// # Examples
///
/// ```
/// use distlock_core::LockKind;
/// use distlock_core::backend::{Claim, Queued};
/// let queued = Queued { claim: Claim { kind: LockKind::Write, permits: 1 }, seq: 4, starving: false };
/// assert_eq!(queued.seq, 4);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Queued {
    /// What is asked for.
    pub claim: Claim,
    /// Its place in the queue; lower goes first.
    pub seq: u64,
    /// It has waited longer than [`STARVATION`].
    pub starving: bool,
}

/// Decides whether `me` may be granted now.
///
/// * Locks (mutex, read, write) and semaphores cannot share a name, and a semaphore's limit
///   must match the one its current holders use: both are [`ErrorKind::InvalidInput`]
///   errors, not waits.
/// * An exclusive claim needs no holders; a read needs no exclusive holder; semaphore
///   permits must fit under the limit.
/// * `fair`: requests queued before `me` (`my_seq`; all queued requests if `me` is not
///   queued) count as if already granted, so nobody jumps the queue.
/// * Not fair: requests may overtake the queue, except requests that have waited longer
///   than [`STARVATION`]: those ahead count as if granted, so nobody starves. A read also
///   yields to any queued exclusive claim, so a stream of readers cannot starve a writer.
///
/// [`ErrorKind::InvalidInput`]: crate::ErrorKind::InvalidInput
///
/// # Examples
///
/// ```
/// use distlock_core::LockKind;
/// use distlock_core::backend::{admit, Claim, Queued};
///
/// let reader = Claim { kind: LockKind::Read, permits: 1 };
/// let writer = Queued { claim: Claim { kind: LockKind::Write, permits: 1 }, seq: 1, starving: false };
/// // A reader may join other readers...
/// assert!(admit(&[reader], &[], &reader, None, false)?);
/// // ...but not while a writer waits.
/// assert!(!admit(&[reader], &[writer], &reader, None, false)?);
/// # Ok::<(), distlock_core::Error>(())
/// ```
pub fn admit(
    holders: &[Claim],
    queue: &[Queued],
    me: &Claim,
    my_seq: Option<u64>,
    fair: bool,
) -> Result<bool> {
    for other in holders
        .iter()
        .chain(queue.iter().map(|q| &q.claim))
        .filter(|c| c.kind != me.kind)
    {
        check_compatible(other.kind, me.kind)?;
    }
    if !fits(holders.iter(), me) {
        return Ok(false);
    }
    let ahead = queue
        .iter()
        .filter(move |q| my_seq.is_none_or(|mine| q.seq < mine));
    if fair {
        return Ok(fits(holders.iter().chain(ahead.map(|q| &q.claim)), me));
    }
    let starving_ahead = ahead.filter(|q| q.starving).map(|q| &q.claim);
    if !fits(holders.iter().chain(starving_ahead), me) {
        return Ok(false);
    }
    if me.kind == LockKind::Read && queue.iter().any(|q| q.claim.kind.is_exclusive()) {
        return Ok(false);
    }
    Ok(true)
}

fn check_compatible(existing: LockKind, wanted: LockKind) -> Result<()> {
    let is_semaphore = |k: LockKind| matches!(k, LockKind::Semaphore { .. });
    match (existing, wanted) {
        (LockKind::Semaphore { limit: a }, LockKind::Semaphore { limit: b }) if a != b => {
            Err(Error::invalid(format!(
                "this semaphore is in use with {a} permits, not {b}"
            )))
        }
        (a, b) if is_semaphore(a) != is_semaphore(b) => Err(Error::invalid(format!(
            "this name is in use as a {}, not as a {}",
            a.as_str(),
            b.as_str()
        ))),
        _ => Ok(()),
    }
}

fn fits<'a>(mut others: impl Iterator<Item = &'a Claim> + Clone, me: &Claim) -> bool {
    match me.kind {
        LockKind::Mutex | LockKind::Write => others.next().is_none(),
        LockKind::Read => !others.any(|c| c.kind.is_exclusive()),
        LockKind::Semaphore { limit } => {
            let taken: u64 = others.map(|c| u64::from(c.permits)).sum();
            taken + u64::from(me.permits) <= u64::from(limit)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MUTEX: Claim = Claim {
        kind: LockKind::Mutex,
        permits: 1,
    };
    const READ: Claim = Claim {
        kind: LockKind::Read,
        permits: 1,
    };
    const WRITE: Claim = Claim {
        kind: LockKind::Write,
        permits: 1,
    };

    fn sem(permits: u32) -> Claim {
        Claim {
            kind: LockKind::Semaphore { limit: 3 },
            permits,
        }
    }

    fn q(claim: Claim, seq: u64) -> Queued {
        Queued {
            claim,
            seq,
            starving: false,
        }
    }

    fn starving(claim: Claim, seq: u64) -> Queued {
        Queued {
            claim,
            seq,
            starving: true,
        }
    }

    #[test]
    fn exclusive_claims_need_an_empty_lock() {
        assert!(admit(&[], &[], &MUTEX, None, false).unwrap());
        assert!(!admit(&[MUTEX], &[], &MUTEX, None, false).unwrap());
        assert!(!admit(&[READ], &[], &WRITE, None, false).unwrap());
    }

    #[test]
    fn readers_share_but_yield_to_a_queued_writer() {
        assert!(admit(&[READ, READ], &[], &READ, None, false).unwrap());
        assert!(!admit(&[READ], &[q(WRITE, 9)], &READ, Some(10), false).unwrap());
        assert!(!admit(&[WRITE], &[], &READ, None, false).unwrap());
    }

    #[test]
    fn semaphore_permits_fit_under_the_limit() {
        assert!(admit(&[sem(2)], &[], &sem(1), None, false).unwrap());
        assert!(!admit(&[sem(2)], &[], &sem(2), None, false).unwrap());
    }

    #[test]
    fn fair_requests_do_not_jump_the_queue() {
        assert!(!admit(&[], &[q(MUTEX, 1), q(MUTEX, 2)], &MUTEX, Some(2), true).unwrap());
        assert!(admit(&[], &[q(MUTEX, 1), q(MUTEX, 2)], &MUTEX, Some(1), true).unwrap());
        assert!(!admit(&[], &[q(MUTEX, 1)], &MUTEX, None, true).unwrap());
        assert!(admit(&[], &[q(READ, 1), q(READ, 2)], &READ, Some(2), true).unwrap());
        assert!(!admit(&[sem(1)], &[q(sem(2), 1)], &sem(1), Some(2), true).unwrap());
    }

    #[test]
    fn newcomers_do_not_overtake_a_starving_waiter() {
        assert!(admit(&[], &[q(MUTEX, 1)], &MUTEX, None, false).unwrap());
        assert!(!admit(&[], &[starving(MUTEX, 1)], &MUTEX, None, false).unwrap());
        assert!(admit(&[], &[starving(MUTEX, 1)], &MUTEX, Some(1), false).unwrap());
        assert!(!admit(&[], &[starving(MUTEX, 1)], &MUTEX, Some(2), false).unwrap());
        assert!(admit(&[sem(1)], &[starving(sem(1), 1)], &sem(1), None, false).unwrap());
    }

    #[test]
    fn mixing_kinds_on_one_name_is_an_error() {
        assert!(admit(&[sem(1)], &[], &MUTEX, None, false).is_err());
        let other_limit = Claim {
            kind: LockKind::Semaphore { limit: 5 },
            permits: 1,
        };
        assert!(admit(&[sem(1)], &[], &other_limit, None, false).is_err());
        assert!(admit(&[MUTEX], &[], &WRITE, None, false).is_ok());
    }
}
