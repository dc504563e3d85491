//! The core of distlock: the [`Client`], the primitives ([`Mutex`], [`RwLock`],
//! [`Semaphore`]), their [`Guard`]s with fencing tokens and lease health, the watchdog, the
//! [`backend`] module every store implements, and the in-process [`MemoryBackend`].
//!
//! Most users depend on the `distlock` facade crate instead, which adds the backends.
//!
//! # The contract a guard gives
//!
//! * Mutual exclusion while the lease is valid: until [`Guard::safe_until`], a deadline on
//!   this process's monotonic clock computed from the start of the grant request.
//! * Lease health: [`Health::Held`] → [`Health::AtRisk`] (a renewal failed) →
//!   [`Health::Lost`] (the backend denied us, or the safe deadline passed).
//!   [`Guard::lost`] resolves at `Lost`. No guard is lost silently.
//! * A fencing token strictly greater than every token granted before for the same name.
//! * Release deletes only our own grant and says [`ErrorKind::NotHeld`] if it was gone.
//! * On a backend whose grants live by the client's session (see [`backend`]), the guard's
//!   health and safe deadline follow the session: suspended means `AtRisk`, and an expired
//!   session loses every guard of the client at once.
//! * Once `Lost`, always `Lost`: renewing says [`ErrorKind::LockLost`], and acquiring again
//!   with the same reentrant owner does too.
//!
//! # Examples
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> distlock_core::Result<()> {
//! use distlock_core::{Client, Health};
//!
//! let client = Client::connect("memory://").await?;
//! let guard = client.mutex("orders/42").lock().await?;
//! assert_eq!(guard.health(), Health::Held);
//! let token = guard.fencing_token();
//! // write to the resource with `token`; the resource rejects older tokens
//! guard.release().await?;
//! # Ok(()) }
//! ```

mod acquire;
pub mod backend;
mod cleanups;
mod client;
mod error;
mod guard;
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
pub use error::{Error, ErrorKind, Result};
pub use guard::{Guard, MutexGuard, Permit, ReadGuard, WriteGuard};
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
