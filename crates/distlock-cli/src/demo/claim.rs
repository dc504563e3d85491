//! One demo per shop: a demo holds the lock `distlock-demo/<shop>` in the lock store while
//! it sells and tidies up, so a second demo on the same shop is refused at once instead of
//! restocking, selling from and removing the tables of the first.

use distlock::{Client, Guard, Result};

use super::shop::{dialect_of, driver_url};
use crate::location::lock_url;

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
        let mut client = Client::connect(locks).await?;
        if !client.backend().capabilities().cross_process {
            client = Client::connect(&lock_url(&None)?).await?;
        }
        let guard = client.mutex(name).try_lock().await?;
        Ok(guard.map(|guard| Claim { client, guard }))
    }

    /// Gives the shop up, waiting for the release (the program ends next).
    pub async fn give_up(self) {
        let _ = self.guard.release().await;
        let _ = self.client.close().await;
    }
}

/// The claim's lock name: a hash of where the shop is (its absolute path, or its URL
/// without a password), so any path or URL makes a name every backend takes.
fn name_of(shop_at: &str) -> Result<String> {
    let at = distlock::redact_url(&driver_url(shop_at, dialect_of(shop_at)?)?);
    Ok(format!("distlock-demo/{:016x}", fnv1a(at.as_bytes())))
}

/// The 64-bit FNV-1a hash of `bytes`: the same in every build, unlike std's hasher.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}
