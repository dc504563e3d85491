//! A shop in SQL: one product with a stock and a version (or, for the segmented strategy,
//! its stock split over several rows), and an orders table, in a SQLite file of its own or
//! in a PostgreSQL or MySQL/MariaDB database.

use std::borrow::Cow;
use std::path::Path;
use std::time::Duration;

use distlock::sql::fenced::Dialect;
use distlock::{Error, Result};
use sqlx::any::{AnyPoolOptions, AnyRow};
use sqlx::{AnyPool, Executor, Row};

use super::{PRODUCT, Sale, WORK};

#[derive(Debug, Clone)]
pub struct SqlShop {
    pool: AnyPool,
    dialect: Dialect,
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

/// A failed open of the shop at `location` (`dialect`): bad input when the server answered
/// and refused (a wrong password, a database that does not exist, a certificate it does not
/// trust; for SQLite, a file it cannot open), the server's unavailability when it is out of
/// reach, starting or full.
fn open_error(location: &str, dialect: Dialect, e: sqlx::Error) -> Error {
    let err = match dialect {
        Dialect::Postgres => distlock::sql::connect_error("postgres", e),
        Dialect::MySql => distlock::sql::connect_error("mysql", e),
        Dialect::Sqlite => {
            let kind = match &e {
                sqlx::Error::Database(_) | sqlx::Error::Configuration(_) => {
                    distlock::ErrorKind::InvalidInput
                }
                _ => distlock::ErrorKind::Unavailable,
            };
            Error::new(kind, "sqlite refused it").with_source(e)
        }
    };
    Error::new(
        err.kind(),
        format!("cannot open the shop at {}", distlock::redact_url(location)),
    )
    .with_source(err)
}

/// The driver URL of a shop location.
fn driver_url(location: &str, dialect: Dialect) -> Result<String> {
    match dialect {
        Dialect::Sqlite => {
            let file = location.strip_prefix("sqlite://").unwrap_or(location);
            let path = std::path::absolute(Path::new(file))
                .map_err(|e| Error::invalid(format!("bad shop path {location}: {e}")))?;
            if path.is_dir() {
                return Err(Error::invalid(format!(
                    "the shop {} is a directory; name a file",
                    path.display()
                )));
            }
            if !path.parent().is_some_and(Path::is_dir) {
                return Err(Error::invalid(format!(
                    "the shop's directory does not exist: {}",
                    path.parent().unwrap_or(&path).display()
                )));
            }
            let url = distlock::Url::from_file_path(&path)
                .map_err(|()| Error::invalid(format!("bad shop path {}", path.display())))?;
            Ok(format!("sqlite{}?mode=rwc", &url.as_str()["file".len()..]))
        }
        Dialect::MySql => Ok(location.replacen("mariadb://", "mysql://", 1)),
        Dialect::Postgres => Ok(location.to_owned()),
    }
}

impl SqlShop {
    /// Opens (creating the tables if needed) the shop at `location`, in `dialect`.
    pub async fn open(location: &str, dialect: Dialect, connections: u32) -> Result<SqlShop> {
        sqlx::any::install_default_drivers();
        let url = driver_url(location, dialect)?;
        let pool = AnyPoolOptions::new()
            .max_connections(connections.max(1))
            .acquire_timeout(Duration::from_secs(60))
            .after_connect(move |conn, _| {
                Box::pin(async move {
                    if dialect == Dialect::Sqlite {
                        conn.execute("PRAGMA busy_timeout = 60000").await?;
                        conn.execute("PRAGMA journal_mode = WAL").await?;
                        // The shop is the demo's scratch: a commit need not reach the disk
                        // before the next buyer reads (WAL keeps the file whole anyway).
                        conn.execute("PRAGMA synchronous = NORMAL").await?;
                    }
                    Ok(())
                })
            })
            .connect(&url)
            .await
            .map_err(|e| open_error(location, dialect, e))?;
        let shop = SqlShop { pool, dialect };
        for statement in shop.schema() {
            sqlx::query(statement)
                .execute(&shop.pool)
                .await
                .map_err(shop_error("create tables"))?;
        }
        Ok(shop)
    }

    /// The database's dialect.
    pub fn dialect(&self) -> Dialect {
        self.dialect
    }

    fn schema(&self) -> [&'static str; 2] {
        let product = "CREATE TABLE IF NOT EXISTS distlock_demo_product
            (id BIGINT PRIMARY KEY, stock BIGINT NOT NULL, version BIGINT NOT NULL)";
        let orders = match self.dialect {
            Dialect::Sqlite => {
                "CREATE TABLE IF NOT EXISTS distlock_demo_orders (id INTEGER PRIMARY KEY AUTOINCREMENT,
                 strategy TEXT NOT NULL, fencing_token BIGINT)"
            }
            Dialect::Postgres => {
                "CREATE TABLE IF NOT EXISTS distlock_demo_orders (id BIGSERIAL PRIMARY KEY,
                 strategy TEXT NOT NULL, fencing_token BIGINT)"
            }
            Dialect::MySql => {
                "CREATE TABLE IF NOT EXISTS distlock_demo_orders (id BIGINT AUTO_INCREMENT PRIMARY KEY,
                 strategy VARCHAR(32) NOT NULL, fencing_token BIGINT)"
            }
        };
        [product, orders]
    }

    /// Drops the shop's tables and closes it; then deletes `file` (with SQLite's journal
    /// beside it), when the shop is a file the demo made.
    pub async fn remove(self, file: Option<&Path>) -> Result<()> {
        for table in ["distlock_demo_orders", "distlock_demo_product"] {
            sqlx::query(&format!("DROP TABLE IF EXISTS {table}"))
                .execute(&self.pool)
                .await
                .map_err(shop_error("remove tables"))?;
        }
        self.pool.close().await;
        let Some(file) = file.filter(|_| self.dialect == Dialect::Sqlite) else {
            return Ok(());
        };
        for suffix in ["", "-wal", "-shm"] {
            let mut path = file.as_os_str().to_owned();
            path.push(suffix);
            match std::fs::remove_file(&path) {
                Err(err) if err.kind() != std::io::ErrorKind::NotFound => {
                    return Err(Error::new(
                        distlock::ErrorKind::Backend,
                        format!("cannot remove the shop file {}: {err}", file.display()),
                    ));
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// `text` with its `?` placeholders in this dialect's spelling.
    fn sql<'a>(&self, text: &'a str) -> Cow<'a, str> {
        match self.dialect {
            Dialect::Postgres => {
                let mut out = String::with_capacity(text.len() + 8);
                let mut n = 0;
                for c in text.chars() {
                    if c == '?' {
                        n += 1;
                        out.push_str(&format!("${n}"));
                    } else {
                        out.push(c);
                    }
                }
                Cow::Owned(out)
            }
            Dialect::MySql | Dialect::Sqlite => Cow::Borrowed(text),
        }
    }

    /// Empties the orders and puts `stock` units on the shelf: in the product's row, or
    /// split as evenly as they go over `segments` rows (the first ones a unit more).
    pub async fn restock(&self, stock: u32, segments: u32) -> Result<()> {
        let mut tx = self.pool.begin().await.map_err(shop_error("restock"))?;
        for statement in [
            "DELETE FROM distlock_demo_orders",
            "DELETE FROM distlock_demo_product",
        ] {
            sqlx::query(statement)
                .execute(&mut *tx)
                .await
                .map_err(shop_error("restock"))?;
        }
        let rows = segments.max(1);
        for at in 0..rows {
            let units = stock / rows + u32::from(at < stock % rows);
            sqlx::query(
                &self
                    .sql("INSERT INTO distlock_demo_product (id, stock, version) VALUES (?, ?, 0)"),
            )
            .bind(PRODUCT + i64::from(at))
            .bind(i64::from(units))
            .execute(&mut *tx)
            .await
            .map_err(shop_error("restock"))?;
        }
        tx.commit().await.map_err(shop_error("restock"))
    }

    /// (orders taken, stock left on every row).
    pub async fn tally(&self) -> Result<(i64, i64)> {
        let count = |sql: &'static str| async move {
            sqlx::query(sql)
                .fetch_one(&self.pool)
                .await
                .and_then(|r| r.try_get::<i64, _>(0))
                .map_err(shop_error("tally"))
        };
        let orders = count("SELECT COUNT(*) FROM distlock_demo_orders").await?;
        // SUM is a wider type in PostgreSQL and MySQL: cast back to a 64-bit integer.
        let stock = match self.dialect {
            Dialect::MySql => {
                count("SELECT CAST(COALESCE(SUM(stock), 0) AS SIGNED) FROM distlock_demo_product")
            }
            Dialect::Postgres | Dialect::Sqlite => {
                count("SELECT CAST(COALESCE(SUM(stock), 0) AS BIGINT) FROM distlock_demo_product")
            }
        };
        Ok((orders, stock.await?))
    }

    /// The stock and version of row `id`.
    async fn read(&self, id: i64) -> Result<(i64, i64)> {
        let row =
            sqlx::query(&self.sql("SELECT stock, version FROM distlock_demo_product WHERE id = ?"))
                .bind(id)
                .fetch_one(&self.pool)
                .await
                .map_err(shop_error("read stock"))?;
        stock_and_version(&row)
    }

    /// Writes `stock` back to row `id` and records an order, in one transaction.
    async fn write_back(
        &self,
        id: i64,
        stock: i64,
        strategy: &str,
        token: Option<u64>,
    ) -> Result<()> {
        let mut tx = self.pool.begin().await.map_err(shop_error("sell"))?;
        self.sell_in(&mut tx, id, stock, strategy, token).await?;
        tx.commit().await.map_err(shop_error("sell"))
    }

    /// Sets row `id`'s stock and records an order inside `tx`.
    async fn sell_in(
        &self,
        tx: &mut sqlx::AnyConnection,
        id: i64,
        stock: i64,
        strategy: &str,
        token: Option<u64>,
    ) -> Result<()> {
        sqlx::query(&self.sql("UPDATE distlock_demo_product SET stock = ? WHERE id = ?"))
            .bind(stock)
            .bind(id)
            .execute(&mut *tx)
            .await
            .map_err(shop_error("sell"))?;
        self.record(tx, strategy, token).await
    }

    async fn record(
        &self,
        tx: &mut sqlx::AnyConnection,
        strategy: &str,
        token: Option<u64>,
    ) -> Result<()> {
        sqlx::query(
            &self.sql("INSERT INTO distlock_demo_orders (strategy, fencing_token) VALUES (?, ?)"),
        )
        .bind(strategy.to_owned())
        .bind(token.map(|t| t as i64))
        .execute(&mut *tx)
        .await
        .map_err(shop_error("record order"))?;
        Ok(())
    }

    /// Read, check, work, write back on row `id`.
    pub async fn sell_from(&self, id: i64, strategy: &str, token: Option<u64>) -> Result<Sale> {
        let (stock, _) = self.read(id).await?;
        if stock <= 0 {
            return Ok(Sale::SoldOut);
        }
        tokio::time::sleep(WORK).await;
        self.write_back(id, stock - 1, strategy, token).await?;
        Ok(Sale::Sold)
    }

    /// Compare-and-set on the version column, retrying on conflict. Returns the sale and
    /// how many retries it took.
    pub async fn sell_optimistic(&self) -> Result<(Sale, u64)> {
        let mut retries = 0;
        loop {
            let (stock, version) = self.read(PRODUCT).await?;
            if stock <= 0 {
                return Ok((Sale::SoldOut, retries));
            }
            tokio::time::sleep(WORK).await;
            let mut tx = self.pool.begin().await.map_err(shop_error("sell"))?;
            let changed = sqlx::query(&self.sql(
                "UPDATE distlock_demo_product SET stock = ?, version = version + 1
                 WHERE id = 1 AND version = ?",
            ))
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

    /// The pessimistic row lock: read the product row `FOR UPDATE` inside a transaction, so
    /// every other buyer's read waits until this one commits. SQLite has no row locks; its
    /// `BEGIN IMMEDIATE` (the database's write lock, taken at the start) plays the part.
    pub async fn sell_for_update(&self) -> Result<Sale> {
        let mut conn = self.pool.acquire().await.map_err(shop_error("sell"))?;
        let begin = match self.dialect {
            Dialect::Sqlite => "BEGIN IMMEDIATE",
            Dialect::Postgres | Dialect::MySql => "BEGIN",
        };
        conn.execute(begin).await.map_err(shop_error("sell"))?;
        let sale = self.sell_locked_row(&mut conn).await;
        let end = match sale {
            Ok(Sale::Sold) => "COMMIT",
            _ => "ROLLBACK",
        };
        if let Err(err) = conn.execute(end).await {
            // Never hand a connection with an open transaction back to the pool.
            conn.close_on_drop();
            return Err(shop_error("sell")(err));
        }
        sale
    }

    async fn sell_locked_row(&self, conn: &mut sqlx::AnyConnection) -> Result<Sale> {
        let select = match self.dialect {
            Dialect::Sqlite => "SELECT stock, version FROM distlock_demo_product WHERE id = 1",
            Dialect::Postgres | Dialect::MySql => {
                "SELECT stock, version FROM distlock_demo_product WHERE id = 1 FOR UPDATE"
            }
        };
        let row = sqlx::query(select)
            .fetch_one(&mut *conn)
            .await
            .map_err(shop_error("read stock"))?;
        let (stock, _) = stock_and_version(&row)?;
        if stock <= 0 {
            return Ok(Sale::SoldOut);
        }
        tokio::time::sleep(WORK).await;
        self.sell_in(conn, PRODUCT, stock - 1, "select-for-update", None)
            .await?;
        Ok(Sale::Sold)
    }
}

fn stock_and_version(row: &AnyRow) -> Result<(i64, i64)> {
    Ok((
        row.try_get(0).map_err(shop_error("read stock"))?,
        row.try_get(1).map_err(shop_error("read stock"))?,
    ))
}
