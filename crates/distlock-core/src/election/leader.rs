//! Who leads an election, as the store shows it: the holder of the election's mutex and the
//! proclamation it wrote under its grant (the lock's note).

use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

use crate::backend::{Note, check_note};
use crate::client::ClientInner;
use crate::error::{Error, ErrorKind, Result};
use crate::hand_off::HandOff;
use crate::name::check_name_for;
use crate::owner::HolderMeta;
use crate::owner::at_unix_ms;

/// The leader of an election, as [`Election::leader`](crate::Election::leader) reads it and
/// [`Election::observe`](crate::Election::observe) sends it.
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> distlock_core::Result<()> {
/// # let client = distlock_core::Client::connect("memory://").await?;
/// let election = client.election("services/billing").identity("billing-1");
/// let leadership = election.campaign().await?;
/// let leader = election.leader().await?.expect("a leader");
/// assert_eq!(leader.identity, "billing-1");
/// assert_eq!(leader.term, leadership.term());
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct LeaderInfo {
    /// The identity the leader campaigned with.
    pub identity: String,
    /// Its term: the fencing token of its grant, above every earlier leader's.
    pub term: u64,
    /// The last value it proclaimed (`None` before it proclaims one).
    pub value: Option<String>,
    /// When its leadership began, on the store's clock (`None` where the store has none:
    /// etcd).
    pub since: Option<SystemTime>,
    /// When its lease ends unless renewed, on this process's clock, from what the store
    /// said is left of it at the read (`None` for a grant that lives by its holder's
    /// session).
    pub until: Option<SystemTime>,
    /// The leader's host.
    pub host: String,
    /// The leader's process id.
    pub pid: u32,
}

/// The stored proclamation: short names, as it is written at each proclaim.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct Proclaimed {
    /// The identity.
    pub(super) e: String,
    /// The proclaimed value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) v: Option<String>,
    /// When the leadership began, on the store's clock (ms since the Unix epoch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) s: Option<u64>,
    /// The candidate the leader hands over to, and the hand-off it offers it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) to: Option<(String, String)>,
    h: String,
    p: u32,
}

impl Proclaimed {
    /// A proclamation by `identity` of this process.
    pub(super) fn new(identity: &str, value: Option<String>, since_ms: Option<u64>) -> Self {
        let meta = HolderMeta::this_process();
        Proclaimed {
            e: identity.to_owned(),
            v: value,
            s: since_ms,
            to: None,
            h: meta.host,
            p: meta.pid,
        }
    }

    /// Its stored text, refused (`InvalidInput`) when it is longer than a note holds.
    pub(super) fn encode(&self) -> Result<String> {
        let text = serde_json::to_string(self).map_err(|e| {
            Error::new(
                ErrorKind::Backend,
                format!("cannot encode a proclamation: {e}"),
            )
        })?;
        check_note(&text).map_err(|_| {
            Error::invalid(format!(
                "the proclamation is {} bytes encoded, more than the {} a store keeps beside a lock: proclaim a shorter value",
                text.len(),
                crate::backend::MAX_NOTE_LEN
            ))
        })?;
        Ok(text)
    }
}

/// The leader of election `name` as the store shows it now: the holder of its mutex, when
/// the note beside it was written under that holder's grant. A holder that has not yet
/// proclaimed (it won a moment ago), or that is not a candidate, is no leader yet.
pub(super) async fn read(client: &ClientInner, name: &str) -> Result<Option<LeaderInfo>> {
    check_name_for(client.backend.as_ref(), name)?;
    let states = client
        .bounded("status", client.backend.inspect(Some(name)))
        .await?;
    let Some(holder) = states
        .into_iter()
        .find(|state| state.name == name)
        .and_then(|state| state.holders.into_iter().find(|h| h.kind.is_exclusive()))
    else {
        return Ok(None);
    };
    let note = read_note(client, name).await?;
    let Some(note) = note.filter(|note| note.fencing_token == holder.fencing_token) else {
        return Ok(None);
    };
    let until = holder
        .remaining_ms
        .map(|ms| SystemTime::now() + Duration::from_millis(ms));
    Ok(Some(info(name, note, until)?))
}

/// The hand-off the leader of election `name` offers the candidate `identity`, if it offers
/// one now: in the note the current grant wrote.
pub(super) async fn offer_to(
    client: &ClientInner,
    name: &str,
    identity: &str,
) -> Result<Option<HandOff>> {
    let Some(note) = read_note(client, name).await? else {
        return Ok(None);
    };
    let Ok(stored) = serde_json::from_str::<Proclaimed>(&note.value) else {
        return Ok(None);
    };
    let Some((_, offer)) = stored.to.filter(|(to, _)| to == identity) else {
        return Ok(None);
    };
    let offer: HandOff = offer.parse()?;
    Ok((offer.fencing_token == note.fencing_token).then_some(offer))
}

/// Election `name`'s note, read within the client's operation timeout.
async fn read_note(client: &ClientInner, name: &str) -> Result<Option<Note>> {
    client
        .bounded("read_note", client.backend.read_note(name))
        .await
        .map_err(unsupported_note)
}

/// The leader a note of election `name` names.
fn info(name: &str, note: Note, until: Option<SystemTime>) -> Result<LeaderInfo> {
    let stored: Proclaimed = serde_json::from_str(&note.value).map_err(|e| {
        Error::new(
            ErrorKind::Backend,
            format!(
                "the note of `{name}` is not an election's proclamation ({e}): another program writes it"
            ),
        )
    })?;
    Ok(LeaderInfo {
        identity: stored.e,
        term: note.fencing_token,
        value: stored.v,
        since: stored.s.or(note.written_unix_ms).map(at_unix_ms),
        until,
        host: stored.h,
        pid: stored.p,
    })
}

/// A backend's refusal to keep notes, said as what an election needs.
pub(super) fn unsupported_note(err: Error) -> Error {
    match err.kind() {
        ErrorKind::Unsupported => Error::new(
            ErrorKind::Unsupported,
            format!(
                "an election keeps its leader's identity beside the lock, and this backend keeps nothing there: {err}"
            ),
        ),
        _ => err,
    }
}
