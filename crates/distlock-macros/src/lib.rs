//! `#[distlock::locked]` and its kin: an `async fn` that runs under a distributed lock whose
//! name is a template over its arguments. Use them through the `distlock` crate, which
//! re-exports them.
//!
//! ```
//! use std::sync::Arc;
//! use distlock::{Client, Held};
//!
//! struct Order { id: u64 }
//! struct Shipping { locks: Arc<Client> }
//!
//! impl Shipping {
//!     #[distlock::locked(client = self.locks, name = "orders/{order.id}", wait = "5s", ttl = "10s", held = h)]
//!     async fn ship(&self, order: &Order) -> Result<u64, distlock::Error> {
//!         // Runs holding `orders/<id>`; the token fences the writes it makes.
//!         Ok(h.fencing_token())
//!     }
//! }
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> distlock::Result<()> {
//! let shipping = Shipping { locks: Arc::new(Client::connect("memory://").await?) };
//! assert!(shipping.ship(&Order { id: 42 }).await? > 0);
//! # Ok(()) }
//! ```
//!
//! The function above expands to (names shortened):
//!
//! ```text
//! async fn ship(&self, order: &Order) -> Result<u64, distlock::Error> {
//!     let __distlock_name = ::std::format!("orders/{}", (order.id));
//!     let __distlock_lock = {
//!         let __distlock_client = ::distlock::__private::as_client(&(self.locks));
//!         __distlock_client
//!             .mutex(__distlock_name.clone())
//!             .with_options(::distlock::LockOptions::new()
//!                 .wait(::std::time::Duration::new(5, 0))
//!                 .ttl(::std::time::Duration::new(10, 0)))
//!     };
//!     __distlock_lock
//!         .with_lock(async |h: &::distlock::Held| -> Result<u64, distlock::Error> {
//!             Ok(h.fencing_token())
//!         })
//!         .await
//! }
//! ```
//!
//! So the body runs as the closure of [`Mutex::with_lock`]: released after it finished,
//! failed, panicked or was dropped, never while it runs; dropped at once when the lease is
//! lost (`on_lost = "cancel"`, the default) or left to watch `h.lost()` (`"signal"`); its
//! `return` and `?` are the function's. `distlock::current_token()` and
//! `distlock::assert_held(name)` work in anything it calls.
//!
//! # Arguments
//!
//! * `client = <expr>` (required): the client, a `Client`, `&Client` or `Arc<Client>`.
//! * `name = "orders/{order.id}"`: the lock's name, a template whose `{…}` are expressions
//!   over the arguments and `self` (fields, method calls, indexing; `{{` and `}}` for
//!   braces). Or `key = <expr>`, any `Display` expression; or, for `#[locked]`,
//!   `names = ["a/{x}", "b/{y}"]`, an all-or-nothing multi-lock (`held` is then `&[Held]`).
//! * `held = h`: the name the body sees the grant (`&Held`) by; nothing is bound without it.
//! * `on_busy = "wait"` (the default: as long as `wait`, forever without it), `"skip"` (the
//!   function returns `Result<Option<T>, E>`, `Ok(None)` when the lock is busy, while its
//!   body gives `Result<T, E>`) or `"error"` (the error at once).
//! * `on_lost = "cancel" | "signal"`; `wait`, `ttl`, `max_hold`, `renew_every`,
//!   `op_timeout` as durations (`"5s"`, `"250ms"`, checked at compile time); `fair` and
//!   `auto_renew` as `true`/`false`; `reentrant = <Owner expr>`.
//!
//! The function's error type must have `From<distlock::Error>`, and its return type be
//! named (`impl Trait` cannot be a closure's). The expansion names `::distlock`: depend on
//! the `distlock` crate under its own name. Inside an `#[async_trait]` impl the attribute
//! sees the method after async_trait rewrote it (no longer `async`): use Rust's own
//! `async fn` in traits there.
//!
//! [`Mutex::with_lock`]: https://docs.rs/distlock-core/latest/distlock_core/struct.Mutex.html#method.with_lock

mod args;
mod expand;
mod template;

use proc_macro::TokenStream;

use args::Kind;

fn attribute(kind: Kind, attr: TokenStream, item: TokenStream) -> TokenStream {
    expand::expand(kind, attr.into(), item.into())
        .unwrap_or_else(syn::Error::into_compile_error)
        .into()
}

/// Runs an `async fn` holding a mutex (or, with `names`, every lock of a multi-lock) named
/// by a template over its arguments. See the crate docs for the arguments.
///
/// # Examples
///
/// ```
/// #[distlock::locked(client = locks, name = "reports/{day}", on_busy = "skip")]
/// async fn nightly(locks: &distlock::Client, day: u32) -> distlock::Result<Option<u32>> {
///     // The body gives the `T` of the `Option<T>`: `None` is the busy lock's.
///     Ok(day)
/// }
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> distlock::Result<()> {
/// let locks = distlock::Client::connect("memory://").await?;
/// assert_eq!(nightly(&locks, 7).await?, Some(7));
/// let _busy = locks.mutex("reports/7").lock().await?;
/// assert_eq!(nightly(&locks, 7).await?, None);
/// # Ok(()) }
/// ```
#[proc_macro_attribute]
pub fn locked(attr: TokenStream, item: TokenStream) -> TokenStream {
    attribute(Kind::Mutex, attr, item)
}

/// Runs an `async fn` holding a read grant of the read-write lock the arguments name.
///
/// # Examples
///
/// ```
/// #[distlock::read_locked(client = locks, name = "schema/{table}")]
/// async fn columns(locks: &distlock::Client, table: &str) -> distlock::Result<usize> {
///     Ok(table.len())
/// }
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> distlock::Result<()> {
/// # let locks = distlock::Client::connect("memory://").await?;
/// assert_eq!(columns(&locks, "users").await?, 5);
/// # Ok(()) }
/// ```
#[proc_macro_attribute]
pub fn read_locked(attr: TokenStream, item: TokenStream) -> TokenStream {
    attribute(Kind::Read, attr, item)
}

/// Runs an `async fn` holding the write grant of the read-write lock the arguments name.
///
/// # Examples
///
/// ```
/// #[distlock::write_locked(client = locks, name = "schema/{table}", held = h)]
/// async fn migrate(locks: &distlock::Client, table: &str) -> distlock::Result<u64> {
///     Ok(h.fencing_token())
/// }
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> distlock::Result<()> {
/// # let locks = distlock::Client::connect("memory://").await?;
/// assert!(migrate(&locks, "users").await? > 0);
/// # Ok(()) }
/// ```
#[proc_macro_attribute]
pub fn write_locked(attr: TokenStream, item: TokenStream) -> TokenStream {
    attribute(Kind::Write, attr, item)
}

/// Runs an `async fn` holding `take` permits (default 1) of a semaphore of `n` permits that
/// the arguments name.
///
/// # Examples
///
/// ```
/// #[distlock::permits(client = locks, name = "gpus/{pool}", n = 4, take = 2)]
/// async fn train(locks: &distlock::Client, pool: &str) -> distlock::Result<()> {
///     Ok(())
/// }
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> distlock::Result<()> {
/// # let locks = distlock::Client::connect("memory://").await?;
/// train(&locks, "a100").await?;
/// # Ok(()) }
/// ```
#[proc_macro_attribute]
pub fn permits(attr: TokenStream, item: TokenStream) -> TokenStream {
    attribute(Kind::Permits, attr, item)
}
