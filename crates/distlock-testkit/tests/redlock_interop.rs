//! distlock's RedLock and rslock (another RedLock client, from crates.io) contend on the
//! same key over the same three real masters: a counter updated non-atomically inside the
//! critical section, and a flag that says someone is inside, prove they exclude each other.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime};

use distlock::LockOptions;
use distlock_testkit::Server;

const ROUNDS: u64 = 40;

/// Three Redis masters, distlock's RedLock URL for them, and rslock's.
fn three_masters() -> (Vec<Server>, String, Vec<String>) {
    let masters: Vec<Server> = (0..3)
        .map(|_| distlock_testkit::redis_server().unwrap_or_else(|e| panic!("{e}")))
        .collect();
    let hosts: Vec<String> = masters.iter().map(|s| s.addr().to_string()).collect();
    let url = format!("redlock://{}/0", hosts.join(","));
    let uris = hosts.iter().map(|h| format!("redis://{h}/0")).collect();
    (masters, url, uris)
}

/// One critical section: nobody else inside, and a read-pause-write of the counter.
async fn critical_section(inside: &AtomicBool, counter: &AtomicU64, who: &str) {
    assert!(
        !inside.swap(true, Ordering::SeqCst),
        "{who} entered while the other client was inside"
    );
    let seen = counter.load(Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(2)).await;
    counter.store(seen + 1, Ordering::SeqCst);
    inside.store(false, Ordering::SeqCst);
}

#[test]
fn distlock_and_rslock_exclude_each_other_on_one_key() {
    distlock_testkit::block_on(async {
        let (_masters, url, uris) = three_masters();
        let inside = Arc::new(AtomicBool::new(false));
        let counter = Arc::new(AtomicU64::new(0));
        let deadline = Instant::now() + Duration::from_secs(60);
        // Both start their rounds together, so their critical sections contend.
        let start = Arc::new(tokio::sync::Barrier::new(2));

        let ours = {
            let (inside, counter) = (inside.clone(), counter.clone());
            let client = distlock::Client::connect(&url).await.unwrap();
            let start = start.clone();
            tokio::spawn(async move {
                let options = LockOptions::new()
                    .ttl(Duration::from_secs(2))
                    .wait(Duration::from_secs(30));
                start.wait().await;
                let began = Instant::now();
                for _ in 0..ROUNDS {
                    let guard = client.mutex("shared").lock_with(&options).await.unwrap();
                    critical_section(&inside, &counter, "distlock").await;
                    guard.release().await.unwrap();
                }
                (began, Instant::now())
            })
        };
        let theirs = {
            let (inside, counter) = (inside.clone(), counter.clone());
            let start = start.clone();
            tokio::spawn(async move {
                let manager = rslock::LockManager::new(uris);
                // Connects to the masters. The TTL leaves room for a slow first round trip:
                // rslock gives up on a grant whose validity the round trips used up, and
                // a warm-up that failed would leave the other side at the barrier.
                let warm = manager
                    .lock("warm-up", Duration::from_secs(5))
                    .await
                    .expect("rslock reaches the masters");
                manager.unlock(&warm).await;
                start.wait().await;
                let began = Instant::now();
                for _ in 0..ROUNDS {
                    let lock = loop {
                        assert!(Instant::now() < deadline, "rslock never got the lock");
                        match manager.lock("shared", Duration::from_secs(2)).await {
                            Ok(lock) => break lock,
                            Err(_) => tokio::time::sleep(Duration::from_millis(1)).await,
                        }
                    };
                    critical_section(&inside, &counter, "rslock").await;
                    manager.unlock(&lock).await;
                }
                (began, Instant::now())
            })
        };
        // Either side's panic ends the test at once: the other may wait at the barrier.
        let (ours, theirs) = tokio::try_join!(ours, theirs)
            .unwrap_or_else(|failed| std::panic::resume_unwind(failed.into_panic()));
        let overlap = ours
            .1
            .min(theirs.1)
            .saturating_duration_since(ours.0.max(theirs.0));
        let shorter = (ours.1 - ours.0).min(theirs.1 - theirs.0);
        assert!(
            overlap >= shorter / 2,
            "the two clients ran mostly one after the other ({overlap:?} of {shorter:?} together)"
        );
        assert_eq!(
            counter.load(Ordering::SeqCst),
            2 * ROUNDS,
            "an update was lost"
        );
    });
}

/// rslock's clients, retrying every millisecond, release without a word to distlock's
/// waiters: two distlock RedLock processes on the same key over the same masters, polling a
/// foreign holder's lock from a millisecond up, get at least a third of their fair share
/// together (each at least a quarter of its own), and nobody overlaps: a file that exists
/// while someone holds the key is made by each holder, and must not be there already.
#[test]
fn distlock_gets_its_share_of_a_key_rslock_clients_hammer() {
    const OURS: usize = 2;
    const THEIRS: usize = 2;
    const FOR: Duration = Duration::from_secs(5);
    let (_masters, url, uris) = three_masters();
    let dir = tempfile::tempdir().unwrap();
    let inside = dir.path().join("inside");
    // Every side starts together, once all are connected.
    let start = SystemTime::now() + Duration::from_secs(2);
    let window = (start, start + FOR);
    let theirs = std::thread::spawn({
        let inside = inside.clone();
        move || distlock_testkit::block_on(rslock_rounds(uris, THEIRS, window, inside))
    });
    let ours = distlock_testkit::share_from_processes(
        "share_child",
        (&url, "hammered"),
        OURS,
        window,
        &inside,
    );
    let theirs = theirs.join().expect("the rslock side finishes");
    distlock_testkit::assert_fair_share(&ours, &theirs, "rslock");
}

/// `clients` rslock clients taking the key `hammered` from the start to the end of
/// `window` (wall clock), marking each round by the file `inside`: the rounds each held it.
async fn rslock_rounds(
    uris: Vec<String>,
    clients: usize,
    (start, end): (SystemTime, SystemTime),
    inside: std::path::PathBuf,
) -> Vec<u64> {
    let mut tasks = Vec::new();
    for at in 0..clients {
        let (uris, inside) = (uris.clone(), inside.clone());
        tasks.push(tokio::spawn(async move {
            let mut manager = rslock::LockManager::new(uris);
            manager
                .lock(format!("warm-up-{at}").as_str(), Duration::from_secs(1))
                .await
                .unwrap();
            manager.set_retry(1, Duration::from_millis(1));
            let wait = start.duration_since(SystemTime::now()).unwrap_or_default();
            tokio::time::sleep(wait).await;
            let mut rounds = 0_u64;
            while SystemTime::now() < end {
                let Ok(lock) = manager.lock("hammered", Duration::from_secs(2)).await else {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                    continue;
                };
                std::fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .open(&inside)
                    .expect("nobody else is inside");
                tokio::time::sleep(Duration::from_millis(1)).await;
                std::fs::remove_file(&inside).unwrap();
                manager.unlock(&lock).await;
                rounds += 1;
            }
            rounds
        }));
    }
    let mut rounds = Vec::new();
    for task in tasks {
        let finished = tokio::time::timeout(Duration::from_secs(60), task).await;
        rounds.push(finished.expect("every rslock client finishes").unwrap());
    }
    rounds
}

#[test]
#[ignore = "runs only as a helper process of the share tests"]
fn share_child() {
    distlock_testkit::run_child();
}
