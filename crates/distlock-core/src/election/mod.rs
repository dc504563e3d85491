//! Leader elections: candidates campaign for an election's mutex; the holder leads, its
//! term the grant's fencing token, its identity and proclaimed value kept beside the lock.

mod leader;
mod leadership;
mod observe;

use std::slice;
use std::time::Duration;

use crate::client::Client;
use crate::error::{Error, Result};
use crate::options::{LockOptions, OnLost};
use crate::owner::HolderMeta;
use crate::owner::at_unix_ms;
use crate::telemetry;
use crate::template::{Ended, Held, conclude, release_after, run_body};

pub use leader::LeaderInfo;
use leader::Proclaimed;
pub use leadership::Leadership;

/// The longest identity a candidate campaigns with, in bytes.
///
/// # Examples
///
/// ```
/// assert_eq!(distlock_core::MAX_IDENTITY_LEN, 256);
/// ```
pub const MAX_IDENTITY_LEN: usize = 256;

/// The longest value a leader [proclaims](Leadership::proclaim), in bytes: with its
/// identity and host it fits what a store keeps beside a lock.
///
/// # Examples
///
/// ```
/// assert_eq!(distlock_core::MAX_PROCLAIM_LEN, 3072);
/// ```
pub const MAX_PROCLAIM_LEN: usize = 3072;

/// How often an observer reads who leads, by default: a change is seen within a second.
///
/// # Examples
///
/// ```
/// assert!(distlock_core::DEFAULT_OBSERVE_EVERY < std::time::Duration::from_secs(1));
/// ```
pub const DEFAULT_OBSERVE_EVERY: Duration = Duration::from_millis(250);

/// Refuses an identity a candidate cannot campaign with: empty, longer than
/// [`MAX_IDENTITY_LEN`] bytes, or holding control characters.
///
/// # Examples
///
/// ```
/// use distlock_core::validate_identity;
/// assert!(validate_identity("billing-1").is_ok());
/// assert!(validate_identity("").is_err());
/// assert!(validate_identity("a\nb").is_err());
/// ```
pub fn validate_identity(identity: &str) -> Result<()> {
    match identity.is_empty()
        || identity.len() > MAX_IDENTITY_LEN
        || identity.chars().any(char::is_control)
    {
        true => Err(Error::invalid(format!(
            "identity {identity:?} is not 1 to {MAX_IDENTITY_LEN} bytes without control characters"
        ))),
        false => Ok(()),
    }
}

/// Refuses a value a leader cannot proclaim: longer than [`MAX_PROCLAIM_LEN`] bytes as it
/// is stored (a JSON string: quotes, backslashes and control characters take more than
/// one byte).
///
/// # Examples
///
/// ```
/// use distlock_core::{MAX_PROCLAIM_LEN, validate_proclamation};
/// assert!(validate_proclamation("10.0.0.7:8080").is_ok());
/// assert!(validate_proclamation(&"x".repeat(MAX_PROCLAIM_LEN + 1)).is_err());
/// assert!(validate_proclamation(&"\"".repeat(MAX_PROCLAIM_LEN / 2 + 1)).is_err());
/// ```
pub fn validate_proclamation(value: &str) -> Result<()> {
    let stored = serde_json::to_string(value).map_or(usize::MAX, |text| text.len() - 2);
    match stored > MAX_PROCLAIM_LEN {
        true => Err(Error::invalid(format!(
            "a proclaimed value of {} bytes as stored is longer than the {MAX_PROCLAIM_LEN} a leader may proclaim",
            stored
        ))),
        false => Ok(()),
    }
}

/// Whether a requeued candidate campaigns again after `err` ended a campaign: a store that
/// failed for a while, or a grant lost as it was won.
fn campaigns_again(err: &Error) -> bool {
    err.is_temporary()
        || matches!(
            err.kind(),
            crate::ErrorKind::LockLost | crate::ErrorKind::NotHeld
        )
}

/// The longest pause between two campaigns of a requeued candidate whose store failed.
const RETRY_CAP: Duration = Duration::from_secs(5);

/// A leader election named `name`: candidates [`campaign`](Self::campaign) for its
/// mutex, and the one that holds it leads, with a term (the grant's fencing token) above
/// every earlier leader's. Made by [`Client::election`].
///
/// Where Curator's `LeaderLatch`, etcd's `Campaign` or client-go can leave an old leader
/// acting after a new one won, a [`Leadership`] is lost at its grant's safe deadline,
/// before another candidate can win, and [`run`](Self::run) stops the leader's work then;
/// the term fences what a paused leader writes late.
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> distlock_core::Result<()> {
/// # let client = distlock_core::Client::connect("memory://").await?;
/// let election = client.election("services/billing").identity("billing-1");
/// let leadership = election.campaign().await?;
/// leadership.proclaim("10.0.0.7:8080").await?;
/// let leader = election.leader().await?.expect("a leader");
/// assert_eq!((leader.identity.as_str(), leader.term), ("billing-1", leadership.term()));
/// leadership.resign().await?;
/// assert!(election.leader().await?.is_none());
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Election {
    client: Client,
    name: String,
    identity: String,
    options: LockOptions,
    requeue: bool,
    accepts_hand_overs: bool,
    observe_every: Duration,
}

impl Election {
    pub(crate) fn new(client: Client, name: String) -> Election {
        let options = client.inner().defaults.clone().wait_forever();
        let meta = HolderMeta::this_process();
        Election {
            client,
            name,
            identity: format!("{}:{}", meta.host, meta.pid),
            options,
            requeue: false,
            accepts_hand_overs: false,
            observe_every: DEFAULT_OBSERVE_EVERY,
        }
    }

    /// The identity this candidate campaigns with: what [`leader`](Self::leader) shows
    /// (by default `host:pid`). Up to [`MAX_IDENTITY_LEN`] bytes, not empty, no control
    /// characters.
    ///
    /// # Examples
    ///
    /// See [`Election`].
    pub fn identity(mut self, identity: impl Into<String>) -> Self {
        self.identity = identity.into();
        self
    }

    /// Whether [`run`](Self::run) campaigns again after the leadership is lost (and after
    /// a campaign the store failed, with a growing pause), rather than returning
    /// `LockLost`. Off by default.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> distlock_core::Result<()> {
    /// # let client = distlock_core::Client::connect("memory://").await?;
    /// let election = client.election("services/billing").requeue(true);
    /// # Ok(()) }
    /// ```
    pub fn requeue(mut self, on: bool) -> Self {
        self.requeue = on;
        self
    }

    /// Whether a campaign also takes the leadership when the leader hands it over to this
    /// candidate's identity ([`Leadership::hand_over_to`]), ahead of the candidates
    /// waiting before it. The campaign then reads the election's note every
    /// [`observe_every`](Self::observe_every) while it waits. Off by default.
    ///
    /// # Examples
    ///
    /// See [`Leadership::hand_over_to`].
    pub fn accepts_hand_overs(mut self, on: bool) -> Self {
        self.accepts_hand_overs = on;
        self
    }

    /// The lock options the election's grant is taken with: lease length, renewal,
    /// fairness, and how long a campaign waits (by default for ever; past a wait it fails
    /// with `Timeout`). An election is never reentrant.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> distlock_core::Result<()> {
    /// use std::time::Duration;
    /// use distlock_core::LockOptions;
    /// # let client = distlock_core::Client::connect("memory://").await?;
    /// let election = client
    ///     .election("services/billing")
    ///     .with_options(LockOptions::new().ttl(Duration::from_secs(10)).wait_forever());
    /// # Ok(()) }
    /// ```
    pub fn with_options(mut self, options: LockOptions) -> Self {
        self.options = options;
        self
    }

    /// How often [`observe`](Self::observe)'s task reads who leads (by default
    /// [`DEFAULT_OBSERVE_EVERY`]; at least 10 ms), beside the reads the store's pushes
    /// prompt where it pushes.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> distlock_core::Result<()> {
    /// # let client = distlock_core::Client::connect("memory://").await?;
    /// let election = client
    ///     .election("services/billing")
    ///     .observe_every(std::time::Duration::from_millis(100));
    /// # Ok(()) }
    /// ```
    pub fn observe_every(mut self, every: Duration) -> Self {
        self.observe_every = every.max(Duration::from_millis(10));
        self
    }

    /// The election's name.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> distlock_core::Result<()> {
    /// # let client = distlock_core::Client::connect("memory://").await?;
    /// assert_eq!(client.election("services/billing").name(), "services/billing");
    /// # Ok(()) }
    /// ```
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Campaigns until this candidate leads (or the options' wait passes: `Timeout`), and
    /// proclaims its identity under the grant. The store writes the proclamation only while
    /// the grant stands, so a campaign whose session or lease died while it waited fails
    /// (`NotHeld`, or `LockLost` when the loss is seen as it is won) rather than return a
    /// leadership nobody else sees.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future withdraws the candidate; a grant it won meanwhile is released
    /// in the background. With [`accepts_hand_overs`](Self::accepts_hand_overs), a
    /// hand-over adopted as the future is dropped stays in the store, unused, for a TTL.
    ///
    /// # Examples
    ///
    /// See [`Election`].
    pub async fn campaign(&self) -> Result<Leadership> {
        let text = self.check()?;
        let mutex = self
            .client
            .mutex(self.name.clone())
            .with_options(self.options.clone());
        let guard = match self.accepts_hand_overs {
            false => mutex.lock().await?,
            true => tokio::select! {
                locked = mutex.lock() => locked?,
                handed = self.handed_over_to_me() => handed?,
            },
        };
        let written = leadership::write(&self.client, &guard, &text).await;
        let since = match written {
            Ok(at) if guard.health().is_valid() => at.map(at_unix_ms),
            Ok(_) => {
                release_after(guard).await;
                return Err(Error::new(
                    crate::ErrorKind::LockLost,
                    format!(
                        "the grant of election `{}` was lost as it was won",
                        self.name
                    ),
                ));
            }
            Err(err) => {
                release_after(guard).await;
                return Err(err);
            }
        };
        telemetry::leadership(self.client.scheme(), "won");
        Ok(Leadership::new(
            guard,
            self.client.clone(),
            self.identity.clone(),
            since,
        ))
    }

    /// Campaigns, then runs `f` while leading. `f` is cancelled (at its next await) when
    /// the leadership is lost, at the grant's safe deadline, before another candidate can
    /// win; then, with [`requeue`](Self::requeue), the candidate campaigns again and runs
    /// `f` anew, and without it `run` fails with `LockLost`. When `f` returns, its result
    /// is `run`'s; the leadership is resigned only after `f` has ended. [`Client::close`]
    /// stops `f` (at its next await) before it releases the leader's grant, and `run` then
    /// fails with `LockLost` without campaigning again.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future drops `f` first and then resigns in the background.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> distlock_core::Result<()> {
    /// # let client = distlock_core::Client::connect("memory://").await?;
    /// let term = client
    ///     .election("services/billing")
    ///     .requeue(true)
    ///     .run(async |leading| {
    ///         leading.proclaim("ready").await?;
    ///         Ok::<_, distlock_core::Error>(leading.term())
    ///     })
    ///     .await?;
    /// assert!(term >= 1);
    /// # Ok(()) }
    /// ```
    pub async fn run<T, E, F>(&self, mut f: F) -> std::result::Result<T, E>
    where
        F: AsyncFnMut(&Leadership) -> std::result::Result<T, E>,
        E: From<Error>,
    {
        let mut pause = Duration::from_millis(100);
        loop {
            let leadership = match self.campaign().await {
                Ok(leadership) => leadership,
                Err(err) if self.requeue && campaigns_again(&err) => {
                    tracing::warn!(election = %self.name, error = %err, retry_in = ?pause, "campaign failed; campaigning again");
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(RETRY_CAP);
                    continue;
                }
                Err(err) => return Err(err.into()),
            };
            pause = Duration::from_millis(100);
            let held = Held::of(leadership.guard());
            let finished = run_body(slice::from_ref(&held), OnLost::Cancel, f(&leadership)).await;
            let lost = matches!(finished, Ended::Lost);
            if let Err(err) = leadership.resign().await
                && err.kind() != crate::ErrorKind::NotHeld
            {
                tracing::warn!(election = %self.name, error = %err, "resigning failed; the leadership ends with its lease");
            }
            if lost {
                telemetry::leadership(self.client.scheme(), "lost");
                if self.requeue {
                    tracing::warn!(election = %self.name, "leadership lost; campaigning again");
                    continue;
                }
            }
            return conclude(finished, slice::from_ref(&held));
        }
    }

    /// Who leads now, as the store shows it: `None` when nobody does (or the winner has
    /// not yet proclaimed itself, for the moment after it won).
    ///
    /// # Examples
    ///
    /// See [`Election`].
    pub async fn leader(&self) -> Result<Option<LeaderInfo>> {
        leader::read(self.client.inner(), &self.name).await
    }

    /// Who leads, as a channel that changes when the leader does: a new term, a new value
    /// proclaimed, nobody leading. A task of the client reads the store every
    /// [`observe_every`](Self::observe_every), and at once when the store pushes news of
    /// the election's lock (etcd's watches), until every receiver is dropped; while the
    /// store cannot be read it keeps the last leader until that leader's lease would have
    /// ended. Fails as [`leader`](Self::leader) does for the first read.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> distlock_core::Result<()> {
    /// # let client = distlock_core::Client::connect("memory://").await?;
    /// let election = client.election("services/billing").identity("billing-1");
    /// let mut leader = election.observe().await?;
    /// assert!(leader.borrow().is_none());
    /// let _leading = election.campaign().await?;
    /// leader.changed().await.expect("the observer runs");
    /// assert_eq!(leader.borrow().as_ref().map(|l| l.identity.clone()).as_deref(), Some("billing-1"));
    /// # Ok(()) }
    /// ```
    pub async fn observe(&self) -> Result<tokio::sync::watch::Receiver<Option<LeaderInfo>>> {
        let first = self.leader().await?;
        Ok(observe::spawn(
            self.client.inner().clone(),
            self.name.clone(),
            self.observe_every,
            first,
        ))
    }

    /// The leadership the leader hands over to this candidate, adopted: the note read
    /// every `observe_every` until it offers one (a failed read or adoption is tried again
    /// at the next).
    async fn handed_over_to_me(&self) -> Result<crate::Guard> {
        loop {
            tokio::time::sleep(self.observe_every).await;
            let offer = match leader::offer_to(self.client.inner(), &self.name, &self.identity)
                .await
            {
                Ok(Some(offer)) => offer,
                Ok(None) => continue,
                Err(err) => {
                    tracing::debug!(election = %self.name, error = %err, "cannot read the election's note");
                    continue;
                }
            };
            match self.client.adopt_with(&offer, &self.options).await {
                Ok(guard) => return Ok(guard),
                Err(err) => {
                    tracing::debug!(election = %self.name, error = %err, "the hand-over was not adopted")
                }
            }
        }
    }

    /// Refuses a bad identity, a reentrant owner and bad options; the proclamation of the
    /// identity.
    fn check(&self) -> Result<String> {
        let identity = &self.identity;
        validate_identity(identity)?;
        if self.options.reentrant.is_some() {
            return Err(Error::invalid(
                "an election is not reentrant: give it options without an owner",
            ));
        }
        self.options.validate()?;
        Proclaimed::new(identity, None, None).encode()
    }
}
