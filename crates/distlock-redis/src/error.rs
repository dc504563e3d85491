//! Redis errors as distlock errors: the link's failures temporary, a server's refusal of
//! the URL bad input, a script's refusal of a request its message.

use distlock_core::{Error, ErrorKind};

/// Maps a Redis error to a distlock error for `operation`.
pub(crate) fn redis_error(operation: &'static str) -> impl Fn(redis::RedisError) -> Error {
    move |err| {
        let transient = is_transient(&err);
        let kind = if transient {
            ErrorKind::Unavailable
        } else {
            ErrorKind::Backend
        };
        let out = Error::new(kind, format!("redis {operation} failed"))
            .with_backend("redis")
            .with_operation(operation)
            .with_source(err);
        if transient { out.temporary() } else { out }
    }
}

/// Whether an error is the link's (the server out of reach, slow, or gone), or a server's
/// that is not ready yet (loading its data after a restart, a cluster healing: a
/// redirection the cluster client still met after following its redirections, while a
/// replica takes over a slot; a server that lost its scripts, which the call that met that
/// gave it again), not an answer.
pub(crate) fn is_transient(err: &redis::RedisError) -> bool {
    use redis::{ErrorKind as Kind, ServerErrorKind as Server};
    err.is_io_error()
        || err.is_timeout()
        || err.is_connection_dropped()
        || err.is_connection_refusal()
        || matches!(
            err.kind(),
            Kind::Server(
                Server::BusyLoading
                    | Server::TryAgain
                    | Server::ClusterDown
                    | Server::MasterDown
                    | Server::Moved
                    | Server::Ask
                    | Server::NoScript
            )
        )
}

/// A failed connect. A server that refuses what the URL asks (a wrong or missing password,
/// a user without the rights, a database index out of range) makes the URL bad input; any
/// other failure is the server's or the link's, as for every other call. For programs
/// that open connections of their own beside distlock's (the demo's Redis shop).
///
/// # Examples
///
/// ```
/// use distlock_core::ErrorKind;
/// let refused = redis::RedisError::from((redis::ErrorKind::AuthenticationFailed, "WRONGPASS"));
/// assert_eq!(distlock_redis::connect_error(refused).kind(), ErrorKind::InvalidInput);
/// ```
pub fn connect_error(err: redis::RedisError) -> Error {
    let text = err.to_string();
    if text.contains("cluster support disabled") {
        return Error::invalid(
            "the URL asks for a Redis Cluster, but the node is not in one; use redis://",
        )
        .with_backend("redis")
        .with_operation("connect");
    }
    // The cluster client reports a first connection that failed as an I/O error with the
    // server's refusal only in its text.
    let refused = err.kind() == redis::ErrorKind::AuthenticationFailed
        || matches!(err.code(), Some("NOAUTH" | "WRONGPASS" | "NOPERM"))
        || ["AuthenticationFailed", "WRONGPASS", "NOAUTH", "NOPERM"]
            .iter()
            .any(|refusal| text.contains(refusal))
        || text.contains("DB index is out of range");
    if !refused {
        return redis_error("connect")(err);
    }
    Error::invalid(format!("the redis server refused the connection: {err}"))
        .with_backend("redis")
        .with_operation("connect")
}

/// The message of a script's `INVALID …` refusal (a request that may never be granted).
pub(crate) fn refusal(err: &redis::RedisError) -> Option<String> {
    if err.code() != Some("INVALID") {
        return None;
    }
    let detail = err.detail().unwrap_or("the request cannot be granted");
    Some(
        detail
            .split(" script:")
            .next()
            .unwrap_or(detail)
            .trim()
            .to_owned(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_server_still_loading_or_healing_is_temporary_a_refusal_is_not() {
        use redis::{ErrorKind as Kind, ServerErrorKind as Server};
        let answer = |kind| redis::RedisError::from((kind, "answer"));
        for kind in [
            Server::BusyLoading,
            Server::TryAgain,
            Server::ClusterDown,
            Server::MasterDown,
            Server::Moved,
            Server::Ask,
        ] {
            let err = redis_error("acquire")(answer(Kind::Server(kind)));
            assert!(err.is_temporary(), "{kind:?}: {err}");
            assert_eq!(err.kind(), ErrorKind::Unavailable);
        }
        let refused = redis_error("acquire")(answer(Kind::Server(Server::NoPerm)));
        assert!(!refused.is_temporary());
    }
}
