//! Lock names: what every backend accepts.

use crate::backend::Backend;
use crate::error::{Error, Result};

/// The longest lock name accepted, in bytes.
pub const MAX_NAME_LEN: usize = 1024;

/// Checks a lock name: 1 to 1024 bytes of UTF-8 with no control characters (no NUL, newline
/// or tab), which every backend can store and every log can print.
///
/// # Examples
///
/// ```
/// use distlock_core::validate_name;
///
/// assert!(validate_name("orders/42").is_ok());
/// assert!(validate_name("").is_err());
/// assert!(validate_name("a\0b").is_err());
/// ```
pub fn validate_name(name: &str) -> Result<()> {
    if name.is_empty() {
        return Err(Error::invalid("lock name must not be empty"));
    }
    if name.len() > MAX_NAME_LEN {
        return Err(Error::invalid(format!(
            "lock name is {} bytes, longer than the maximum {MAX_NAME_LEN}",
            name.len()
        )));
    }
    if let Some((at, c)) = name.char_indices().find(|(_, c)| c.is_control()) {
        return Err(Error::invalid(format!(
            "lock name has the control character {c:?} at byte {at}; backends cannot store it"
        )));
    }
    Ok(())
}

/// Checks `name` for `backend`: [`validate_name`], then what the backend itself refuses
/// ([`Backend::check_name`]).
pub(crate) fn check_name_for(backend: &dyn Backend, name: &str) -> Result<()> {
    validate_name(name)?;
    backend.check_name(name)
}
