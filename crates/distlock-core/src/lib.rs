#![doc = include_str!("../docs.md")]

mod acquire;
pub mod backend;
mod cleanups;
mod client;
mod closing;
mod election;
mod error;
mod guard;
mod hand_off;
mod job;
mod lease;
mod lock_url;
pub mod memory;
mod name;
mod options;
mod owner;
mod primitives;
mod renewals;
mod stranded;
mod telemetry;
mod template;
mod watchdog;

pub use backend::WritesPaused;
pub use backend::{Capabilities, HolderInfo, LockKind, LockState, WaiterInfo};
pub use client::{CLOSE_WITHIN, Client};
pub use election::{
    DEFAULT_OBSERVE_EVERY, Election, LeaderInfo, Leadership, MAX_IDENTITY_LEN, MAX_PROCLAIM_LEN,
    validate_identity, validate_proclamation,
};
pub use error::{Error, ErrorKind, Result};
pub use guard::{Guard, MutexGuard, Permit, ReadGuard, WriteGuard};
pub use hand_off::HandOff;
pub use job::{
    HeldUntil, Job, JobOutcome, JobStatus, MAX_JOB_SPAN, MIN_JOB_SPAN, RunState, validate_job_span,
};
pub use lease::Health;
pub use lock_url::{parse_lock_url, redact_url};
pub use memory::MemoryBackend;
pub use name::{MAX_NAME_LEN, validate_name};
pub use options::{
    DEFAULT_TTL, LockOptions, MAX_TTL, MIN_OP_TIMEOUT, MIN_RENEW_EVERY, MIN_TTL, OnLost,
};
pub use owner::{HolderMeta, MAX_OWNER_LEN, Owner, random_id};
pub use primitives::{MultiGuard, MultiLock, Mutex, RwLock, Semaphore};
pub use template::{Held, assert_held, current_token};
pub use url::Url;
