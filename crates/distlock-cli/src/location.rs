//! Where the locks are: `--url` or `--url-file`, else `DISTLOCK_URL` or
//! `DISTLOCK_URL_FILE`, else a SQLite file in the user's state directory (created on first
//! use).

use std::path::{Path, PathBuf};

use distlock::{Client, Error, Result};

use crate::output::errln;

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

/// The lock URL given, read once: `--url`, the contents of `--url-file`, `DISTLOCK_URL`
/// (set and not empty), or the contents of the file `DISTLOCK_URL_FILE` names; `None` for
/// the SQLite default ([`lock_url`]). A password on the command line, where `ps` shows it
/// to every user, is warned about.
pub fn given_url(url: Option<String>, url_file: Option<&Path>) -> Result<Option<String>> {
    if let Some(url) = url {
        if distlock::redact_url(&url) != url {
            errln!(
                "distlock: warning: the password in --url is visible to every user of this \
                 machine (ps) while distlock runs; give the URL with --url-file or \
                 DISTLOCK_URL_FILE instead"
            );
        }
        return Ok(Some(url));
    }
    if let Some(file) = url_file {
        return read_url_file(file, "--url-file").map(Some);
    }
    let from_env = env_var("DISTLOCK_URL")?;
    match (from_env, env_var("DISTLOCK_URL_FILE")?) {
        (Some(_), Some(_)) => Err(Error::invalid(
            "both DISTLOCK_URL and DISTLOCK_URL_FILE are set; unset one",
        )),
        (Some(url), None) => Ok(Some(url)),
        (None, Some(file)) => read_url_file(Path::new(&file), "DISTLOCK_URL_FILE").map(Some),
        (None, None) => Ok(None),
    }
}

/// An environment variable that is set and not empty.
fn env_var(name: &str) -> Result<Option<String>> {
    match std::env::var(name) {
        Ok(value) => Ok(Some(value).filter(|value| !value.is_empty())),
        Err(std::env::VarError::NotPresent) => Ok(None),
        Err(std::env::VarError::NotUnicode(_)) => {
            Err(Error::invalid(format!("{name} is not valid UTF-8")))
        }
    }
}

/// The lock URL in `file` (named by `what`): its one line, without the whitespace around
/// it. A file other users may read is warned about, as they may read the password too.
fn read_url_file(file: &Path, what: &str) -> Result<String> {
    use std::os::unix::fs::PermissionsExt;
    let _ = URL_FILE.set(std::path::absolute(file).unwrap_or_else(|_| file.to_path_buf()));
    let cannot =
        |e: std::io::Error| Error::invalid(format!("cannot read {what} {}: {e}", file.display()));
    let metadata = std::fs::metadata(file).map_err(cannot)?;
    if !metadata.is_file() {
        return Err(Error::invalid(format!(
            "{what} {} is not a file",
            file.display()
        )));
    }
    // A URL is short; a huge file is not one (and is not read whole).
    if metadata.len() > MAX_URL_FILE {
        return Err(Error::invalid(format!(
            "{what} {} is {} bytes, more than a lock URL's {MAX_URL_FILE}",
            file.display(),
            metadata.len()
        )));
    }
    let mode = metadata.permissions().mode();
    if mode & 0o077 != 0 {
        errln!(
            "distlock: warning: {what} {} can be read by other users (mode {:o}); `chmod 600` it",
            file.display(),
            mode & 0o777
        );
    }
    let text = std::fs::read_to_string(file).map_err(cannot)?;
    let url = text.trim();
    if url.is_empty() || url.contains(['\n', '\r']) {
        return Err(Error::invalid(format!(
            "{what} {} must hold one lock URL on one line",
            file.display()
        )));
    }
    Ok(url.to_owned())
}

/// The file the lock URL was read from, if it was read from one.
static URL_FILE: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();

/// The file the lock URL was read from (`--url-file`, `DISTLOCK_URL_FILE`), if it was.
pub fn url_file() -> Option<&'static Path> {
    URL_FILE.get().map(PathBuf::as_path)
}

/// The longest file `--url-file` reads, in bytes.
const MAX_URL_FILE: u64 = 64 * 1024;

/// The lock URL to use: the one given ([`given_url`]), else the SQLite default.
pub fn lock_url(given: &Option<String>) -> Result<String> {
    match given.clone() {
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

/// How long `demo`, `bench` and `torture` give a store to connect (`status` has its own
/// bound, `run` its wait).
pub const CONNECT_WITHIN: std::time::Duration = std::time::Duration::from_secs(5);

/// Connects to `url` within [`CONNECT_WITHIN`]: a store that accepts and never answers is
/// told of (`Unavailable`), not waited on.
pub async fn open_client(url: &str) -> Result<Client> {
    crate::deadline::within(CONNECT_WITHIN, Client::connect(url), |limit| {
        Error::new(
            distlock::ErrorKind::Unavailable,
            format!(
                "the lock store at {} did not let a client connect within {}",
                distlock::redact_url(url),
                humantime::format_duration(limit)
            ),
        )
        .temporary()
    })
    .await
}

/// Connects to the lock URL within [`CONNECT_WITHIN`].
pub async fn connect(given: &Option<String>) -> Result<(String, Client)> {
    let url = lock_url(given)?;
    let client = open_client(&url).await?;
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
    match client.capabilities().cross_process {
        true => Ok(()),
        false => Err(Error::invalid(format!(
            "{what}, but {}:// locks live inside one process and no other process sees them; \
             use a store processes share, such as sqlite:// (the default) or redis://",
            client.scheme()
        ))),
    }
}
