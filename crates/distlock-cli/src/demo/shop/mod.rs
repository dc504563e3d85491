//! The demo's shop: one product's stock (or, for the segmented strategy, its stock split
//! into segments) and its orders, in SQL (a SQLite file, a PostgreSQL or MySQL/MariaDB
//! database) or in Redis. Each strategy is one way to sell a unit; a shop says which apply.

mod in_redis;
mod in_sql;

use std::path::Path;
use std::time::Duration;

use distlock::sql::fenced::Dialect;
use distlock::{Error, Held, Mutex, Result};

use in_redis::RedisShop;
use in_sql::SqlShop;

/// The business logic between reading the stock and writing it back (a payment check).
const WORK: Duration = Duration::from_millis(2);

/// The product's row (or key); a segmented stock's segments are the rows after it.
const PRODUCT: i64 = 1;

/// The strategies of a SQL shop, in the order the story tells them.
const ON_SQL: [&str; 6] = [
    "none",
    "local-mutex",
    "optimistic",
    "select-for-update",
    "lock",
    "segmented",
];

/// The strategies of a Redis shop, in the order the story tells them.
const ON_REDIS: [&str; 7] = [
    "none",
    "local-mutex",
    "optimistic",
    "lock",
    "segmented",
    "redis-decr",
    "atomic-script",
];

/// The outcome of one buyer's attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sale {
    Sold,
    SoldOut,
}

/// What a shop is kept in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    Sql(Dialect),
    Redis,
}

impl Place {
    /// Where the shop at `location` lives: a database URL (`postgres://`, `mysql://`), a
    /// Redis URL (`redis://`, `rediss://`) or a SQLite file path. A URL of another scheme
    /// (`zk://…`) cannot hold a shop: bad input, not a file name.
    pub fn of(location: &str) -> Result<Place> {
        match location.split_once("://").map(|(scheme, _)| scheme) {
            Some("postgres" | "postgresql") => Ok(Place::Sql(Dialect::Postgres)),
            Some("mysql" | "mariadb") => Ok(Place::Sql(Dialect::MySql)),
            Some("sqlite") => Ok(Place::Sql(Dialect::Sqlite)),
            Some("redis" | "rediss") => Ok(Place::Redis),
            Some(scheme) if !scheme.is_empty() && !scheme.contains('/') => {
                Err(Error::invalid(format!(
                    "a shop lives in a SQLite file, a postgres:// or mysql:// database or a \
                     redis:// server, not at a {scheme}:// URL"
                )))
            }
            _ => Ok(Place::Sql(Dialect::Sqlite)),
        }
    }

    /// The strategies a shop here sells with, in the order the story tells them.
    pub fn strategies(self) -> &'static [&'static str] {
        match self {
            Place::Sql(_) => &ON_SQL,
            Place::Redis => &ON_REDIS,
        }
    }

    /// Refuses a strategy no shop has, or one a shop here does not, naming those that apply.
    pub fn check(self, strategy: &str) -> Result<()> {
        if self.strategies().contains(&strategy) {
            return Ok(());
        }
        let kept_in = match self {
            Place::Sql(_) => "a SQL database",
            Place::Redis => "Redis",
        };
        let why = match ON_SQL.contains(&strategy) || ON_REDIS.contains(&strategy) {
            true => format!("the strategy `{strategy}` does not apply to a shop in {kept_in}"),
            false => format!("unknown strategy `{strategy}`"),
        };
        Err(Error::invalid(format!(
            "{why} (a shop in {kept_in} sells with: {})",
            self.strategies().join(", ")
        )))
    }
}

#[derive(Debug, Clone)]
pub enum Shop {
    Sql(SqlShop),
    Redis(Box<RedisShop>),
}

impl Shop {
    /// Opens (creating what it needs) the shop at `location`, with up to `connections`
    /// connections.
    pub async fn open(location: &str, connections: u32) -> Result<Shop> {
        Ok(match Place::of(location)? {
            Place::Sql(dialect) => Shop::Sql(SqlShop::open(location, dialect, connections).await?),
            Place::Redis => Shop::Redis(Box::new(RedisShop::open(location).await?)),
        })
    }

    /// Empties the orders and puts `stock` units on the shelf, in `segments` parts.
    pub async fn restock(&self, stock: u32, segments: u32) -> Result<()> {
        match self {
            Shop::Sql(shop) => shop.restock(stock, segments).await,
            Shop::Redis(shop) => shop.restock(stock, segments).await,
        }
    }

    /// (orders taken, stock left).
    pub async fn tally(&self) -> Result<(i64, i64)> {
        match self {
            Shop::Sql(shop) => shop.tally().await,
            Shop::Redis(shop) => shop.tally().await,
        }
    }

    /// Removes the shop; `file`, a SQLite shop's file, is deleted when the demo made it.
    pub async fn remove(self, file: Option<&Path>) -> Result<()> {
        match self {
            Shop::Sql(shop) => shop.remove(file).await,
            Shop::Redis(shop) => shop.remove().await,
        }
    }

    /// Read, check, work, write back on row `row`.
    async fn sell_from(&self, row: i64, strategy: &str, token: Option<u64>) -> Result<Sale> {
        match self {
            Shop::Sql(shop) => shop.sell_from(row, strategy, token).await,
            Shop::Redis(shop) => shop.sell_from(row, strategy, token).await,
        }
    }

    /// Read, check, work, write back: correct alone, oversells under concurrency.
    pub async fn sell_unguarded(&self, strategy: &str) -> Result<Sale> {
        self.sell_from(PRODUCT, strategy, None).await
    }

    /// Compare-and-set, again on conflict: the sale and how many retries it took.
    pub async fn sell_optimistic(&self) -> Result<(Sale, u64)> {
        match self {
            Shop::Sql(shop) => shop.sell_optimistic().await,
            Shop::Redis(shop) => shop.sell_optimistic().await,
        }
    }

    /// The database's own row lock (SQL only).
    pub async fn sell_for_update(&self) -> Result<Sale> {
        match self {
            Shop::Sql(shop) => shop.sell_for_update().await,
            Shop::Redis(_) => Place::Redis
                .check("select-for-update")
                .map(|()| Sale::SoldOut),
        }
    }

    /// `DECR`, giving back a unit taken below zero (Redis only).
    pub async fn sell_decr(&self) -> Result<Sale> {
        match self {
            Shop::Redis(shop) => shop.sell_decr().await,
            Shop::Sql(shop) => refuse_on_sql(shop, "redis-decr"),
        }
    }

    /// One script that checks and decrements (Redis only).
    pub async fn sell_script(&self) -> Result<Sale> {
        match self {
            Shop::Redis(shop) => shop.sell_script().await,
            Shop::Sql(shop) => refuse_on_sql(shop, "atomic-script"),
        }
    }

    /// The read-check-write inside a distlock mutex, the order stamped with its token.
    pub async fn sell_locked(&self, mutex: &Mutex) -> Result<Sale> {
        mutex
            .with_lock(async |held: &Held| {
                self.sell_from(PRODUCT, "lock", Some(held.fencing_token()))
                    .await
            })
            .await
    }

    /// Segmented stock: each segment is a row under a mutex of its own, `segments[k]`
    /// guarding row `PRODUCT + k`. The buyer starts at segment `start` and moves on to the
    /// next while the one it tried is empty (`emptied` remembers those it found so: a
    /// segment never fills again), giving up only when every one is.
    pub async fn sell_segmented(
        &self,
        segments: &[Mutex],
        start: usize,
        emptied: &mut [bool],
    ) -> Result<Sale> {
        for step in 0..segments.len() {
            let at = (start + step) % segments.len();
            if emptied[at] {
                continue;
            }
            let row = PRODUCT + at as i64;
            let sale = segments[at]
                .with_lock(async |held: &Held| {
                    self.sell_from(row, "segmented", Some(held.fencing_token()))
                        .await
                })
                .await?;
            match sale {
                Sale::Sold => return Ok(Sale::Sold),
                Sale::SoldOut => emptied[at] = true,
            }
        }
        Ok(Sale::SoldOut)
    }
}

/// The refusal of a Redis strategy on a SQL shop.
fn refuse_on_sql(shop: &SqlShop, strategy: &str) -> Result<Sale> {
    Place::Sql(shop.dialect())
        .check(strategy)
        .map(|()| Sale::SoldOut)
}
