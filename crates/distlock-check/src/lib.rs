//! Proof that a lock held: record what every worker did under it, on one clock, then check
//! the history and draw it. What Jepsen's Elle or porcupine are to their users, for
//! mutual exclusion with leases and fencing tokens, whatever lock produced the history
//! (distlock's `distlock torture` writes one; so can a harness of your own around any lock).
//!
//! * [`history`]: the events (a worker's acquire, grant with its fencing token and safe
//!   deadline, renewals, health, entering and leaving its critical section, reads and
//!   writes of a shared counter, a fenced resource's verdicts, faults) as JSON lines, and
//!   the clock every process of a machine shares ([`history::monotonic_ns`]).
//! * [`Recorder`]: appends them to a history file, one whole line per event, from as many
//!   processes as the run has.
//! * [`checker`]: finds two valid holders at once, lost updates of the counter, stale
//!   writes a fenced resource accepted, tokens out of grant order, a loss reported after
//!   the fact, and a lock left free while workers waited.
//! * [`report`]: one self-contained HTML file: the verdict, each worker's holds on a
//!   timeline, the faults, every violation marked where it happened.
//!
//! Nothing here depends on distlock: a history is plain data.
//!
//! # Examples
//!
//! A harness of your own records two workers whose holds overlap, checks the history and
//! renders the report:
//!
//! ```
//! use distlock_check::checker::{Kind, Limits, check};
//! use distlock_check::history::{What, parse};
//! use distlock_check::{Recorder, report};
//!
//! let dir = tempfile::tempdir()?;
//! let path = dir.path().join("history.jsonl");
//! let recorder = Recorder::create(&path)?;
//! recorder.record_at(0, 0, What::Start {
//!     ttl: 1_000_000_000,
//!     workers: 2,
//!     scheme: "my-lock".into(),
//!     backend: "my-store".into(),
//!     fair: false,
//! })?;
//! for (worker, granted) in [(1, 10), (2, 20)] {
//!     recorder.record_at(worker, granted - 1, What::Acquire)?;
//!     recorder.record_at(worker, granted, What::Granted { token: worker.into(), safe_until: 900 })?;
//!     recorder.record_at(worker, granted + 1, What::Enter)?;
//! }
//! for worker in [1, 2] {
//!     recorder.record_at(worker, 100, What::Exit)?;
//!     recorder.record_at(worker, 101, What::Release)?;
//! }
//!
//! let events = parse(&std::fs::read_to_string(&path)?).map_err(std::io::Error::other)?;
//! let verdict = check(&events, &Limits { liveness: 1_000_000_000 });
//! assert!(!verdict.clean());
//! assert!(verdict.violations.iter().any(|v| v.kind == Kind::Overlap));
//! let html = report::render(&events, &verdict, "two holders at once");
//! assert!(html.starts_with("<!doctype html>"));
//! # Ok::<(), std::io::Error>(())
//! ```

pub mod checker;
pub mod history;
mod recorder;
pub mod report;

pub use recorder::Recorder;
