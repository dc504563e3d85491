//! The RedLock store: every operation goes to all masters at once and counts a majority.

use std::sync::Arc;
use std::time::{Duration, Instant};

use distlock_core::backend::{
    Backend, Capabilities, Floor, Grant, LeaseOutcome, LockRequest, Note, PollOutcome, Ticket,
    async_trait,
};
use distlock_core::{Error, ErrorKind, HolderInfo, LockState, Result};

use super::config::RedlockConfig;
use super::connect::Master;
use super::fanout::Answers;
use super::tails::Tails;
use crate::redis::LetGo;

/// The shortest and longest default bound on one master's answer.
const NODE_TIMEOUT_RANGE: (Duration, Duration) =
    (Duration::from_millis(5), Duration::from_millis(200));
/// How long each master gets to answer a break.
const BREAK_WITHIN: Duration = Duration::from_secs(1);
/// The longest pause before a refused request tries again.
pub(super) const MAX_RETRY_DELAY: Duration = Duration::from_millis(50);

/// A lock store over independent Redis masters (RedLock): a lock is held while a majority
/// of masters hold it for the holder's token.
///
/// # Examples
///
/// ```no_run
/// # async fn f() -> distlock_core::Result<()> {
/// use std::sync::Arc;
/// use distlock_redis::{RedlockBackend, RedlockConfig};
///
/// let url = distlock_core::parse_lock_url("redlock://10.0.0.1:6379,10.0.0.2:6379,10.0.0.3:6379")?;
/// let backend = RedlockBackend::open(RedlockConfig::from_url(&url)?).await?;
/// let client = distlock_core::Client::with_backend(Arc::new(backend));
/// # Ok(()) }
/// ```
pub struct RedlockBackend {
    pub(super) masters: Vec<Arc<Master>>,
    pub(super) quorum: usize,
    node_timeout: Option<Duration>,
    /// The calls left running once a majority answered.
    pub(super) tails: Arc<Tails>,
}

impl std::fmt::Debug for RedlockBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let configs: Vec<_> = self.masters.iter().map(|m| &m.config).collect();
        f.debug_struct("RedlockBackend")
            .field("masters", &configs)
            .field("quorum", &self.quorum)
            .finish()
    }
}

impl RedlockBackend {
    /// Connects to the masters; fails unless a majority answers.
    ///
    /// # Examples
    ///
    /// See [`RedlockBackend`].
    pub async fn open(config: RedlockConfig) -> Result<RedlockBackend> {
        let backend = RedlockBackend {
            quorum: config.quorum(),
            node_timeout: config.node_timeout,
            tails: Arc::default(),
            masters: config.masters.into_iter().map(Master::new).collect(),
        };
        let opened = super::connect::until_a_quorum(&backend.masters, backend.quorum).await;
        // The rest are connected on tasks of their own, not by the first calls to them.
        for master in &backend.masters {
            master.connect_in_background();
        }
        super::connect::refused(&opened, backend.quorum)?;
        let answers: Answers<()> = opened.into_iter().map(Result::ok).collect();
        // Masters out of reach may be back soon: worth trying again, within a deadline.
        backend
            .quorum_of("connect", &answers)
            .map_err(Error::temporary)?;
        Ok(backend)
    }

    /// The bound on one master's answer for a lock of `ttl`.
    pub(super) fn node_timeout(&self, ttl: Duration) -> Duration {
        self.node_timeout
            .unwrap_or_else(|| (ttl / 20).clamp(NODE_TIMEOUT_RANGE.0, NODE_TIMEOUT_RANGE.1))
    }

    /// The fencing token a majority of masters show for `request`'s grant, made on the
    /// masters of `fences` (each a position and the token it gave) by calls that began at
    /// `started`: the highest, every master behind it stamped with it; `None` when fewer
    /// than a majority granted it or show it, or the lease's validity (less drift) is
    /// spent.
    pub(super) async fn agree_on_token(
        &self,
        fences: &[(usize, u64)],
        request: &LockRequest,
        started: Instant,
        timeout: Duration,
    ) -> Option<u64> {
        let valid = request
            .ttl
            .mul_f64(0.99)
            .saturating_sub(Duration::from_millis(2))
            .saturating_sub(started.elapsed());
        if fences.len() < self.quorum || valid.is_zero() {
            return None;
        }
        let token = fences.iter().map(|(_, fence)| *fence).max()?;
        let behind: Vec<usize> = fences
            .iter()
            .filter(|(_, fence)| *fence < token)
            .map(|(at, _)| *at)
            .collect();
        let raised = self
            .on_these(&behind, timeout, |master| {
                master.restamp(&request.name, &request.token, token)
            })
            .await;
        let at_token = fences.len() - behind.len() + raised.iter().flatten().count();
        (at_token >= self.quorum).then_some(token)
    }

    /// How many masters answered that they do not hold the grant (`NotHeld`).
    pub(super) fn refusals<T>(answers: &Answers<Result<T>>) -> usize {
        answers
            .iter()
            .flatten()
            .filter(|a| a.as_ref().is_err_and(|e| e.kind() == ErrorKind::NotHeld))
            .count()
    }

    /// How many masters there are.
    pub(super) fn masters(&self) -> usize {
        self.masters.len()
    }

    /// An error unless a majority of masters answered.
    pub(super) fn quorum_of<T>(&self, operation: &'static str, answers: &Answers<T>) -> Result<()> {
        let answered = answers.iter().filter(|a| a.is_some()).count();
        if answered >= self.quorum {
            return Ok(());
        }
        Err(Error::new(
            ErrorKind::QuorumNotReached,
            format!(
                "only {answered} of {} RedLock masters answered; {} must",
                self.masters.len(),
                self.quorum
            ),
        )
        .with_backend("redlock")
        .with_operation(operation))
    }

    /// Lets go of `lease` on the masters at positions `these`, as `why` says.
    pub(super) async fn let_go_on(
        &self,
        these: &[usize],
        lease: &Grant,
        why: LetGo,
        timeout: Duration,
    ) -> Answers<bool> {
        self.on_these(these, timeout, |master| async move {
            Ok(master.let_go(lease, why).await? == LeaseOutcome::Done)
        })
        .await
    }
}

/// The grant `request` would have on the masters (to give back what some of them granted).
pub(super) fn grant_of(request: &LockRequest) -> Grant {
    Grant::new(&request.name, &request.token, request.kind)
}

#[async_trait]
impl Backend for RedlockBackend {
    fn scheme(&self) -> &'static str {
        "redlock"
    }

    /// Mutexes only. Not semaphores: permits granted on different majorities can exceed the
    /// limit with no master seeing it. Not read/write locks: a waiting writer must hold back
    /// new readers, which needs one queue every master agrees on, and each master keeps its
    /// own. Not fair mode, for the same reason. Waiters are woken by releases (pushed), and
    /// refresh their places in the masters' queues.
    fn capabilities(&self) -> Capabilities {
        let mut caps = Capabilities::lease();
        caps.fencing = true;
        caps.durable_fencing = true;
        caps.force_release = true;
        caps.notes = true;
        caps.adopt = true;
        caps.push_wakeups = true;
        caps
    }

    /// One try on every master.
    async fn poll(&self, ticket: &mut Ticket) -> Result<PollOutcome> {
        self.try_masters(ticket).await
    }

    /// Waits until releases on a majority of masters woke the ticket (see the `redlock`
    /// module's "How a waiter waits"), or `backstop`.
    async fn wait_for_change(&self, ticket: &mut Ticket, backstop: Option<Duration>) -> Result<()> {
        self.wait_for_wakes(ticket, backstop).await;
        Ok(())
    }

    /// Withdraws the request on every master: its place in the queue, and any grant made
    /// under its token (a hand-off that reached it as it gave up is passed on).
    async fn cancel(&self, ticket: &mut Ticket) -> Result<()> {
        let timeout = self.node_timeout(ticket.request.ttl);
        let request = &ticket.request;
        self.on_all(timeout, |master| async move {
            master.cancel(&mut Ticket::new(request.clone())).await
        })
        .await;
        Ok(())
    }

    /// Held while a majority renewed; lost once so many masters said "not held" that no
    /// majority can renew; otherwise a temporary error (the guard is at risk).
    async fn renew_many(&self, leases: &[Grant], ttl: Duration) -> Result<Vec<LeaseOutcome>> {
        let answers = self
            .on_all(self.node_timeout(ttl), |master| {
                master.renew_many(leases, ttl)
            })
            .await;
        let masters = self.masters.len();
        let mut outcomes = Vec::with_capacity(leases.len());
        for at in 0..leases.len() {
            let said = |outcome: LeaseOutcome| {
                answers
                    .iter()
                    .flatten()
                    .filter(|a| a.get(at) == Some(&outcome))
                    .count()
            };
            if said(LeaseOutcome::Done) >= self.quorum {
                outcomes.push(LeaseOutcome::Done);
            } else if said(LeaseOutcome::NotHeld) > masters - self.quorum {
                outcomes.push(LeaseOutcome::NotHeld);
            } else {
                return Err(Error::new(
                    ErrorKind::QuorumNotReached,
                    "no majority of RedLock masters answered the renewal",
                )
                .with_backend("redlock")
                .with_operation("renew")
                .temporary());
            }
        }
        Ok(outcomes)
    }

    async fn release(&self, lease: &Grant) -> Result<LeaseOutcome> {
        let timeout = self.node_timeout(Duration::from_secs(60));
        let released = self
            .on_all_until(
                timeout,
                |master| {
                    let lease = lease.clone();
                    async move {
                        let released = master.ready()?.let_go(&lease, LetGo::Release).await?;
                        Ok(released == LeaseOutcome::Done)
                    }
                },
                |released| released.iter().flatten().filter(|r| **r).count() >= self.quorum,
                |_, _| async {},
            )
            .await;
        let done = released.iter().flatten().filter(|r| **r).count();
        if done >= self.quorum {
            return Ok(LeaseOutcome::Done);
        }
        self.quorum_of("release", &released)?;
        Ok(LeaseOutcome::NotHeld)
    }

    /// Names with braces are refused, as on Redis.
    fn check_name(&self, name: &str) -> Result<()> {
        crate::keys::check_name(name)
    }

    async fn inspect(&self, name: Option<&str>) -> Result<Vec<LockState>> {
        self.states(name).await
    }

    async fn write_note(
        &self,
        grant: &Grant,
        fencing_token: u64,
        value: &str,
        quiet_for: Option<Duration>,
    ) -> Result<Option<u64>> {
        self.write_note_on_masters(grant, fencing_token, value, quiet_for)
            .await
    }

    async fn adopt(
        &self,
        handed: &Grant,
        fencing_token: u64,
        ticket: &mut Ticket,
    ) -> Result<PollOutcome> {
        let adopted = self.adopt_on_masters(handed, fencing_token, ticket).await?;
        Ok(PollOutcome::granted(adopted))
    }

    async fn read_note(&self, name: &str) -> Result<Option<Note>> {
        self.read_note_on_masters(name).await
    }

    /// Breaks the grant on every master that answers (each bumps its own counter first,
    /// so the next grant's token, the highest of its majority, is above the broken one); a
    /// majority must answer. A grant is matched on each master by the token stamped there:
    /// the masters of its majority all show the one it was given.
    async fn force_release(
        &self,
        name: &str,
        fencing_token: Option<u64>,
    ) -> Result<Vec<HolderInfo>> {
        // Well within the caller's operation timeout: a master that hangs must not turn a
        // break a majority made into a failure.
        let answers = self
            .on_all(BREAK_WITHIN, |master| {
                master.force_release(name, fencing_token)
            })
            .await;
        self.quorum_of("force_release", &answers)?;
        Ok(self.merged(answers.into_iter().flatten().flatten(), 1))
    }

    /// Waits for the calls to slower masters that operations left running (a release's
    /// to the masters after the majority that answered first).
    async fn settle(&self, within: Duration) -> bool {
        self.tails.settle(within).await
    }

    fn floor(&self) -> Option<&dyn Floor> {
        Some(self)
    }
}

#[async_trait]
impl Floor for RedlockBackend {
    fn op(&self) -> &'static str {
        "PING (slowest master)"
    }

    /// A `PING` of every master, each connected first if it is not yet (a client starts
    /// once a majority connected): the floor is the slowest master's round trip, which no
    /// lock call reorders.
    async fn round(&self) -> Result<()> {
        let pings = self.masters.iter().map(|master| async move {
            let ping = async { master.get().await?.round().await };
            matches!(
                tokio::time::timeout(Duration::from_secs(5), ping).await,
                Ok(Ok(()))
            )
        });
        let pinged = futures_util::future::join_all(pings).await;
        match pinged.into_iter().all(|answered| answered) {
            true => Ok(()),
            false => Err(Error::new(
                ErrorKind::Unavailable,
                "a RedLock master did not answer PING",
            )
            .with_backend("redlock")),
        }
    }
}
