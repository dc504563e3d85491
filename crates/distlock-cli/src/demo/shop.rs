//! The demo's shop: one product with a stock and a version, and an orders table, in a
//! SQLite file of its own. Each strategy is one way to sell a unit.

use std::path::Path;
use std::time::Duration;

use distlock::{Error, Mutex, Result};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions};
use sqlx::{Row, SqlitePool};

/// The business logic between reading the stock and writing it back (a payment check).
const WORK: Duration = Duration::from_millis(2);

/// The outcome of one buyer's attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sale {
    Sold,
    SoldOut,
}

#[derive(Debug, Clone)]
pub struct Shop {
    pool: SqlitePool,
}

fn shop_error(what: &'static str) -> impl Fn(sqlx::Error) -> Error {
    move |e| {
        Error::new(
            distlock::ErrorKind::Unavailable,
            format!("shop database: {what}"),
        )
        .with_source(e)
    }
}

impl Shop {
    pub async fn open(path: &Path, connections: u32) -> Result<Shop> {
        let options = SqliteConnectOptions::new()
            .filename(path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .busy_timeout(Duration::from_secs(60));
        let pool = SqlitePoolOptions::new()
            .max_connections(connections.max(1))
            .acquire_timeout(Duration::from_secs(60))
            .connect_with(options)
            .await
            .map_err(shop_error("open"))?;
        for statement in [
            "CREATE TABLE IF NOT EXISTS product (id INTEGER PRIMARY KEY, stock INTEGER NOT NULL, version INTEGER NOT NULL)",
            "CREATE TABLE IF NOT EXISTS orders (id INTEGER PRIMARY KEY AUTOINCREMENT, strategy TEXT NOT NULL, fencing_token INTEGER)",
        ] {
            sqlx::query(statement)
                .execute(&pool)
                .await
                .map_err(shop_error("create tables"))?;
        }
        Ok(Shop { pool })
    }

    pub async fn restock(&self, stock: u32) -> Result<()> {
        let mut tx = self.pool.begin().await.map_err(shop_error("restock"))?;
        sqlx::query("DELETE FROM orders")
            .execute(&mut *tx)
            .await
            .map_err(shop_error("restock"))?;
        sqlx::query("INSERT OR REPLACE INTO product (id, stock, version) VALUES (1, ?1, 0)")
            .bind(i64::from(stock))
            .execute(&mut *tx)
            .await
            .map_err(shop_error("restock"))?;
        tx.commit().await.map_err(shop_error("restock"))
    }

    /// (orders taken, stock left).
    pub async fn tally(&self) -> Result<(i64, i64)> {
        let orders: i64 = sqlx::query("SELECT COUNT(*) FROM orders")
            .fetch_one(&self.pool)
            .await
            .and_then(|r| r.try_get(0))
            .map_err(shop_error("tally"))?;
        let (stock, _) = self.read().await?;
        Ok((orders, stock))
    }

    async fn read(&self) -> Result<(i64, i64)> {
        let row = sqlx::query("SELECT stock, version FROM product WHERE id = 1")
            .fetch_one(&self.pool)
            .await
            .map_err(shop_error("read stock"))?;
        Ok((
            row.try_get(0).map_err(shop_error("read stock"))?,
            row.try_get(1).map_err(shop_error("read stock"))?,
        ))
    }

    /// Writes `stock` back and records an order, in one transaction.
    async fn write_back(&self, stock: i64, strategy: &str, token: Option<u64>) -> Result<()> {
        let mut tx = self.pool.begin().await.map_err(shop_error("sell"))?;
        sqlx::query("UPDATE product SET stock = ?1 WHERE id = 1")
            .bind(stock)
            .execute(&mut *tx)
            .await
            .map_err(shop_error("sell"))?;
        self.record(&mut tx, strategy, token).await?;
        tx.commit().await.map_err(shop_error("sell"))
    }

    async fn record(
        &self,
        tx: &mut sqlx::Transaction<'_, sqlx::Sqlite>,
        strategy: &str,
        token: Option<u64>,
    ) -> Result<()> {
        sqlx::query("INSERT INTO orders (strategy, fencing_token) VALUES (?1, ?2)")
            .bind(strategy)
            .bind(token.map(|t| t as i64))
            .execute(&mut **tx)
            .await
            .map_err(shop_error("record order"))?;
        Ok(())
    }

    /// Read, check, work, write back: correct alone, oversells under concurrency.
    pub async fn sell_unguarded(&self, strategy: &str, token: Option<u64>) -> Result<Sale> {
        let (stock, _) = self.read().await?;
        if stock <= 0 {
            return Ok(Sale::SoldOut);
        }
        tokio::time::sleep(WORK).await;
        self.write_back(stock - 1, strategy, token).await?;
        Ok(Sale::Sold)
    }

    /// Compare-and-set on the version column, retrying on conflict. Returns the sale and
    /// how many retries it took.
    pub async fn sell_optimistic(&self) -> Result<(Sale, u64)> {
        let mut retries = 0;
        loop {
            let (stock, version) = self.read().await?;
            if stock <= 0 {
                return Ok((Sale::SoldOut, retries));
            }
            tokio::time::sleep(WORK).await;
            let mut tx = self.pool.begin().await.map_err(shop_error("sell"))?;
            let changed = sqlx::query(
                "UPDATE product SET stock = ?1, version = version + 1 WHERE id = 1 AND version = ?2",
            )
            .bind(stock - 1)
            .bind(version)
            .execute(&mut *tx)
            .await
            .map_err(shop_error("sell"))?
            .rows_affected();
            if changed == 1 {
                self.record(&mut tx, "optimistic", None).await?;
                tx.commit().await.map_err(shop_error("sell"))?;
                return Ok((Sale::Sold, retries));
            }
            tx.rollback().await.map_err(shop_error("sell"))?;
            retries += 1;
        }
    }

    /// The read-check-write inside a distlock mutex, the order stamped with its token.
    pub async fn sell_locked(&self, mutex: &Mutex) -> Result<Sale> {
        let guard = mutex.lock().await?;
        let sale = self
            .sell_unguarded("lock", Some(guard.fencing_token()))
            .await;
        guard.release().await?;
        sale
    }
}
