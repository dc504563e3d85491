//! A shop in Redis, as the documents keep stock for a sale: the product's stock preloaded
//! as a key (or, for the segmented strategy, split over several keys) and the orders as a
//! list. Beside the strategies every shop has, Redis sells with `DECR` (a result below zero
//! is given back with `INCR` and counts as sold out) and with one Lua script that checks
//! and decrements; its optimistic strategy is `WATCH`/`MULTI`.

use std::time::Duration;

use distlock::{Error, ErrorKind, Result};
use redis::AsyncCommands;
use redis::aio::MultiplexedConnection;

use super::{PRODUCT, Sale, WORK};

/// The key of the stock on row `row` (the product's, or a segment's).
fn stock_key(row: i64) -> String {
    format!("distlock:demo:stock:{row}")
}

/// How many stock keys the last restock made.
const ROWS: &str = "distlock:demo:rows";

/// The orders, one entry each: the strategy and the fencing token, if any.
const ORDERS: &str = "distlock:demo:orders";

/// How long connecting, and each command, may take.
const CALL_BOUND: Duration = Duration::from_secs(10);

/// Checks the stock at `KEYS[1]`, takes a unit and records the order in `KEYS[2]`: 1 when
/// sold, 0 when sold out.
const SELL_SCRIPT: &str = r"
local stock = tonumber(redis.call('GET', KEYS[1]) or '0')
if stock <= 0 then
  return 0
end
redis.call('DECR', KEYS[1])
redis.call('RPUSH', KEYS[2], ARGV[1])
return 1
";

#[derive(Clone)]
pub struct RedisShop {
    /// Where it is, its password hidden, for messages.
    shown: String,
    client: redis::Client,
    connection: MultiplexedConnection,
    script: redis::Script,
    /// Connections of their own for `WATCH` (a connection's), each used by one sale at a
    /// time and kept for the next, so a sale does not connect.
    watching: std::sync::Arc<std::sync::Mutex<Vec<MultiplexedConnection>>>,
}

impl std::fmt::Debug for RedisShop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisShop").finish_non_exhaustive()
    }
}

/// A failed command of `what`.
fn shop_error(what: &'static str) -> impl Fn(redis::RedisError) -> Error {
    move |e| Error::new(ErrorKind::Unavailable, format!("shop in Redis: {what}")).with_source(e)
}

impl RedisShop {
    /// Connects to the shop at `location` (`redis://…` or `rediss://…`, one server).
    pub async fn open(location: &str) -> Result<RedisShop> {
        let client = redis::Client::open(location).map_err(|e| {
            Error::invalid(format!(
                "bad shop URL {}: {e}",
                distlock::redact_url(location)
            ))
        })?;
        let shown = distlock::redact_url(location);
        let connection = connect(&client, &shown).await?;
        Ok(RedisShop {
            shown,
            client,
            connection,
            script: redis::Script::new(SELL_SCRIPT),
            watching: std::sync::Arc::default(),
        })
    }

    fn connection(&self) -> MultiplexedConnection {
        self.connection.clone()
    }

    /// Empties the orders and puts `stock` units on the shelf: in the product's key, or
    /// split as evenly as they go over `segments` keys (the first ones a unit more).
    pub async fn restock(&self, stock: u32, segments: u32) -> Result<()> {
        self.clear().await?;
        let rows = segments.max(1);
        let mut pipe = redis::pipe();
        pipe.atomic();
        for at in 0..rows {
            let units = stock / rows + u32::from(at < stock % rows);
            pipe.set(stock_key(PRODUCT + i64::from(at)), units).ignore();
        }
        pipe.set(ROWS, rows).ignore();
        let mut connection = self.connection();
        pipe.query_async::<()>(&mut connection)
            .await
            .map_err(shop_error("restock"))
    }

    /// Deletes the stock keys of the last restock and the orders.
    async fn clear(&self) -> Result<()> {
        let mut connection = self.connection();
        let rows: Option<i64> = connection.get(ROWS).await.map_err(shop_error("restock"))?;
        let mut keys: Vec<String> = (0..rows.unwrap_or(0).max(1))
            .map(|at| stock_key(PRODUCT + at))
            .collect();
        keys.extend([ROWS.to_owned(), ORDERS.to_owned()]);
        connection
            .del::<_, ()>(keys)
            .await
            .map_err(shop_error("restock"))
    }

    /// (orders taken, stock left on every key).
    pub async fn tally(&self) -> Result<(i64, i64)> {
        let mut connection = self.connection();
        let rows: Option<i64> = connection.get(ROWS).await.map_err(shop_error("tally"))?;
        let orders: i64 = connection.llen(ORDERS).await.map_err(shop_error("tally"))?;
        let mut stock = 0;
        for at in 0..rows.unwrap_or(0) {
            let left: Option<i64> = connection
                .get(stock_key(PRODUCT + at))
                .await
                .map_err(shop_error("tally"))?;
            stock += left.unwrap_or(0);
        }
        Ok((orders, stock))
    }

    /// Deletes the shop's keys and closes it.
    pub async fn remove(self) -> Result<()> {
        self.clear().await
    }

    /// Read, check, work, write back on key `row`: correct alone, oversells under
    /// concurrency.
    pub async fn sell_from(&self, row: i64, strategy: &str, token: Option<u64>) -> Result<Sale> {
        let mut connection = self.connection();
        let stock: Option<i64> = connection
            .get(stock_key(row))
            .await
            .map_err(shop_error("read stock"))?;
        let stock = stock.unwrap_or(0);
        if stock <= 0 {
            return Ok(Sale::SoldOut);
        }
        tokio::time::sleep(WORK).await;
        redis::pipe()
            .atomic()
            .set(stock_key(row), stock - 1)
            .ignore()
            .rpush(ORDERS, order(strategy, token))
            .ignore()
            .query_async::<()>(&mut connection)
            .await
            .map_err(shop_error("sell"))?;
        Ok(Sale::Sold)
    }

    /// `WATCH` the stock, read and check it, work, then write it back in a `MULTI` that
    /// fails if the stock changed meanwhile; again until it goes through. On a connection
    /// of its own, as `WATCH` is a connection's. Returns the sale and how many retries it
    /// took.
    pub async fn sell_optimistic(&self) -> Result<(Sale, u64)> {
        let kept = self
            .watching
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .pop();
        let mut connection = match kept {
            Some(connection) => connection,
            None => connect(&self.client, &self.shown).await?,
        };
        let sold = self.watched_sale(&mut connection).await;
        // A connection that failed halfway may still watch: it is not kept.
        if sold.is_ok() {
            let mut kept = self.watching.lock().unwrap_or_else(|p| p.into_inner());
            kept.push(connection);
        }
        sold
    }

    /// [`sell_optimistic`](Self::sell_optimistic) on `connection`, which no other sale uses
    /// meanwhile.
    async fn watched_sale(&self, connection: &mut MultiplexedConnection) -> Result<(Sale, u64)> {
        let key = stock_key(PRODUCT);
        let mut retries = 0;
        loop {
            redis::cmd("WATCH")
                .arg(&key)
                .exec_async(connection)
                .await
                .map_err(shop_error("sell"))?;
            let stock: Option<i64> = connection.get(&key).await.map_err(shop_error("sell"))?;
            let stock = stock.unwrap_or(0);
            if stock <= 0 {
                redis::cmd("UNWATCH")
                    .exec_async(connection)
                    .await
                    .map_err(shop_error("sell"))?;
                return Ok((Sale::SoldOut, retries));
            }
            tokio::time::sleep(WORK).await;
            let done: Option<()> = redis::pipe()
                .atomic()
                .set(&key, stock - 1)
                .ignore()
                .rpush(ORDERS, order("optimistic", None))
                .ignore()
                .query_async(connection)
                .await
                .map_err(shop_error("sell"))?;
            if done.is_some() {
                return Ok((Sale::Sold, retries));
            }
            retries += 1;
        }
    }

    /// `DECR` first, check after: a result below zero was no unit, and is given back with
    /// `INCR`. Then the payment, and the order.
    pub async fn sell_decr(&self) -> Result<Sale> {
        let mut connection = self.connection();
        let key = stock_key(PRODUCT);
        let left: i64 = connection.decr(&key, 1).await.map_err(shop_error("sell"))?;
        if left < 0 {
            connection
                .incr::<_, _, ()>(&key, 1)
                .await
                .map_err(shop_error("sell"))?;
            return Ok(Sale::SoldOut);
        }
        tokio::time::sleep(WORK).await;
        connection
            .rpush::<_, _, ()>(ORDERS, order("redis-decr", None))
            .await
            .map_err(shop_error("record order"))?;
        Ok(Sale::Sold)
    }

    /// One script checks the stock, takes a unit and records the order, atomically; then
    /// the payment.
    pub async fn sell_script(&self) -> Result<Sale> {
        let mut connection = self.connection();
        let sold: i64 = self
            .script
            .key(stock_key(PRODUCT))
            .key(ORDERS)
            .arg(order("atomic-script", None))
            .invoke_async(&mut connection)
            .await
            .map_err(shop_error("sell"))?;
        if sold == 0 {
            return Ok(Sale::SoldOut);
        }
        tokio::time::sleep(WORK).await;
        Ok(Sale::Sold)
    }
}

/// An order's entry: its strategy, and its fencing token after a colon.
fn order(strategy: &str, token: Option<u64>) -> String {
    match token {
        Some(token) => format!("{strategy}:{token}"),
        None => strategy.to_owned(),
    }
}

/// A connection of its own to the shop (at `shown`, its place without the password, for
/// messages), bounded in time.
async fn connect(client: &redis::Client, shown: &str) -> Result<MultiplexedConnection> {
    let config = redis::AsyncConnectionConfig::new()
        .set_connection_timeout(Some(CALL_BOUND))
        .set_response_timeout(Some(CALL_BOUND));
    client
        .get_multiplexed_async_connection_with_config(&config)
        .await
        .map_err(|e| {
            let err = distlock::redis::connect_error(e);
            Error::new(err.kind(), format!("cannot open the shop at {shown}")).with_source(err)
        })
}
