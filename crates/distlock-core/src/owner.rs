//! Owners: explicit, serialisable identities that grants are recorded under.

use std::fmt;
use std::time::{SystemTime, UNIX_EPOCH};

use rand::Rng;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// The longest owner token accepted, in bytes.
pub const MAX_OWNER_LEN: usize = 256;

/// Who holds a grant: a client id plus a unique suffix, as one printable token.
///
/// Reentrancy is keyed to an `Owner`, never to an OS thread: two acquisitions with the same
/// owner and the `reentrant` option share one grant. Owners serialise to their token, so an
/// owner can be written down and handed to another task or process.
///
/// # Examples
///
/// ```
/// use distlock_core::Owner;
///
/// let owner = Owner::parse("billing-7f3a:worker-1")?;
/// assert_eq!(owner.as_str(), "billing-7f3a:worker-1");
/// assert_ne!(Owner::random(), Owner::random());
/// # Ok::<(), distlock_core::Error>(())
/// ```
#[derive(Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Owner(String);

impl Owner {
    /// A fresh owner under a fresh random client id.
    ///
    /// # Examples
    ///
    /// ```
    /// let owner = distlock_core::Owner::random();
    /// assert!(owner.as_str().contains(':'));
    /// ```
    pub fn random() -> Self {
        Owner::under(&random_id())
    }

    /// A fresh owner under `client_id`: `client_id:unique-suffix`.
    ///
    /// # Examples
    ///
    /// ```
    /// let owner = distlock_core::Owner::under("api");
    /// assert!(owner.as_str().starts_with("api:"));
    /// ```
    pub fn under(client_id: &str) -> Self {
        let mut owner = String::with_capacity(client_id.len() + 17);
        owner.push_str(client_id);
        owner.push(':');
        push_random_hex(&mut owner);
        Owner(owner)
    }

    /// Parses an owner token written earlier by [`Owner::as_str`].
    ///
    /// The token must be 1 to 256 bytes of printable ASCII without spaces.
    ///
    /// # Examples
    ///
    /// ```
    /// assert!(distlock_core::Owner::parse("").is_err());
    /// assert!(distlock_core::Owner::parse("a b").is_err());
    /// ```
    pub fn parse(token: &str) -> Result<Self> {
        if token.is_empty() || token.len() > MAX_OWNER_LEN {
            return Err(Error::invalid(format!(
                "owner token must be 1 to {MAX_OWNER_LEN} bytes, got {}",
                token.len()
            )));
        }
        if let Some(c) = token.chars().find(|c| !c.is_ascii_graphic()) {
            return Err(Error::invalid(format!(
                "owner token may hold only printable ASCII without spaces, found {c:?}"
            )));
        }
        Ok(Owner(token.to_owned()))
    }

    /// The token, as stored by backends.
    ///
    /// # Examples
    ///
    /// ```
    /// let owner = distlock_core::Owner::parse("x:1")?;
    /// assert_eq!(owner.as_str(), "x:1");
    /// # Ok::<(), distlock_core::Error>(())
    /// ```
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Owner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Owner({})", self.0)
    }
}

impl fmt::Display for Owner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl TryFrom<String> for Owner {
    type Error = Error;
    fn try_from(value: String) -> Result<Self> {
        Owner::parse(&value)
    }
}

impl From<Owner> for String {
    fn from(owner: Owner) -> String {
        owner.0
    }
}

/// A random identifier of 16 hex digits, unique for all practical purposes.
///
/// # Examples
///
/// ```
/// assert_eq!(distlock_core::random_id().len(), 16);
/// ```
pub fn random_id() -> String {
    let mut id = String::with_capacity(16);
    push_random_hex(&mut id);
    id
}

/// Appends 16 random hex digits to `out` (64 random bits).
pub(crate) fn push_random_hex(out: &mut String) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let value: u64 = rand::rng().random();
    for shift in (0..16).rev() {
        out.push(char::from(DIGITS[(value >> (shift * 4)) as usize & 15]));
    }
}

/// A request token: 32 random hex digits (128 random bits).
pub(crate) fn random_token() -> String {
    let mut token = String::with_capacity(32);
    push_random_hex(&mut token);
    push_random_hex(&mut token);
    token
}

/// Who and where a grant was made for, as shown by `distlock status`.
///
/// # Examples
///
/// ```
/// let meta = distlock_core::HolderMeta::this_process();
/// assert_eq!(meta.pid, std::process::id());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HolderMeta {
    /// Host name of the machine the holder runs on.
    pub host: String,
    /// Process id of the holder.
    pub pid: u32,
    /// When the grant was made, in milliseconds since the Unix epoch (holder's clock).
    pub acquired_at_unix_ms: u64,
}

impl HolderMeta {
    /// Metadata for this process, stamped with the current time.
    ///
    /// # Examples
    ///
    /// ```
    /// let meta = distlock_core::HolderMeta::this_process();
    /// assert!(!meta.host.is_empty());
    /// ```
    pub fn this_process() -> Self {
        HolderMeta {
            host: host_name(),
            pid: process_id(),
            acquired_at_unix_ms: unix_ms(SystemTime::now()),
        }
    }
}

/// The moment `ms` milliseconds after the Unix epoch (a time a store stamped).
pub(crate) fn at_unix_ms(ms: u64) -> SystemTime {
    UNIX_EPOCH + std::time::Duration::from_millis(ms)
}

/// Milliseconds since the Unix epoch; zero for times before it.
pub(crate) fn unix_ms(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// This process's id, asked of the kernel once (every request carries it).
fn process_id() -> u32 {
    static PID: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    *PID.get_or_init(std::process::id)
}

fn host_name() -> String {
    static HOST: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    HOST.get_or_init(read_host_name).clone()
}

fn read_host_name() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is valid for `buf.len()` bytes and gethostname writes at most that.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return "unknown".to_owned();
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owner_round_trips_through_serde() {
        let owner = Owner::under("svc");
        let json = serde_json::to_string(&owner).unwrap();
        assert_eq!(json, format!("\"{}\"", owner.as_str()));
        assert_eq!(serde_json::from_str::<Owner>(&json).unwrap(), owner);
        let refused = serde_json::from_str::<Owner>("\"has space\"").unwrap_err();
        assert!(refused.to_string().contains("printable ASCII"), "{refused}");
    }

    #[test]
    fn ids_and_tokens_are_random_lowercase_hex() {
        let hex = |s: &str| {
            s.bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
        };
        let (a, b) = (random_id(), random_id());
        assert!(a.len() == 16 && hex(&a) && a != b, "{a} {b}");
        let token = random_token();
        assert!(token.len() == 32 && hex(&token), "{token}");
        let owner = Owner::under("svc");
        let (client, id) = owner.as_str().split_once(':').unwrap();
        assert!(client == "svc" && id.len() == 16 && hex(id), "{owner}");
    }

    #[test]
    fn oversized_owner_is_rejected() {
        let long = "x".repeat(MAX_OWNER_LEN + 1);
        assert_eq!(
            Owner::parse(&long).unwrap_err().kind(),
            crate::ErrorKind::InvalidInput
        );
    }
}
