//! Resource-side fencing on etcd itself: a transaction condition that holds exactly while a
//! guard's grant stands, for users who write to etcd under an etcd lock.
//!
//! A holder that paused past its session (a GC pause, a stalled VM) may wake and write
//! after someone else took the lock. Written in one transaction with the condition
//! [`still_holds`], such a write is refused by etcd itself: the stale holder's key went
//! with its lease (or was deleted), so the condition fails and the transaction's `Then`
//! branch does not run. Nor does it after the grant was handed off: the adopter's write
//! of the key changed its mod revision. This is the safe way to write to etcd under an
//! etcd lock.

use distlock_core::{Error, ErrorKind, Guard, Result};

use crate::request::Request;

/// The etcd key a guard's grant stands on, the revision that created it and the one that
/// granted it: the grant stands exactly while `key` exists as last written at
/// `mod_revision` (the guard's fencing token; nothing writes a held key but an adoption,
/// which takes the grant over). Any etcd client can put that in a transaction's condition
/// (etcd-client's `Compare::mod_revision(key, CompareOp::Equal, mod_revision)`; etcdctl's
/// `txn` takes `mod("<key>") = "<mod_revision>"`).
///
/// # Examples
///
/// ```
/// let held = distlock_etcd::HeldKey {
///     key: "locks/accounts/7/694d7a1b2c3d".into(),
///     create_revision: 42,
///     mod_revision: 43,
/// };
/// assert_eq!(held.etcdctl_compare(), r#"mod("locks/accounts/7/694d7a1b2c3d") = "43""#);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeldKey {
    /// The grant's contender key.
    pub key: String,
    /// The revision that created it (its place in the lock's queue).
    pub create_revision: i64,
    /// The revision of the write that granted it: the guard's fencing token.
    pub mod_revision: i64,
}

impl HeldKey {
    /// The condition as `etcdctl txn` reads it.
    ///
    /// # Examples
    ///
    /// See [`HeldKey`].
    pub fn etcdctl_compare(&self) -> String {
        format!("mod({:?}) = \"{}\"", self.key, self.mod_revision)
    }
}

/// The condition "`guard`'s grant still stands": its contender key still exists as its
/// grant wrote it. Put it in the condition of your own transaction; etcd runs the transaction's
/// success branch only while the grant stands. An error for a guard of another backend.
///
/// # Examples
///
/// With the etcd-client crate:
///
/// ```no_run
/// # async fn demo(client: &distlock_core::Client, mut kv: etcd_client::KvClient)
/// #     -> distlock_core::Result<()> {
/// use etcd_client::{Compare, CompareOp, Txn, TxnOp};
///
/// let guard = client.mutex("accounts/7").lock().await?;
/// let held = distlock_etcd::still_holds(&guard)?;
/// let write = Txn::new()
///     .when([Compare::mod_revision(held.key, CompareOp::Equal, held.mod_revision)])
///     .and_then([TxnOp::put("accounts/7/balance", "120", None)]);
/// let answer = kv.txn(write).await.expect("etcd answers");
/// assert!(answer.succeeded(), "refused only if the lock was lost");
/// # Ok(()) }
/// ```
pub fn still_holds(guard: &Guard) -> Result<HeldKey> {
    let key = distlock_core::backend::grant_of(guard)
        .state::<Request>()
        .and_then(|request| request.key.as_ref())
        .ok_or_else(|| {
            Error::new(
                ErrorKind::InvalidInput,
                "this guard is not of an etcd lock: its grant has no etcd key",
            )
            .with_backend("etcd")
        })?;
    Ok(HeldKey {
        key: key.name.clone(),
        create_revision: key.created,
        mod_revision: key.granted,
    })
}
