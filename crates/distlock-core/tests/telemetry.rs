//! The metrics every backend reports, recorded for real through a debugging recorder.

use std::future::Future;
use std::time::Duration;

use distlock_core::backend::BATCH;
use distlock_core::{Client, Health, LockOptions};
use metrics_util::debugging::{DebugValue, DebuggingRecorder};

/// One recorded series: its name, labels and value.
type Series = (String, Vec<(String, String)>, DebugValue);

/// Every metric recorded while `body` runs on a single-threaded runtime.
fn recorded(body: impl Future<Output = ()>) -> Vec<Series> {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    metrics::with_local_recorder(&recorder, || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(body)
    });
    snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .map(|(key, _, _, value)| {
            let labels = key
                .key()
                .labels()
                .map(|l| (l.key().to_owned(), l.value().to_owned()))
                .collect();
            (key.key().name().to_owned(), labels, value)
        })
        .collect()
}

/// The sum of counters (or count of histogram samples) named `name` whose labels include
/// `label`, if given.
fn count(metrics: &[Series], name: &str, label: Option<(&str, &str)>) -> u64 {
    metrics
        .iter()
        .filter(|(n, labels, _)| {
            n == name && label.is_none_or(|(k, v)| labels.iter().any(|(lk, lv)| lk == k && lv == v))
        })
        .map(|(.., value)| match value {
            DebugValue::Counter(n) => *n,
            DebugValue::Histogram(samples) => samples.len() as u64,
            DebugValue::Gauge(_) => 0,
        })
        .sum()
}

#[test]
fn grants_busy_answers_renewals_holds_and_losses_are_recorded() {
    let metrics = recorded(async {
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
    let granted = Some(("outcome", "granted"));
    assert_eq!(count(&metrics, "distlock_acquire_total", granted), 2);
    assert_eq!(
        count(
            &metrics,
            "distlock_acquire_total",
            Some(("outcome", "busy"))
        ),
        1
    );
    assert_eq!(count(&metrics, "distlock_acquire_wait_seconds", None), 3);
    assert!(count(&metrics, "distlock_renewals_total", Some(("outcome", "ok"))) >= 2);
    assert_eq!(
        count(&metrics, "distlock_hold_seconds", None),
        2,
        "a released hold and a dropped one"
    );
    assert_eq!(count(&metrics, "distlock_leases_lost_total", None), 1);
    assert!(
        metrics
            .iter()
            .all(|(_, labels, _)| labels.iter().any(|(k, v)| k == "backend" && v == "memory")),
        "every series names its backend"
    );
}

#[test]
fn two_thousand_leases_renew_in_batches_of_at_most_a_thousand() {
    let metrics = recorded(async {
        let client = Client::connect("memory://batches").await.unwrap();
        let options = LockOptions::new()
            .ttl(Duration::from_millis(900))
            .renew_every(Duration::from_millis(300));
        let mut guards = Vec::new();
        for i in 0..2000 {
            let guard = client
                .mutex(format!("lock-{i}"))
                .lock_with(&options)
                .await
                .unwrap();
            guards.push(guard);
        }
        tokio::time::sleep(Duration::from_millis(1500)).await;
        assert!(guards.iter().all(|g| g.health() == Health::Held));
    });
    let renewals = count(&metrics, "distlock_renewals_total", Some(("outcome", "ok")));
    let batches = count(&metrics, "distlock_renewal_batches_total", None);
    let largest = metrics
        .iter()
        .filter(|(name, ..)| name == "distlock_renewal_batch_size")
        .filter_map(|(.., value)| match value {
            DebugValue::Histogram(sizes) => sizes.iter().map(|s| s.into_inner()).reduce(f64::max),
            _ => None,
        })
        .fold(0.0, f64::max);
    assert!(
        renewals >= 2000 * 3,
        "every lease kept renewing: {renewals}"
    );
    assert!(largest <= BATCH as f64, "a batch of {largest}");
    assert!(
        batches * 200 <= renewals,
        "{renewals} renewals took {batches} backend calls"
    );
}
