//! ZooKeeper's errors as distlock errors.

use distlock_core::{Error, ErrorKind};
use zookeeper_client as zk;

/// Turns a ZooKeeper error of `operation` into a distlock error: a lost connection or
/// session is temporary (`Unavailable`), the rest is the server's answer (`Backend`).
pub(crate) fn zk_error(operation: &'static str) -> impl Fn(zk::Error) -> Error {
    move |err| {
        let transient = matches!(
            err,
            zk::Error::ConnectionLoss
                | zk::Error::SessionExpired
                | zk::Error::SessionMoved
                | zk::Error::Timeout
                | zk::Error::NoHosts
                | zk::Error::Throttled
                | zk::Error::Custom(_)
        );
        let kind = match (&err, transient) {
            (zk::Error::NoAuth | zk::Error::AuthFailed, _) => ErrorKind::InvalidInput,
            (_, true) => ErrorKind::Unavailable,
            (_, false) => ErrorKind::Backend,
        };
        let message = match kind {
            ErrorKind::InvalidInput => format!(
                "ZooKeeper refused the {operation}: the credentials may not touch the lock's node"
            ),
            _ => format!("ZooKeeper {operation} failed"),
        };
        let out = Error::new(kind, message)
            .with_backend("zookeeper")
            .with_operation(operation)
            .with_source(err);
        if transient { out.temporary() } else { out }
    }
}
