//! A process holding many locks renews them in batches, not one call per lock.

use std::time::Duration;

use distlock_core::{BATCH, Client, Health, LockOptions};
use metrics_util::debugging::{DebugValue, DebuggingRecorder};

#[test]
fn two_thousand_leases_renew_in_batches_of_at_most_a_thousand() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    metrics::with_local_recorder(&recorder, || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
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
    });

    let snapshot = snapshotter.snapshot().into_vec();
    let mut renewals = 0;
    let mut batches = 0;
    let mut largest = 0.0f64;
    for (key, _, _, value) in &snapshot {
        match (key.key().name(), value) {
            ("distlock_renewals_total", DebugValue::Counter(n))
                if key
                    .key()
                    .labels()
                    .any(|l| l.key() == "outcome" && l.value() == "ok") =>
            {
                renewals += n
            }
            ("distlock_renewal_batches_total", DebugValue::Counter(n)) => batches += n,
            ("distlock_renewal_batch_size", DebugValue::Histogram(sizes)) => {
                largest = sizes.iter().map(|s| s.into_inner()).fold(largest, f64::max)
            }
            _ => {}
        }
    }
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
