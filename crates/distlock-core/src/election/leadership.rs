//! A won election: the grant of the election's mutex, its term and what the leader
//! proclaims under it.

use std::future::Future;
use std::time::{Duration, Instant, SystemTime};

use crate::backend::grant_of;
use crate::client::Client;
use crate::error::Result;
use crate::guard::Guard;
use crate::lease::Health;
use crate::owner::unix_ms;

use super::leader::{Proclaimed, unsupported_note};

/// The leadership of an election, won by [`Election::campaign`](crate::Election::campaign).
/// It lasts while its grant does: the watchdog renews it, and it is lost (see
/// [`lost`](Self::lost)) at the grant's safe deadline when renewals fail, before another
/// candidate can win. Pass [`term`](Self::term) with every write the leader makes, and
/// have the resource refuse terms below the highest it has seen: a leader that was paused
/// past its lease is then refused, not obeyed.
///
/// Dropping it resigns in the background; [`resign`](Self::resign) resigns now.
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> distlock_core::Result<()> {
/// use distlock_core::Health;
/// # let client = distlock_core::Client::connect("memory://").await?;
/// let leadership = client.election("services/billing").identity("billing-1").campaign().await?;
/// assert_eq!(leadership.identity(), "billing-1");
/// assert_eq!(leadership.health(), Health::Held);
/// leadership.proclaim("http://10.0.0.7:8080").await?;
/// leadership.resign().await?;
/// # Ok(()) }
/// ```
#[must_use = "if unused the leadership is resigned at once"]
#[derive(Debug)]
pub struct Leadership {
    guard: Guard,
    client: Client,
    identity: String,
    since: Option<SystemTime>,
    /// The value last proclaimed, which a hand-over proclaims again.
    value: std::sync::Mutex<Option<String>>,
}

impl Leadership {
    pub(super) fn new(
        guard: Guard,
        client: Client,
        identity: String,
        since: Option<SystemTime>,
    ) -> Self {
        Leadership {
            guard,
            client,
            identity,
            since,
            value: std::sync::Mutex::new(None),
        }
    }

    /// The election's name.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> distlock_core::Result<()> {
    /// # let client = distlock_core::Client::connect("memory://").await?;
    /// let leadership = client.election("services/billing").campaign().await?;
    /// assert_eq!(leadership.name(), "services/billing");
    /// # Ok(()) }
    /// ```
    pub fn name(&self) -> &str {
        self.guard.name()
    }

    /// The identity this leadership was won with.
    ///
    /// # Examples
    ///
    /// See [`Leadership`].
    pub fn identity(&self) -> &str {
        &self.identity
    }

    /// The term: the fencing token of the grant, strictly above every earlier leader's
    /// term of this election.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> distlock_core::Result<()> {
    /// # let client = distlock_core::Client::connect("memory://").await?;
    /// let election = client.election("services/billing");
    /// let first = election.campaign().await?;
    /// let term = first.term();
    /// first.resign().await?;
    /// assert!(election.campaign().await?.term() > term);
    /// # Ok(()) }
    /// ```
    pub fn term(&self) -> u64 {
        self.guard.fencing_token()
    }

    /// When the leadership began, on the store's clock (`None` where the store has none:
    /// etcd).
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> distlock_core::Result<()> {
    /// # let client = distlock_core::Client::connect("memory://").await?;
    /// let leadership = client.election("services/billing").campaign().await?;
    /// assert!(leadership.since().is_some());
    /// # Ok(()) }
    /// ```
    pub fn since(&self) -> Option<SystemTime> {
        self.since
    }

    /// How the grant stands now.
    ///
    /// # Examples
    ///
    /// See [`Leadership`].
    pub fn health(&self) -> Health {
        self.guard.health()
    }

    /// The moment, on this process's monotonic clock, until which the leadership surely
    /// stands; do not act as leader after it.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> distlock_core::Result<()> {
    /// # let client = distlock_core::Client::connect("memory://").await?;
    /// let leadership = client.election("services/billing").campaign().await?;
    /// assert!(leadership.safe_until() > std::time::Instant::now());
    /// # Ok(()) }
    /// ```
    pub fn safe_until(&self) -> Instant {
        self.guard.safe_until()
    }

    /// A future that resolves when the leadership is lost (or resigned). It owns what it
    /// needs, so it can be kept in a `select!` beside the leader's work.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future has no effect on the leadership.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> distlock_core::Result<()> {
    /// # let client = distlock_core::Client::connect("memory://").await?;
    /// let leadership = client.election("services/billing").campaign().await?;
    /// tokio::select! {
    ///     _ = leadership.lost() => eprintln!("no longer leading: stop"),
    ///     _ = tokio::time::sleep(std::time::Duration::from_millis(10)) => {}
    /// }
    /// # Ok(()) }
    /// ```
    pub fn lost(&self) -> impl Future<Output = ()> + Send + 'static {
        self.guard.lost()
    }

    /// Publishes `value` (an address, a version: what followers need of the leader) beside
    /// the election, for [`Election::leader`](crate::Election::leader) and observers. The
    /// store writes it only while this leadership's grant stands (`NotHeld` otherwise); a
    /// value longer than [`MAX_PROCLAIM_LEN`](crate::MAX_PROCLAIM_LEN) is `InvalidInput`.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> distlock_core::Result<()> {
    /// # let client = distlock_core::Client::connect("memory://").await?;
    /// let election = client.election("services/billing");
    /// let leadership = election.campaign().await?;
    /// leadership.proclaim("10.0.0.7:8080").await?;
    /// let leader = election.leader().await?.expect("a leader");
    /// assert_eq!(leader.value.as_deref(), Some("10.0.0.7:8080"));
    /// # Ok(()) }
    /// ```
    pub async fn proclaim(&self, value: impl Into<String>) -> Result<()> {
        let since_ms = self.since.map(unix_ms);
        let value = value.into();
        super::validate_proclamation(&value)?;
        let text = Proclaimed::new(&self.identity, Some(value.clone()), since_ms).encode()?;
        write(&self.client, &self.guard, &text).await?;
        *self.value.lock().unwrap_or_else(|p| p.into_inner()) = Some(value);
        Ok(())
    }

    /// Hands the leadership to the candidate campaigning as `identity` with
    /// [`accepts_hand_overs`](crate::Election::accepts_hand_overs), ahead of every other:
    /// the grant is offered ([`Guard::hand_off`]) for `within` in the election's note, the
    /// candidate adopts it within its next read of the note, and leads with a greater
    /// term. `Ok` once it did; at `within` the offer lapses, the leadership is resigned and
    /// the hand-over fails with `Timeout`. `Unsupported` where the backend cannot hand
    /// grants over (the leadership goes on).
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> distlock_core::Result<()> {
    /// use std::time::Duration;
    /// # let client = distlock_core::Client::connect("memory://").await?;
    /// let leader = client.election("services/billing").identity("old").campaign().await?;
    /// let term = leader.term();
    /// let successor = client
    ///     .election("services/billing")
    ///     .identity("new")
    ///     .accepts_hand_overs(true);
    /// let campaign = tokio::spawn(async move { successor.campaign().await });
    /// leader.hand_over_to("new", Duration::from_secs(10)).await?;
    /// let new = campaign.await.expect("the campaign ran")?;
    /// assert!(new.term() > term);
    /// # Ok(()) }
    /// ```
    pub async fn hand_over_to(self, identity: &str, within: Duration) -> Result<()> {
        super::validate_identity(identity)?;
        let offer = self.guard.hand_off(within)?;
        let value = self.value.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let mut proclaimed = Proclaimed::new(&self.identity, value, self.since.map(unix_ms));
        proclaimed.to = Some((identity.to_owned(), offer.to_string()));
        write(&self.client, &self.guard, &proclaimed.encode()?).await?;
        self.guard.handed_over(&offer).await
    }

    /// Steps down now: the grant is released, and another candidate may win. `NotHeld` if
    /// the leadership was already gone.
    ///
    /// # Examples
    ///
    /// See [`Leadership`].
    pub async fn resign(self) -> Result<()> {
        self.guard.release().await
    }

    /// The grant under which the leader leads, for what takes a [`Guard`] (the lock
    /// template's helpers, a hand-off).
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> distlock_core::Result<()> {
    /// # let client = distlock_core::Client::connect("memory://").await?;
    /// let leadership = client.election("services/billing").campaign().await?;
    /// assert_eq!(leadership.guard().fencing_token(), leadership.term());
    /// # Ok(()) }
    /// ```
    pub fn guard(&self) -> &Guard {
        &self.guard
    }
}

/// Writes `text` as the note of `guard`'s election under its grant, bounded by the client's
/// operation timeout; the store's time of the write.
pub(super) async fn write(client: &Client, guard: &Guard, text: &str) -> Result<Option<u64>> {
    let backend = client.inner().backend.as_ref();
    client
        .bounded(
            "write_note",
            backend.write_note(grant_of(guard), guard.fencing_token(), text, None),
        )
        .await
        .map_err(unsupported_note)
}
