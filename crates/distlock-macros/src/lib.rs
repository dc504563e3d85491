#![doc = include_str!("../docs.md")]

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

/// Runs an `async fn` as a job (see `distlock::Job`): on one replica at a time, under the
/// mutex the arguments name, kept for `at_least` after its grant and cut off at `at_most`.
/// The function returns `Result<distlock::JobOutcome<T>, E>`; its body gives
/// `Result<T, E>`. It takes the arguments of `#[locked]` but `on_busy`, `names` and
/// `reentrant` (a busy job says so in its outcome, and is never reentrant), plus
/// `at_least`, `at_most` and `once_per` as durations; `wait` is how long it waits for a
/// run elsewhere to end (by default it does not wait).
///
/// # Examples
///
/// ```
/// use distlock::JobOutcome;
///
/// #[distlock::job(client = locks, name = "jobs/invoices/{region}", at_least = "14m", at_most = "1h", held = h)]
/// async fn send_invoices(locks: &distlock::Client, region: &str) -> distlock::Result<JobOutcome<u64>> {
///     // Runs on one replica; the token fences what it writes.
///     Ok(h.fencing_token())
/// }
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> distlock::Result<()> {
/// let locks = distlock::Client::connect("memory://").await?;
/// assert!(matches!(send_invoices(&locks, "eu").await?, JobOutcome::Ran(token) if token > 0));
/// // Fourteen minutes have not passed: the next replica's run is busy.
/// assert_eq!(send_invoices(&locks, "eu").await?.as_str(), "busy");
/// # Ok(()) }
/// ```
#[proc_macro_attribute]
pub fn job(attr: TokenStream, item: TokenStream) -> TokenStream {
    attribute(Kind::Job, attr, item)
}
