//! Where the locks are: `--url`, else `DISTLOCK_URL`, else a SQLite file in the user's
//! state directory (created on first use).

use std::path::{Path, PathBuf};

use distlock::{Client, Error, Result};

/// The user's state directory for distlock: `$XDG_STATE_HOME/distlock`, else
/// `~/.local/state/distlock`.
pub fn state_dir() -> Result<PathBuf> {
    let base = match std::env::var_os("XDG_STATE_HOME").filter(|v| !v.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        None => {
            let home = std::env::var_os("HOME")
                .filter(|v| !v.is_empty())
                .ok_or_else(|| {
                    Error::invalid("neither --url, DISTLOCK_URL, XDG_STATE_HOME nor HOME is set")
                })?;
            Path::new(&home).join(".local").join("state")
        }
    };
    let dir = base.join("distlock");
    std::fs::create_dir_all(&dir).map_err(|e| {
        Error::invalid(format!(
            "cannot create the state directory {}: {e}",
            dir.display()
        ))
    })?;
    Ok(dir)
}

/// The lock URL to use: `--url`, else `DISTLOCK_URL` (set and not empty), else the
/// SQLite default.
pub fn lock_url(given: &Option<String>) -> Result<String> {
    let from_env = match std::env::var("DISTLOCK_URL") {
        Ok(url) => Some(url).filter(|url| !url.is_empty()),
        Err(std::env::VarError::NotPresent) => None,
        Err(std::env::VarError::NotUnicode(_)) => {
            return Err(Error::invalid("DISTLOCK_URL is not valid UTF-8"));
        }
    };
    match given.clone().or(from_env) {
        Some(url) => Ok(url),
        None => Ok(format!(
            "sqlite://{}",
            state_dir()?.join("locks.db").display()
        )),
    }
}

/// The SQLite file behind a `sqlite://` URL, if it is one.
pub fn sqlite_file(url: &str) -> Option<PathBuf> {
    let parsed = distlock::Url::parse(url).ok()?;
    if parsed.scheme() != "sqlite" {
        return None;
    }
    distlock::sql::sqlite::SqliteConfig::from_url(&parsed)
        .ok()
        .map(|c| c.path)
}

/// Connects to the lock URL.
pub async fn connect(given: &Option<String>) -> Result<(String, Client)> {
    let url = lock_url(given)?;
    let client = Client::connect(&url).await?;
    Ok((url, client))
}

/// Connects to the lock URL for `what`, a use whose locks other processes must see: a
/// backend whose locks live inside one process (`memory://`) is refused, naming `what`.
pub async fn connect_shared(given: &Option<String>, what: &str) -> Result<(String, Client)> {
    let (url, client) = connect(given).await?;
    refuse_process_local(&client, what)?;
    Ok((url, client))
}

/// An `InvalidInput` error when `client`'s locks live inside this process only, so that
/// `what` (a use that spans processes) would exclude nothing and show nothing.
pub fn refuse_process_local(client: &Client, what: &str) -> Result<()> {
    match client.backend().capabilities().cross_process {
        true => Ok(()),
        false => Err(Error::invalid(format!(
            "{what}, but {}:// locks live inside one process and no other process sees them; \
             use a store processes share, such as sqlite:// (the default) or redis://",
            client.backend().scheme()
        ))),
    }
}
