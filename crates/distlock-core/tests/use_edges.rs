//! Where a program meets the library: connecting outside a Tokio runtime, and releasing a
//! guard whose loss was already told.

use std::sync::Arc;
use std::time::Duration;

use distlock_core::{Client, ErrorKind, LockOptions, MemoryBackend};

#[tokio::test]
async fn a_release_after_lost_fired_is_not_held_though_the_store_still_had_it() {
    let client = Client::with_backend(Arc::new(MemoryBackend::new()));
    let options = LockOptions::new()
        .ttl(Duration::from_millis(300))
        .auto_renew(false);
    let guard = client
        .mutex("lost-then-released")
        .lock_with(&options)
        .await
        .unwrap();
    // The guard's safe deadline comes before the store's expiry: the store still has the
    // grant when lost() fires, and the release deletes it.
    tokio::time::timeout(Duration::from_secs(2), guard.lost())
        .await
        .expect("lost() fires by the safe deadline");
    let err = guard.release().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotHeld, "{err}");
    let next = client.mutex("lost-then-released").try_lock().await.unwrap();
    assert!(next.is_some(), "the release deleted the store's copy");
}

#[test]
fn connecting_outside_a_tokio_runtime_is_invalid_input_naming_tokio() {
    use std::future::Future as _;
    let connect = std::pin::pin!(Client::connect("memory://"));
    let mut context = std::task::Context::from_waker(std::task::Waker::noop());
    let std::task::Poll::Ready(outcome) = connect.poll(&mut context) else {
        panic!("the check answers on the first poll, before any backend is asked");
    };
    let err = outcome.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
    assert!(err.to_string().contains("Tokio"), "{err}");
}
