//! etcd's errors as distlock errors.

use distlock_core::{Error, ErrorKind};
use tonic::{Code, Status};

/// Whether `status` says the session's lease is gone on the server (expired or revoked).
pub(crate) fn lease_gone(status: &Status) -> bool {
    status.message().contains("requested lease not found")
}

/// What etcd says when it refuses a request for its credentials.
const AUTH_REFUSALS: [&str; 5] = [
    "authentication failed",
    "user name is empty",
    "user name not found",
    "invalid auth token",
    "authentication is not enabled",
];

/// Turns an etcd error of `operation` into a distlock error: a lost connection, a member
/// without a leader or a lost lease is temporary (`Unavailable`); refused credentials or
/// permissions are `InvalidInput`; the rest is the server's answer (`Backend`).
pub(crate) fn etcd_error(operation: &'static str) -> impl Fn(Status) -> Error {
    move |status| {
        let kind = match status.code() {
            Code::Unauthenticated | Code::PermissionDenied => ErrorKind::InvalidInput,
            // etcd's answers to credentials it refuses, to none where it wants some,
            // and to some where it has auth off.
            Code::InvalidArgument | Code::FailedPrecondition
                if AUTH_REFUSALS.iter().any(|m| status.message().contains(m)) =>
            {
                ErrorKind::InvalidInput
            }
            // A transport failure (no connection, a broken one) is one of these too.
            Code::Unavailable
            | Code::DeadlineExceeded
            | Code::Cancelled
            | Code::Aborted
            | Code::ResourceExhausted
            | Code::Unknown => ErrorKind::Unavailable,
            _ if lease_gone(&status) => ErrorKind::Unavailable,
            _ => ErrorKind::Backend,
        };
        let message = match kind {
            ErrorKind::InvalidInput => format!(
                "etcd refused the {operation}: {} (check the URL's user and password, and that the user's role may read and write the lock's prefix)",
                status.message()
            ),
            _ => format!("etcd {operation} failed: {}", status.message()),
        };
        let out = Error::new(kind, message)
            .with_backend("etcd")
            .with_operation(operation)
            .with_source(status);
        match kind {
            ErrorKind::Unavailable => out.temporary(),
            _ => out,
        }
    }
}
