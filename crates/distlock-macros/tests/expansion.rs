//! What the attributes' expansions do, on the memory backend: the name rendered from the
//! arguments and `self`, the grant handed to the body, `return` and `?` kept, the lock
//! released after success and error, and each `on_busy`, kind and multi-lock.

use std::sync::Arc;
use std::time::{Duration, Instant};

use distlock::{Client, ErrorKind, Held};

struct Order {
    id: u64,
    lines: Vec<&'static str>,
}

impl Order {
    fn customer(&self) -> String {
        format!("c{}", self.id % 10)
    }
}

struct Shipping {
    locks: Arc<Client>,
    region: &'static str,
}

#[derive(Debug, PartialEq)]
enum ShipError {
    Lock(ErrorKind),
    Empty,
}

impl From<distlock::Error> for ShipError {
    fn from(err: distlock::Error) -> Self {
        ShipError::Lock(err.kind())
    }
}

impl Shipping {
    #[distlock::locked(
        client = self.locks,
        name = "ship/{self.region}/{order.id}/{order.customer()}/{order.lines[0]}",
        wait = "2s",
        ttl = "10s",
        held = h
    )]
    async fn ship(&self, order: &Order) -> Result<(String, u64), ShipError> {
        if order.lines.len() > 3 {
            return Err(ShipError::Empty);
        }
        let token = distlock::current_token().expect("a token inside");
        assert_eq!(token, h.fencing_token());
        let name = h.name().to_owned();
        distlock::assert_held(&name)?;
        Ok((name, token))
    }

    #[distlock::locked(client = self.locks, key = order.id * 2, on_busy = "skip")]
    async fn try_ship(&self, order: &Order) -> Result<Option<u64>, ShipError> {
        Ok(order.id)
    }

    #[distlock::locked(client = self.locks, name = "ship/{order.id}", on_busy = "error")]
    async fn ship_now(&self, order: &Order) -> Result<u64, ShipError> {
        Ok(order.id)
    }
}

async fn shipping() -> Shipping {
    Shipping {
        locks: Arc::new(Client::connect("memory://").await.unwrap()),
        region: "eu",
    }
}

fn order(id: u64) -> Order {
    Order {
        id,
        lines: vec!["book"],
    }
}

#[tokio::test]
async fn the_name_is_rendered_from_arguments_fields_calls_and_indexing() {
    let shipping = shipping().await;
    let (name, token) = shipping.ship(&order(42)).await.unwrap();
    assert_eq!(name, "ship/eu/42/c2/book");
    assert!(token > 0);
    // Released after the body: the next call is granted, with a greater token.
    let (_, next) = shipping.ship(&order(42)).await.unwrap();
    assert!(next > token);
    assert_eq!(distlock::current_token(), None, "no token outside the body");
}

#[tokio::test]
async fn return_and_errors_come_back_unchanged_and_release_the_lock() {
    let shipping = shipping().await;
    let mut big = order(7);
    big.lines = vec!["a", "b", "c", "d"];
    assert_eq!(shipping.ship(&big).await, Err(ShipError::Empty));
    let free = shipping
        .locks
        .mutex("ship/eu/7/c7/a")
        .try_lock()
        .await
        .unwrap();
    assert!(free.is_some(), "the lock was released after the error");
}

#[tokio::test]
async fn on_busy_waits_skips_or_fails() {
    let shipping = shipping().await;
    let busy = shipping.locks.mutex("84").lock().await.unwrap();
    assert_eq!(shipping.try_ship(&order(42)).await, Ok(None));
    drop(busy);
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(shipping.try_ship(&order(42)).await, Ok(Some(42)));

    let busy = shipping.locks.mutex("ship/5").lock().await.unwrap();
    assert_eq!(
        shipping.ship_now(&order(5)).await,
        Err(ShipError::Lock(ErrorKind::Timeout))
    );
    busy.release().await.unwrap();
    assert_eq!(shipping.ship_now(&order(5)).await, Ok(5));

    let held = shipping
        .locks
        .mutex("ship/eu/9/c9/book")
        .lock()
        .await
        .unwrap();
    let started = Instant::now();
    let waited = tokio::time::timeout(Duration::from_secs(5), shipping.ship(&order(9))).await;
    assert_eq!(
        waited.unwrap().unwrap_err(),
        ShipError::Lock(ErrorKind::Timeout)
    );
    assert!(
        started.elapsed() >= Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    held.release().await.unwrap();
}

#[distlock::locked(client = locks, names = ["accounts/{from}", "accounts/{to}"], held = all)]
async fn transfer(locks: &Client, from: u32, to: u32) -> distlock::Result<Vec<String>> {
    for name in [format!("accounts/{from}"), format!("accounts/{to}")] {
        assert!(
            locks.mutex(name).try_lock().await?.is_none(),
            "held by the transfer"
        );
    }
    Ok(all.iter().map(|h: &Held| h.name().to_owned()).collect())
}

#[tokio::test]
async fn names_take_every_lock_at_once() {
    let locks = Client::connect("memory://").await.unwrap();
    let mut names = transfer(&locks, 2, 1).await.unwrap();
    names.sort();
    assert_eq!(names, ["accounts/1", "accounts/2"]);
}

#[distlock::read_locked(client = locks, name = "schema/{table}", on_busy = "skip")]
async fn read_schema(locks: &Client, table: &str) -> distlock::Result<Option<usize>> {
    Ok(table.len())
}

#[distlock::write_locked(client = locks, name = "schema/{table}", held = h)]
async fn migrate(locks: &Client, table: &str) -> distlock::Result<u64> {
    assert!(
        locks
            .rwlock(format!("schema/{table}"))
            .try_read()
            .await?
            .is_none()
    );
    Ok(h.fencing_token())
}

#[distlock::permits(client = locks, name = "gpus/{pool}", n = 3, take = 2, on_busy = "skip")]
async fn train(locks: &Client, pool: &str) -> distlock::Result<Option<()>> {
    Ok(())
}

#[tokio::test]
async fn readers_writers_and_permits() {
    let locks = Client::connect("memory://").await.unwrap();
    assert_eq!(read_schema(&locks, "users").await.unwrap(), Some(5));
    assert!(migrate(&locks, "users").await.unwrap() > 0);
    let writing = locks.rwlock("schema/users").write().await.unwrap();
    assert_eq!(read_schema(&locks, "users").await.unwrap(), None);
    drop(writing);

    assert_eq!(train(&locks, "a100").await.unwrap(), Some(()));
    let two = locks
        .semaphore("gpus/a100", 3)
        .acquire_many(2)
        .await
        .unwrap();
    assert_eq!(train(&locks, "a100").await.unwrap(), None, "2 + 2 > 3");
    two.release().await.unwrap();
}

#[distlock::locked(client = locks, name = "jobs/{job}")]
async fn run_job(locks: &Client, job: &str) -> distlock::Result<()> {
    Ok(())
}

#[tokio::test]
async fn a_rendered_name_the_store_refuses_is_bad_input() {
    let locks = Client::connect("memory://").await.unwrap();
    let err = run_job(&locks, "a\nb").await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
    let long = "x".repeat(distlock::MAX_NAME_LEN + 1);
    let err = run_job(&locks, &long).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
}

#[distlock::job(client = locks, name = "jobs/{region}", at_least = "800ms", at_most = "1s", held = h)]
async fn invoices(
    locks: &Client,
    region: &str,
    work: Duration,
) -> Result<distlock::JobOutcome<u64>, ShipError> {
    if work.is_zero() {
        return Err(ShipError::Empty);
    }
    tokio::time::sleep(work).await;
    Ok(h.fencing_token())
}

#[tokio::test]
async fn a_job_runs_once_within_at_least_and_is_cut_off_at_at_most() {
    let locks = Client::connect("memory://").await.unwrap();
    let ran = invoices(&locks, "eu", Duration::from_millis(1))
        .await
        .unwrap();
    assert!(matches!(ran, distlock::JobOutcome::Ran(token) if token > 0));
    let again = invoices(&locks, "eu", Duration::from_millis(1))
        .await
        .unwrap();
    assert_eq!(again.as_str(), "busy", "at_least keeps the name");
    assert_eq!(
        invoices(&locks, "us", Duration::ZERO).await,
        Err(ShipError::Empty),
        "the body's error comes back"
    );
    let started = Instant::now();
    let cut = invoices(&locks, "asia", Duration::from_secs(30)).await;
    assert_eq!(cut, Err(ShipError::Lock(ErrorKind::Timeout)));
    assert!(started.elapsed() < Duration::from_secs(10));
}

#[distlock::job(client = locks, name = "jobs/hourly", once_per = "1h")]
async fn hourly(locks: &Client) -> Result<distlock::JobOutcome<()>, ShipError> {
    Ok(())
}

#[tokio::test]
async fn a_job_with_once_per_is_too_soon_after_a_success() {
    let locks = Client::connect("memory://").await.unwrap();
    assert_eq!(hourly(&locks).await.unwrap().as_str(), "ran");
    assert_eq!(hourly(&locks).await.unwrap().as_str(), "too_soon");
}
