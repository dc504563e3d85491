//! The lock template: `with_lock` and its kin run a closure under a grant and release it
//! after, whatever the closure did.

use std::sync::{Arc, Mutex as StdMutex};
use std::time::{Duration, Instant};

use distlock::{Error, ErrorKind, Held, LockOptions, OnLost};

use super::{Target, eventually, unique};

/// An error of the caller's own, which the template must hand back unchanged.
#[derive(Debug, PartialEq)]
enum ShipError {
    OutOfStock,
    Lock(ErrorKind),
}

impl From<Error> for ShipError {
    fn from(err: Error) -> Self {
        ShipError::Lock(err.kind())
    }
}

/// Whether lock `name` is free now, by another client's try.
async fn free(other: &distlock::Client, name: &str) -> bool {
    match other.mutex(name).try_lock().await {
        Ok(Some(guard)) => {
            guard.release().await.unwrap();
            true
        }
        _ => false,
    }
}

/// The template releases its grant after its closure succeeded, failed (the error back
/// unchanged), panicked (the panic goes on once the grant is released) or was dropped, and
/// holds it while the closure runs; a multi-lock's holds every name; a busy lock's `try_`
/// form runs nothing.
///
/// # Examples
///
/// ```
/// # distlock_testkit::block_on(async {
/// distlock_testkit::conformance::template_releases_after_success_error_panic_and_drop(&distlock_testkit::Target::new("memory://doc")).await;
/// # });
/// ```
pub async fn template_releases_after_success_error_panic_and_drop(target: &Target) {
    let name = unique("template");
    let (client, other) = (target.client().await, target.client().await);
    let mutex = client.mutex(&name);

    let inside = mutex
        .with_lock(async |held: &Held| {
            assert_eq!(held.name(), name);
            Ok::<_, ShipError>(free(&other, &name).await)
        })
        .await;
    assert_eq!(inside, Ok(false), "held while the closure runs");
    assert!(free(&other, &name).await, "released after success");

    let failed = mutex
        .with_lock(async |_: &Held| Err::<(), _>(ShipError::OutOfStock))
        .await;
    assert_eq!(
        failed,
        Err(ShipError::OutOfStock),
        "the error comes back unchanged"
    );
    assert!(free(&other, &name).await, "released after an error");

    let panicking = {
        let mutex = mutex.clone();
        tokio::spawn(async move {
            mutex
                .with_lock(async |_: &Held| -> Result<(), Error> { panic!("the closure panics") })
                .await
        })
    };
    let joined = panicking.await;
    assert!(joined.unwrap_err().is_panic(), "the panic goes on");
    assert!(
        free(&other, &name).await,
        "released before the panic went on"
    );

    let (entered_tx, entered) = tokio::sync::oneshot::channel();
    let stuck = {
        let mutex = mutex.clone();
        tokio::spawn(async move {
            mutex
                .with_lock(async |_: &Held| {
                    let _ = entered_tx.send(());
                    std::future::pending::<Result<(), Error>>().await
                })
                .await
        })
    };
    entered.await.unwrap();
    stuck.abort();
    let _ = stuck.await;
    assert!(
        eventually(Duration::from_secs(5), || free(&other, &name)).await,
        "released after the closure was dropped"
    );

    let second = unique("template-second");
    let both = client
        .multi_lock([name.as_str(), second.as_str()])
        .with_all(async |held: &[Held]| {
            let (first, other_free) = (free(&other, &name).await, free(&other, &second).await);
            Ok::<_, Error>((held.len(), first || other_free))
        })
        .await
        .unwrap();
    assert_eq!(both, (2, false), "every name held while the closure runs");
    assert!(free(&other, &name).await && free(&other, &second).await);

    let busy = mutex.clone().lock().await.unwrap();
    let skipped = client
        .mutex(&name)
        .try_with_lock(async |_: &Held| Ok::<_, Error>(()))
        .await
        .unwrap();
    assert_eq!(skipped, None, "a busy lock runs nothing");
    busy.release().await.unwrap();
}

/// A lease lost while the closure runs: with `OnLost::Cancel` (the default) the closure is
/// dropped within 100 ms of the loss and the call returns `LockLost`; with
/// `OnLost::Signal` it runs on, sees the loss, and its result comes back. The loss is a
/// holder that stops renewing (its TTL runs out as a paused holder's would).
///
/// # Examples
///
/// ```
/// # distlock_testkit::block_on(async {
/// distlock_testkit::conformance::template_cancels_or_signals_on_loss(&distlock_testkit::Target::new("memory://doc")).await;
/// # });
/// ```
pub async fn template_cancels_or_signals_on_loss(target: &Target) {
    let name = unique("template-lost");
    let client = target.client().await;
    let unrenewed = LockOptions::new()
        .ttl(Duration::from_secs(1))
        .auto_renew(false)
        .max_hold(Duration::from_secs(1));

    /// Notes when it is dropped.
    struct Dropped(Arc<StdMutex<Option<Instant>>>);
    impl Drop for Dropped {
        fn drop(&mut self) {
            *self.0.lock().unwrap() = Some(Instant::now());
        }
    }
    let lost_at = Arc::new(StdMutex::new(None));
    let dropped_at = Arc::new(StdMutex::new(None));
    let cancelled = client
        .mutex(&name)
        .with_options(unrenewed.clone())
        .with_lock(async |held: &Held| {
            let _marker = Dropped(dropped_at.clone());
            let (lost, lost_at) = (held.lost(), lost_at.clone());
            tokio::spawn(async move {
                lost.await;
                *lost_at.lock().unwrap() = Some(Instant::now());
            });
            tokio::time::sleep(Duration::from_secs(30)).await;
            Ok::<_, Error>("ran to the end")
        })
        .await;
    assert_eq!(cancelled.unwrap_err().kind(), ErrorKind::LockLost);
    let dropped = dropped_at.lock().unwrap().expect("the closure was dropped");
    let settled = eventually(Duration::from_secs(1), || async {
        lost_at.lock().unwrap().is_some()
    });
    assert!(settled.await, "the loss was seen");
    let lost = lost_at.lock().unwrap().unwrap();
    let late = dropped.saturating_duration_since(lost);
    assert!(
        late < Duration::from_millis(100),
        "dropped {late:?} after the loss"
    );

    let signalled = client
        .mutex(&name)
        .with_options(unrenewed.on_lost(OnLost::Signal))
        .with_lock(async |held: &Held| {
            tokio::time::timeout(Duration::from_secs(10), held.lost())
                .await
                .expect("the lease is lost");
            Ok::<_, Error>(held.health())
        })
        .await;
    assert_eq!(
        signalled.unwrap(),
        distlock::Health::Lost,
        "ran on past the loss"
    );
}

/// Code deep inside the closure learns the token it runs under, and whether it runs under
/// a given lock, nested templates included; outside, it runs under none.
///
/// # Examples
///
/// ```
/// # distlock_testkit::block_on(async {
/// distlock_testkit::conformance::template_tells_deep_code_its_token(&distlock_testkit::Target::new("memory://doc")).await;
/// # });
/// ```
pub async fn template_tells_deep_code_its_token(target: &Target) {
    let (outer, inner) = (unique("template-outer"), unique("template-inner"));
    let client = target.client().await;
    assert_eq!(distlock::current_token(), None);
    assert_eq!(
        distlock::assert_held(&outer).unwrap_err().kind(),
        ErrorKind::NotHeld
    );
    client
        .with_lock(&outer, async |held: &Held| {
            let outer_token = held.fencing_token();
            assert_eq!(distlock::current_token(), Some(outer_token));
            client
                .with_lock(&inner, async |nested: &Held| {
                    assert_eq!(distlock::current_token(), Some(nested.fencing_token()));
                    assert_eq!(distlock::assert_held(&outer).unwrap(), outer_token);
                    assert!(distlock::assert_held(&inner).is_ok());
                    Ok::<_, Error>(())
                })
                .await?;
            assert_eq!(distlock::current_token(), Some(outer_token));
            assert!(distlock::assert_held(&inner).is_err());
            Ok::<_, Error>(())
        })
        .await
        .unwrap();
    assert_eq!(distlock::current_token(), None);
}
