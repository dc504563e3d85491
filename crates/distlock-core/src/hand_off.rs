//! Hand-offs: a held exclusive grant passed to another process, which adopts it in one
//! atomic step with a new, greater fencing token, so a sender that writes late is refused
//! by the resource.

use std::fmt;
use std::str::FromStr;
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};
use tokio::sync::watch;
use tokio::time::Instant;

use crate::acquire::{GrantedTicket, grant};
use crate::backend::{
    Backend, Capabilities, Grant, Liveness, LockKind, LockRequest, PollOutcome, Session, Ticket,
    adopt_unsupported,
};
use crate::client::Client;
use crate::error::{Error, ErrorKind, Result};
use crate::guard::Guard;
use crate::name::check_name_for;
use crate::options::{LockOptions, MAX_TTL};
use crate::owner::{HolderMeta, at_unix_ms, random_token, unix_ms};

/// How often a sender whose grant is offered asks the store whether it still holds it.
const ADOPTION_CHECK: Duration = Duration::from_millis(100);

/// An exclusive grant offered to another process by [`Guard::hand_off`], for
/// [`Client::adopt`]. Send it as text ([`Display`](fmt::Display) and
/// [`FromStr`]: one line of JSON) over a channel only the adopter reads: whoever has it
/// can adopt the grant until its deadline. Its `Debug` hides the grant's token.
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> distlock_core::Result<()> {
/// use std::time::Duration;
/// use distlock_core::HandOff;
/// # let client = distlock_core::Client::connect("memory://").await?;
/// let guard = client.mutex("migrations").lock().await?;
/// let text = guard.hand_off(Duration::from_secs(30))?.to_string();
/// // … written to a pipe, read by the new version of the service …
/// let handed: HandOff = text.parse()?;
/// let adopted = client.adopt(&handed).await?;
/// assert!(adopted.fencing_token() > handed.fencing_token);
/// # Ok(()) }
/// ```
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct HandOff {
    /// The backend's URL scheme: it is adopted through a client of the same store.
    pub backend: String,
    /// The lock's name.
    pub name: String,
    /// What is held (a mutex, or the write lock of a read/write lock).
    pub kind: LockKind,
    /// The sender's owner.
    pub owner: String,
    /// The grant's request token, by which the store knows it: the secret that lets the
    /// adopter take it.
    pub grant: String,
    /// The grant's fencing token: the adopter's is greater.
    pub fencing_token: u64,
    /// Until when it may be adopted, in milliseconds since the Unix epoch.
    pub deadline_unix_ms: u64,
}

impl HandOff {
    /// Until when it may be adopted.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> distlock_core::Result<()> {
    /// # let client = distlock_core::Client::connect("memory://").await?;
    /// let guard = client.mutex("migrations").lock().await?;
    /// let handed = guard.hand_off(std::time::Duration::from_secs(30))?;
    /// assert!(handed.deadline() > std::time::SystemTime::now());
    /// # Ok(()) }
    /// ```
    pub fn deadline(&self) -> SystemTime {
        at_unix_ms(self.deadline_unix_ms)
    }
}

impl fmt::Debug for HandOff {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HandOff")
            .field("backend", &self.backend)
            .field("name", &self.name)
            .field("kind", &self.kind)
            .field("owner", &self.owner)
            .field("grant", &"…")
            .field("fencing_token", &self.fencing_token)
            .field("deadline_unix_ms", &self.deadline_unix_ms)
            .finish()
    }
}

impl fmt::Display for HandOff {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = serde_json::to_string(self).map_err(|_| fmt::Error)?;
        f.write_str(&text)
    }
}

impl FromStr for HandOff {
    type Err = Error;

    fn from_str(text: &str) -> Result<HandOff> {
        serde_json::from_str(text.trim())
            .map_err(|e| Error::invalid(format!("this is not a hand-off of a lock: {e}")))
    }
}

impl Guard {
    /// Offers this grant to another process for `within` (1 ms to [`MAX_TTL`]): the
    /// [`HandOff`] to send it. The guard stays held and renewed meanwhile; the adopter's
    /// [`Client::adopt`] takes the grant over with a greater fencing token, and the store
    /// then no longer holds it for this guard ([`handed_over`](Self::handed_over) waits for
    /// that). Only an exclusive grant (a mutex's, a write lock's) that is not reentrant
    /// and still held is offered; a backend whose grants are bound to their holder's
    /// session or connection (ZooKeeper, SQL session mode) refuses with `Unsupported`,
    /// saying why.
    ///
    /// # Examples
    ///
    /// See [`HandOff`].
    pub fn hand_off(&self, within: Duration) -> Result<HandOff> {
        let lease = self.lease();
        let backend = &lease.client.backend;
        let caps = backend.capabilities();
        if !caps.adopt {
            return Err(adopt_unsupported(backend.scheme(), caps));
        }
        if !(Duration::from_millis(1)..=MAX_TTL).contains(&within) {
            return Err(Error::invalid(format!(
                "a hand-off's window of {within:?} is not from 1ms to {}",
                humantime::format_duration(MAX_TTL)
            )));
        }
        if !lease.kind.is_exclusive() || lease.reentrant {
            return Err(Error::invalid(format!(
                "lock `{}`: a hand-off passes an exclusive grant that is not reentrant, not a {} one",
                self.name(),
                match lease.reentrant {
                    true => "reentrant",
                    false => lease.kind.as_str(),
                }
            )));
        }
        if !self.health().is_valid() {
            return Err(Error::new(
                ErrorKind::LockLost,
                format!(
                    "lock `{}` was lost: there is nothing to hand off",
                    self.name()
                ),
            ));
        }
        let adopted_by = Instant::now()
            .checked_add(within.saturating_add(lease.ttl))
            .unwrap_or_else(crate::backend::deadline::far_future);
        *lease
            .offered_until
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = Some(adopted_by);
        Ok(HandOff {
            backend: backend.scheme().to_owned(),
            name: self.name().to_owned(),
            kind: lease.kind,
            owner: lease.owner.as_str().to_owned(),
            grant: lease.handle.token.clone(),
            fencing_token: lease.fencing_token,
            deadline_unix_ms: unix_ms(SystemTime::now() + within),
        })
    }

    /// Waits until the grant offered as `handed` has left this guard: `Ok` once the store
    /// no longer holds it for it (adopted; or broken by an operator, or expired while the
    /// store was out of reach), asked every 100 ms while the guard is renewed; at the
    /// deadline, the grant is released and the wait fails with `Timeout`. `handed` must be
    /// this guard's offer (`InvalidInput` otherwise, the guard released).
    ///
    /// # Cancel safety
    ///
    /// Dropping the future drops the guard, which releases the grant in the background if
    /// it is still this guard's.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> distlock_core::Result<()> {
    /// use std::time::Duration;
    /// # let client = distlock_core::Client::connect("memory://").await?;
    /// let guard = client.mutex("migrations").lock().await?;
    /// let handed = guard.hand_off(Duration::from_secs(30))?;
    /// let adopter = {
    ///     let (client, handed) = (client.clone(), handed.clone());
    ///     tokio::spawn(async move { client.adopt(&handed).await })
    /// };
    /// guard.handed_over(&handed).await?;
    /// let adopted = adopter.await.expect("the adopter ran")?;
    /// assert!(adopted.fencing_token() > handed.fencing_token);
    /// # Ok(()) }
    /// ```
    pub async fn handed_over(self, handed: &HandOff) -> Result<()> {
        if handed.grant != self.lease().handle.token {
            return Err(Error::invalid(format!(
                "this hand-off of `{}` is not this guard's offer",
                handed.name
            )));
        }
        let left = handed
            .deadline()
            .duration_since(SystemTime::now())
            .unwrap_or_default();
        let deadline = Instant::now() + left;
        loop {
            let adopted = match self.renew().await {
                Ok(()) => false,
                Err(err) => matches!(err.kind(), ErrorKind::NotHeld | ErrorKind::LockLost),
            };
            if adopted {
                // The store holds it for this guard no more: nothing to release.
                self.forget();
                return Ok(());
            }
            if Instant::now() >= deadline {
                let name = self.name().to_owned();
                if let Err(err) = self.release().await
                    && err.kind() != ErrorKind::NotHeld
                {
                    tracing::warn!(lock = %name, error = %err, "releasing a hand-off nobody adopted failed; the lease ends on its own");
                }
                return Err(Error::new(
                    ErrorKind::Timeout,
                    format!(
                        "lock `{name}` was not adopted by its hand-off's deadline; it was released"
                    ),
                ));
            }
            tokio::time::sleep_until(deadline.min(Instant::now() + ADOPTION_CHECK)).await;
        }
    }
}

impl Client {
    /// Adopts the grant `handed` offers ([`Guard::hand_off`] in another process, or this
    /// one): in one atomic step the store gives it to this client, with a fencing token
    /// above the sender's (so the resource refuses the sender's late writes) and a lease of
    /// this client's default TTL, renewed as any guard's. Adopting it twice gives one
    /// guard: the second finds it gone (`NotHeld`), as does an adoption after the sender
    /// released it or its lease ran out. A hand-off past its deadline, of another
    /// backend, or not of an exclusive grant is `InvalidInput`; a backend that cannot
    /// adopt refuses with `Unsupported`. A call that times out may have adopted it in the
    /// store: the grant then ends with its lease.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future may leave the grant adopted in the store for this client's
    /// TTL, unused.
    ///
    /// # Examples
    ///
    /// See [`HandOff`].
    pub async fn adopt(&self, handed: &HandOff) -> Result<Guard> {
        let defaults = self.inner().defaults.clone();
        self.adopt_with(handed, &defaults).await
    }

    /// Adopts the grant `handed` offers as [`adopt`](Self::adopt) does, its lease taken
    /// and renewed by `options` (their TTL, renewal and hold limit; an owner given for
    /// reentrancy is left out: the grant gets an owner of its own).
    ///
    /// # Cancel safety
    ///
    /// As [`adopt`](Self::adopt).
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> distlock_core::Result<()> {
    /// use std::time::Duration;
    /// use distlock_core::LockOptions;
    /// # let client = distlock_core::Client::connect("memory://").await?;
    /// let guard = client.mutex("migrations").lock().await?;
    /// let handed = guard.hand_off(Duration::from_secs(30))?;
    /// let options = LockOptions::new().ttl(Duration::from_secs(5));
    /// let adopted = client.adopt_with(&handed, &options).await?;
    /// assert_eq!(adopted.ttl(), Duration::from_secs(5));
    /// # Ok(()) }
    /// ```
    pub async fn adopt_with(&self, handed: &HandOff, options: &LockOptions) -> Result<Guard> {
        let backend = self.inner().backend.clone();
        if handed.backend != backend.scheme() {
            return Err(Error::invalid(format!(
                "a hand-off of a {} lock cannot be adopted through a {} client",
                handed.backend,
                backend.scheme()
            )));
        }
        check_name_for(backend.as_ref(), &handed.name)?;
        if !handed.kind.is_exclusive() {
            return Err(Error::invalid(format!(
                "a hand-off passes an exclusive grant, not a {} one",
                handed.kind.as_str()
            )));
        }
        if handed.deadline() <= SystemTime::now() {
            return Err(Error::invalid(format!(
                "the hand-off of `{}` expired at {}",
                handed.name,
                humantime::format_rfc3339_millis(handed.deadline())
            )));
        }
        let caps = backend.capabilities();
        if !caps.adopt {
            return Err(adopt_unsupported(backend.scheme(), caps));
        }
        let options = LockOptions {
            reentrant: None,
            ..options.clone()
        };
        options.validate()?;
        let mut ticket = Ticket::new(LockRequest {
            name: handed.name.clone(),
            kind: handed.kind,
            permits: 1,
            owner: self.new_owner(),
            token: random_token(),
            ttl: options.ttl_value(),
            fair: false,
            wait: false,
            meta: HolderMeta::this_process(),
        });
        let offered = Grant::new(handed.name.clone(), handed.grant.clone(), handed.kind);
        let sent = Instant::now();
        let adopt = backend.adopt(&offered, handed.fencing_token, &mut ticket);
        let adopted = self.bounded("adopt", adopt).await?;
        let (fencing_token, session) = adopted_grant(backend.scheme(), caps, adopted)?;
        let channel = match session {
            Some(id) => Some(live_session(backend.as_ref(), id)?),
            None => None,
        };
        let granted = GrantedTicket {
            ticket,
            fencing_token,
            sent,
            session,
            first_lease: None,
        };
        Ok(grant(self, granted, channel, &options))
    }
}

/// The fencing token of an adoption, and the session it lives in on a session backend
/// (which the backend must name).
fn adopted_grant(
    scheme: &'static str,
    caps: Capabilities,
    adopted: PollOutcome,
) -> Result<(u64, Option<u64>)> {
    let broken = |why: &str| {
        Error::new(
            ErrorKind::Backend,
            format!("the {scheme} backend answered an adoption {why}"),
        )
        .with_backend(scheme)
    };
    match adopted {
        PollOutcome::Granted {
            fencing_token,
            session,
            ..
        } => match (caps.liveness, session) {
            (Liveness::Session, None) => Err(broken("without the session it lives in")),
            (Liveness::Session, session) => Ok((fencing_token, session)),
            (_, _) => Ok((fencing_token, None)),
        },
        _ => Err(broken("with no grant")),
    }
}

/// The session channel of a session backend, while session `id` (the one an adoption was
/// made in) is the live one: if it ended, the adopted grant went with it.
fn live_session(backend: &dyn Backend, id: u64) -> Result<watch::Receiver<Session>> {
    let channel = backend.session().ok_or_else(|| {
        Error::new(
            ErrorKind::Backend,
            "a session backend reported no session channel",
        )
    })?;
    let current = *channel.borrow();
    if current.id != id || !current.is_alive() {
        return Err(Error::new(
            ErrorKind::Unavailable,
            "the session ended as the grant was adopted: the grant went with it",
        )
        .with_backend(backend.scheme())
        .temporary());
    }
    Ok(channel)
}
