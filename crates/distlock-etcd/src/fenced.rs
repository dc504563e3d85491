//! Resource-side fencing on etcd itself: a transaction condition that holds exactly while a
//! guard's grant stands, for users who write to etcd under an etcd lock.
//!
//! A holder that paused past its session (a GC pause, a stalled VM) may wake and write
//! after someone else took the lock. Written in one transaction with the condition
//! [`still_holds`], such a write is refused by etcd itself: the stale holder's key went
//! with its lease (or was deleted), so the condition fails and the transaction's `Then`
//! branch does not run. This is the safe way to write to etcd under an etcd lock.

use distlock_core::{Error, ErrorKind, Guard, Result};
use etcd_client::{Compare, CompareOp};

use crate::request::Request;

/// The condition "`guard`'s grant still stands": its contender key still exists as it was
/// created. Put it in the `when` of your own transaction; etcd runs the `Then` branch only
/// while the grant stands. An error for a guard of another backend.
///
/// # Examples
///
/// ```no_run
/// # async fn demo(client: &distlock_core::Client, mut kv: distlock_etcd::etcd_client::KvClient)
/// #     -> distlock_core::Result<()> {
/// use distlock_etcd::etcd_client::{Txn, TxnOp};
///
/// let guard = client.mutex("accounts/7").lock().await?;
/// let write = Txn::new()
///     .when([distlock_etcd::still_holds(&guard)?])
///     .and_then([TxnOp::put("accounts/7/balance", "120", None)]);
/// let answer = kv.txn(write).await.expect("etcd answers");
/// assert!(answer.succeeded(), "refused only if the lock was lost");
/// # Ok(()) }
/// ```
pub fn still_holds(guard: &Guard) -> Result<Compare> {
    let key = guard
        .grant()
        .state::<Request>()
        .and_then(|request| request.key.as_ref())
        .ok_or_else(|| {
            Error::new(
                ErrorKind::InvalidInput,
                "this guard is not of an etcd lock: its grant has no etcd key",
            )
            .with_backend("etcd")
        })?;
    Ok(Compare::create_revision(
        key.name.as_str(),
        CompareOp::Equal,
        key.created,
    ))
}
