//! One demo per shop: a demo holds the lock `distlock-demo/<shop>` in the lock store while
//! it sells and tidies up, so a second demo on the same shop is refused at once instead of
//! restocking, selling from and removing the tables of the first.

use std::path::Path;
use std::time::Duration;

use distlock::sql::fenced::Dialect;
use distlock::{Client, Guard, LockOptions, Result};

use super::shop::Place;
use crate::location::{lock_url, open_client};

/// A shop claimed by this demo.
pub struct Claim {
    client: Client,
    guard: Guard,
}

impl Claim {
    /// Claims the shop at `shop_at` in the store of `locks` (or in the SQLite default when
    /// that store is one process's own, `memory://`); `None` when another demo has it.
    pub async fn take(locks: &str, shop_at: &str) -> Result<Option<Claim>> {
        let name = name_of(shop_at)?;
        let mut client = open_client(locks).await?;
        if !client.capabilities().cross_process {
            client = open_client(&lock_url(&None)?).await?;
        }
        let options = LockOptions::new().ttl(CLAIM_TTL);
        let guard = client.mutex(name).with_options(options).try_lock().await?;
        Ok(guard.map(|guard| Claim { client, guard }))
    }

    /// Gives the shop up, waiting for the release (the program ends next).
    pub async fn give_up(self) {
        let _ = self.guard.release().await;
        let _ = self.client.close().await;
    }
}

/// The claim's lease: renewed while the demo runs, and what a demo killed outright (which
/// could not give the shop up) holds the next one off for at most.
pub const CLAIM_TTL: Duration = Duration::from_secs(10);

/// The claim's lock name: a hash of where the shop is, so any path or URL makes a name
/// every backend takes. The place is the shop file's canonical path (through `..` and
/// symbolic links), or the database's scheme, host, port and name, whoever connects.
fn name_of(shop_at: &str) -> Result<String> {
    let place = match Place::of(shop_at)? {
        Place::Sql(Dialect::Sqlite) => {
            let file = shop_at.strip_prefix("sqlite://").unwrap_or(shop_at);
            let file = std::path::absolute(Path::new(file))
                .map_err(|e| distlock::Error::invalid(format!("bad shop path {shop_at}: {e}")))?;
            let dir = file.parent().map(std::fs::canonicalize).transpose();
            match (dir, file.file_name()) {
                (Ok(Some(dir)), Some(name)) => dir.join(name).display().to_string(),
                _ => file.display().to_string(),
            }
        }
        Place::Redis => {
            // The shop's keys have fixed names in the server's database: `rediss://h`,
            // `redis://h:6379` and `redis://h/0` are one shop.
            let url = distlock::Url::parse(shop_at)
                .map_err(|e| distlock::Error::invalid(format!("bad shop URL: {e}")))?;
            let db = url.path().trim_matches('/');
            format!(
                "redis://{}:{}/{}",
                url.host_str().unwrap_or(""),
                url.port().unwrap_or(6379),
                if db.is_empty() { "0" } else { db }
            )
        }
        Place::Sql(Dialect::Postgres | Dialect::MySql) => {
            let url = distlock::Url::parse(shop_at)
                .map_err(|e| distlock::Error::invalid(format!("bad shop URL: {e}")))?;
            format!(
                "{}://{}:{}{}",
                url.scheme()
                    .replace("mariadb", "mysql")
                    .replace("postgresql", "postgres"),
                url.host_str().unwrap_or(""),
                url.port().unwrap_or(0),
                url.path()
            )
        }
    };
    Ok(format!("distlock-demo/{:016x}", fnv1a(place.as_bytes())))
}

/// The 64-bit FNV-1a hash of `bytes`: the same in every build, unlike std's hasher.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}
