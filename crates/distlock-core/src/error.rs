//! One error type for every backend: a kind to match on, the backend and operation it came
//! from, the underlying cause, and whether trying again may help.

use std::error::Error as StdError;
use std::fmt;
use std::sync::Arc;

/// What went wrong, in terms a caller can act on.
///
/// # Examples
///
/// ```
/// use distlock_core::{Error, ErrorKind};
///
/// let err = Error::new(ErrorKind::NotHeld, "the lease expired before release");
/// assert_eq!(err.kind(), ErrorKind::NotHeld);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The caller passed something the library or the backend cannot accept: an empty or
    /// oversized name, a zero TTL, zero permits, a malformed URL, an unknown scheme.
    InvalidInput,
    /// The wait deadline passed before the lock was granted.
    Timeout,
    /// The grant this operation refers to is gone: it expired, was released, or was taken
    /// over by another holder.
    NotHeld,
    /// The lease was lost while it was being used.
    LockLost,
    /// Not enough independent nodes agreed (RedLock and other quorum backends).
    QuorumNotReached,
    /// The backend could not be reached or did not answer in time.
    Unavailable,
    /// The backend cannot do what was asked (a primitive or option it does not support).
    Unsupported,
    /// The backend answered with something the library did not expect.
    Backend,
}

impl ErrorKind {
    /// A short, stable, lower-case name for the kind (used in logs and metrics labels).
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(distlock_core::ErrorKind::Timeout.as_str(), "timeout");
    /// ```
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::InvalidInput => "invalid_input",
            ErrorKind::Timeout => "timeout",
            ErrorKind::NotHeld => "not_held",
            ErrorKind::LockLost => "lock_lost",
            ErrorKind::QuorumNotReached => "quorum_not_reached",
            ErrorKind::Unavailable => "unavailable",
            ErrorKind::Unsupported => "unsupported",
            ErrorKind::Backend => "backend",
        }
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The error every distlock operation returns.
///
/// Built like an OpenDAL error: a kind and a message, then the context it came from.
///
/// # Examples
///
/// ```
/// use distlock_core::{Error, ErrorKind};
///
/// let io = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused");
/// let err = Error::new(ErrorKind::Unavailable, "cannot reach the lock server")
///     .with_backend("sqlite")
///     .with_operation("acquire")
///     .with_source(io)
///     .temporary();
/// assert!(err.is_temporary());
/// assert_eq!(err.backend(), Some("sqlite"));
/// ```
#[derive(Clone)]
pub struct Error {
    kind: ErrorKind,
    message: String,
    backend: Option<&'static str>,
    operation: Option<&'static str>,
    temporary: bool,
    source: Option<Arc<dyn StdError + Send + Sync>>,
}

/// `Result` with distlock's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// A new error of `kind` with a message that says what was wrong.
    ///
    /// # Examples
    ///
    /// ```
    /// let err = distlock_core::Error::new(distlock_core::ErrorKind::InvalidInput, "empty name");
    /// assert_eq!(err.message(), "empty name");
    /// ```
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Error {
            kind,
            message: message.into(),
            backend: None,
            operation: None,
            temporary: false,
            source: None,
        }
    }

    /// Shorthand for an [`ErrorKind::InvalidInput`] error.
    ///
    /// # Examples
    ///
    /// ```
    /// let err = distlock_core::Error::invalid("ttl must not be zero");
    /// assert_eq!(err.kind(), distlock_core::ErrorKind::InvalidInput);
    /// ```
    pub fn invalid(message: impl Into<String>) -> Self {
        Error::new(ErrorKind::InvalidInput, message)
    }

    /// Records which backend (its URL scheme) the error came from.
    ///
    /// # Examples
    ///
    /// ```
    /// let err = distlock_core::Error::invalid("x").with_backend("memory");
    /// assert_eq!(err.backend(), Some("memory"));
    /// ```
    pub fn with_backend(mut self, backend: &'static str) -> Self {
        self.backend = Some(backend);
        self
    }

    /// Records which operation (`acquire`, `renew`, `release`, …) failed.
    ///
    /// # Examples
    ///
    /// ```
    /// let err = distlock_core::Error::invalid("x").with_operation("renew");
    /// assert_eq!(err.operation(), Some("renew"));
    /// ```
    pub fn with_operation(mut self, operation: &'static str) -> Self {
        self.operation = Some(operation);
        self
    }

    /// Attaches the underlying cause.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::error::Error as _;
    /// let io = std::io::Error::other("disk full");
    /// let err = distlock_core::Error::invalid("x").with_source(io);
    /// assert!(err.source().is_some());
    /// ```
    ///
    /// A source that says this process, or the system, has no file descriptors left
    /// (`EMFILE`, `ENFILE`) makes the error [`ErrorKind::Backend`] with a message that says
    /// so, whatever kind it was built with: the store is not at fault, and waiting for it
    /// will not help.
    pub fn with_source(mut self, source: impl StdError + Send + Sync + 'static) -> Self {
        if let Some(note) = descriptors_exhausted(&source) {
            self.kind = ErrorKind::Backend;
            self.temporary = false;
            self.message = format!("{note}; {}", self.message);
        }
        self.source = Some(Arc::new(source));
        self
    }

    /// Marks the error as worth retrying (a transient fault, not a wrong request), unless
    /// its source is this process out of file descriptors (see
    /// [`with_source`](Self::with_source)).
    ///
    /// # Examples
    ///
    /// ```
    /// let err = distlock_core::Error::new(distlock_core::ErrorKind::Unavailable, "busy").temporary();
    /// assert!(err.is_temporary());
    /// ```
    pub fn temporary(mut self) -> Self {
        // Asking again within a wait would not give this process descriptors back.
        let exhausted = self
            .source
            .as_deref()
            .is_some_and(|source| descriptors_exhausted(source).is_some());
        self.temporary = !exhausted;
        self
    }

    /// What went wrong.
    ///
    /// # Examples
    ///
    /// ```
    /// let err = distlock_core::Error::invalid("x");
    /// assert_eq!(err.kind(), distlock_core::ErrorKind::InvalidInput);
    /// ```
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The message, without the context.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(distlock_core::Error::invalid("bad").message(), "bad");
    /// ```
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The backend the error came from, if known.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(distlock_core::Error::invalid("bad").backend(), None);
    /// ```
    pub fn backend(&self) -> Option<&'static str> {
        self.backend
    }

    /// The operation that failed, if known.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(distlock_core::Error::invalid("bad").operation(), None);
    /// ```
    pub fn operation(&self) -> Option<&'static str> {
        self.operation
    }

    /// Whether trying the same operation again may succeed.
    ///
    /// # Examples
    ///
    /// ```
    /// assert!(!distlock_core::Error::invalid("bad").is_temporary());
    /// ```
    pub fn is_temporary(&self) -> bool {
        self.temporary
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// What to tell when `source`, or an error below it, is a process or the system out of file
/// descriptors. Some clients keep the I/O error only as text below theirs, so the text is
/// read too.
fn descriptors_exhausted(source: &(dyn StdError + 'static)) -> Option<&'static str> {
    const PROCESS: &str = "this process has no file descriptors left (EMFILE; raise `ulimit -n`)";
    const SYSTEM: &str = "the system has no file descriptors left (ENFILE)";
    let mut next = Some(source);
    while let Some(err) = next {
        let code = err
            .downcast_ref::<std::io::Error>()
            .and_then(std::io::Error::raw_os_error);
        let text = err.to_string();
        if code == Some(libc::EMFILE) || text.contains(&format!("(os error {})", libc::EMFILE)) {
            return Some(PROCESS);
        }
        if code == Some(libc::ENFILE) || text.contains(&format!("(os error {})", libc::ENFILE)) {
            return Some(SYSTEM);
        }
        next = err.source();
    }
    None
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.kind, self.message)?;
        match (self.backend, self.operation) {
            (Some(b), Some(o)) => write!(f, " ({b} {o})")?,
            (Some(b), None) => write!(f, " ({b})")?,
            (None, Some(o)) => write!(f, " ({o})")?,
            (None, None) => {}
        }
        if self.temporary {
            f.write_str(" [temporary]")?;
        }
        if let Some(source) = &self.source {
            write!(f, ": {source}")?;
        }
        Ok(())
    }
}

impl StdError for Error {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        self.source
            .as_ref()
            .map(|s| s.as_ref() as &(dyn StdError + 'static))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn running_out_of_descriptors_is_never_the_stores_fault() {
        let emfile = std::io::Error::from_raw_os_error(libc::EMFILE);
        let err = Error::new(ErrorKind::Unavailable, "redis connect failed").with_source(emfile);
        assert_eq!(err.kind(), ErrorKind::Backend);
        assert!(err.message().contains("ulimit -n"), "{err}");
        assert!(
            !err.clone().temporary().is_temporary(),
            "not worth asking again"
        );
        // Known only by its text, below a client's own error.
        let wrapped = Error::new(ErrorKind::Unavailable, "connect failed").with_source(
            std::io::Error::other(format!(
                "pool: {}",
                std::io::Error::from_raw_os_error(libc::ENFILE)
            )),
        );
        assert_eq!(wrapped.kind(), ErrorKind::Backend, "{wrapped}");
        let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        let err = Error::new(ErrorKind::Unavailable, "connect failed").with_source(refused);
        assert_eq!(err.kind(), ErrorKind::Unavailable);
    }

    #[test]
    fn display_names_kind_context_and_cause() {
        let err = Error::new(ErrorKind::Unavailable, "cannot open database")
            .with_backend("sqlite")
            .with_operation("connect")
            .with_source(std::io::Error::other("permission denied"))
            .temporary();
        assert_eq!(
            err.to_string(),
            "unavailable: cannot open database (sqlite connect) [temporary]: permission denied"
        );
    }
}
