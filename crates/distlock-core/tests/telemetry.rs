//! The metrics every backend reports, recorded for real through a debugging recorder.

use std::time::Duration;

use distlock_core::{Client, LockOptions};
use metrics_util::debugging::{DebugValue, DebuggingRecorder};

#[test]
fn grants_busy_answers_renewals_holds_and_losses_are_recorded() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    metrics::with_local_recorder(&recorder, || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let client = Client::connect("memory://telemetry").await.unwrap();
            let renewing = LockOptions::new()
                .ttl(Duration::from_millis(150))
                .renew_every(Duration::from_millis(20));
            let guard = client.mutex("m").lock_with(&renewing).await.unwrap();
            tokio::time::sleep(Duration::from_millis(100)).await;
            assert!(client.mutex("m").try_lock().await.unwrap().is_none());
            guard.release().await.unwrap();

            let lapsing = LockOptions::new()
                .ttl(Duration::from_millis(50))
                .auto_renew(false);
            let guard = client.mutex("m").lock_with(&lapsing).await.unwrap();
            tokio::time::timeout(Duration::from_secs(2), guard.lost())
                .await
                .unwrap();
        });
    });

    let snapshot = snapshotter.snapshot().into_vec();
    let count = |name: &str, label: Option<(&str, &str)>| -> u64 {
        snapshot
            .iter()
            .filter(|(key, ..)| key.key().name() == name)
            .filter(|(key, ..)| {
                label
                    .is_none_or(|(k, v)| key.key().labels().any(|l| l.key() == k && l.value() == v))
            })
            .filter(|(key, ..)| {
                key.key()
                    .labels()
                    .any(|l| l.key() == "backend" && l.value() == "memory")
            })
            .map(|(.., value)| match value {
                DebugValue::Counter(n) => *n,
                DebugValue::Histogram(samples) => samples.len() as u64,
                DebugValue::Gauge(_) => 0,
            })
            .sum()
    };
    assert_eq!(
        count("distlock_acquire_total", Some(("outcome", "granted"))),
        2
    );
    assert_eq!(
        count("distlock_acquire_total", Some(("outcome", "busy"))),
        1
    );
    assert_eq!(count("distlock_acquire_wait_seconds", None), 3);
    assert!(count("distlock_renewals_total", Some(("outcome", "ok"))) >= 2);
    assert_eq!(
        count("distlock_hold_seconds", None),
        2,
        "a released hold and a dropped one"
    );
    assert_eq!(count("distlock_leases_lost_total", None), 1);
}
