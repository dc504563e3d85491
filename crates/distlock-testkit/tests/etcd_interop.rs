//! distlock and etcd's own mutex (`etcdctl lock`, from Debian's `etcd-client`) share locks:
//! they exclude each other both ways, and `status` shows etcdctl's holder.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The critical section both sides run, as shell for etcdctl's child: note a violation if
/// someone is inside, go inside, bump the non-atomic counter slowly, come out.
const SECTION: &str = "cd \"$1\"; [ -e inside ] && echo x >> violations; touch inside; \
     n=$(cat counter); sleep 0.02; echo $((n + 1)) > counter; echo etcdctl >> log; rm inside";

/// The same critical section, in the test process, for a distlock holder.
async fn section(dir: &Path) {
    if dir.join("inside").exists() {
        std::fs::write(dir.join("violations"), "x").unwrap();
    }
    std::fs::write(dir.join("inside"), "").unwrap();
    let n: u64 = std::fs::read_to_string(dir.join("counter"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    tokio::time::sleep(Duration::from_millis(20)).await;
    std::fs::write(dir.join("counter"), format!("{}\n", n + 1)).unwrap();
    let mut log = std::fs::read_to_string(dir.join("log")).unwrap_or_default();
    log.push_str("distlock\n");
    std::fs::write(dir.join("log"), log).unwrap();
    std::fs::remove_file(dir.join("inside")).unwrap();
}

/// An etcdctl process, killed if the test ends (a failed assertion) before it exits.
struct Etcdctl(Child);

impl Etcdctl {
    /// `etcdctl lock <lock> -- sh -c <script> section <dir>` against `endpoint`.
    fn lock(endpoint: &str, lock: &str, script: &str, dir: &Path) -> Etcdctl {
        let child = Command::new("etcdctl")
            .env("ETCDCTL_API", "3")
            .args([
                "--endpoints",
                endpoint,
                "lock",
                lock,
                "--",
                "sh",
                "-c",
                script,
            ])
            .arg("section")
            .arg(dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("etcdctl runs (apt-get install etcd-client)");
        Etcdctl(child)
    }

    /// Waits (at most 30 s) for it to exit; whether it succeeded.
    fn succeeds(&mut self) -> bool {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = self.0.try_wait().unwrap() {
                return status.success();
            }
            assert!(Instant::now() < deadline, "etcdctl exits within 30 s");
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Etcdctl {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// etcdctl processes and distlock tasks take turns on one lock: the non-atomic counter
/// counts every turn (no update lost), nobody ever finds another inside, and the turns of
/// the two sides interleave.
#[test]
fn etcdctl_lock_and_distlock_exclude_each_other() {
    distlock_testkit::block_on(async {
        let server = distlock_testkit::etcd_server().unwrap_or_else(|e| panic!("{e}"));
        let endpoint = server.addr().to_string();
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("counter"), "0\n").unwrap();
        let url = format!("etcd://{endpoint}/shared?session_ttl=5s");
        let client = distlock::Client::connect(&url).await.unwrap();

        const ETCDCTL_TURNS: usize = 12;
        const DISTLOCK_TURNS: usize = 12;
        let started = Instant::now();
        let etcdctl_side = {
            let (endpoint, dir) = (endpoint.clone(), dir.path().to_owned());
            tokio::task::spawn_blocking(move || {
                // Two etcdctl processes contend at a time, beside the distlock tasks.
                for _ in 0..ETCDCTL_TURNS / 2 {
                    let a = Etcdctl::lock(&endpoint, "shared/counter", SECTION, &dir);
                    let b = Etcdctl::lock(&endpoint, "shared/counter", SECTION, &dir);
                    for mut etcdctl in [a, b] {
                        assert!(etcdctl.succeeds(), "etcdctl lock failed");
                    }
                }
            })
        };
        // The distlock side starts once etcdctl has had a turn, and spreads its turns out,
        // so the two sides contend rather than run one after the other.
        let first = Instant::now() + Duration::from_secs(20);
        while !std::fs::read_to_string(dir.path().join("log")).is_ok_and(|l| l.contains("etcdctl"))
        {
            assert!(Instant::now() < first, "etcdctl takes the lock within 20 s");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let distlock_side = (0..2).map(|_| {
            let (client, dir) = (client.clone(), dir.path().to_owned());
            tokio::spawn(async move {
                for _ in 0..DISTLOCK_TURNS / 2 {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    let guard = client
                        .mutex("counter")
                        .lock_timeout(Duration::from_secs(30))
                        .await
                        .unwrap();
                    section(&dir).await;
                    guard.release().await.unwrap();
                }
            })
        });
        let distlock_side: Vec<_> = distlock_side.collect();
        etcdctl_side.await.unwrap();
        for task in distlock_side {
            task.await.unwrap();
        }
        assert!(started.elapsed() < Duration::from_secs(60));

        let counter = std::fs::read_to_string(dir.path().join("counter")).unwrap();
        assert_eq!(counter.trim(), (ETCDCTL_TURNS + DISTLOCK_TURNS).to_string());
        assert!(
            !dir.path().join("violations").exists(),
            "someone found another inside"
        );
        let log = std::fs::read_to_string(dir.path().join("log")).unwrap();
        let turns: Vec<&str> = log.lines().collect();
        let switches = turns.windows(2).filter(|w| w[0] != w[1]).count();
        assert!(switches >= 2, "the sides took turns in between: {turns:?}");
        assert_eq!(log.matches("etcdctl").count(), ETCDCTL_TURNS);
        assert_eq!(log.matches("distlock").count(), DISTLOCK_TURNS);
    });
}

/// While `etcdctl lock` holds a lock, distlock cannot take it and `status` shows etcdctl's
/// holder (a foreign client, with its lease); while distlock holds one, `etcdctl lock`
/// waits until it is released.
#[test]
fn status_shows_etcdctls_holder_and_etcdctl_waits_for_distlock() {
    distlock_testkit::block_on(async {
        let server = distlock_testkit::etcd_server().unwrap_or_else(|e| panic!("{e}"));
        let endpoint = server.addr().to_string();
        let url = format!("etcd://{endpoint}/shared?session_ttl=5s");
        let client = distlock::Client::connect(&url).await.unwrap();
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("held");

        let mut holder = Etcdctl::lock(
            &endpoint,
            "shared/theirs",
            "touch \"$1/held\"; sleep 3",
            dir.path(),
        );
        let deadline = Instant::now() + Duration::from_secs(10);
        while !marker.exists() {
            assert!(Instant::now() < deadline, "etcdctl takes the lock");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(client.mutex("theirs").try_lock().await.unwrap().is_none());
        let state = client.status(Some("theirs")).await.unwrap();
        assert_eq!(state[0].holders.len(), 1, "{state:?}");
        assert!(
            state[0].holders[0].owner.contains("foreign client"),
            "{state:?}"
        );
        assert!(
            !state[0].holders[0].no_expiry,
            "etcdctl's key is on its lease"
        );
        let waited = Instant::now();
        let ours = client
            .mutex("theirs")
            .lock_timeout(Duration::from_secs(10))
            .await
            .unwrap();
        let held = tokio::task::spawn_blocking(move || holder.succeeds());
        assert!(held.await.unwrap());
        assert!(
            waited.elapsed() >= Duration::from_secs(1),
            "distlock waited"
        );
        ours.release().await.unwrap();

        let guard = client.mutex("ours").lock().await.unwrap();
        let taken = dir.path().join("taken");
        let mut waiter = Etcdctl::lock(&endpoint, "shared/ours", "touch \"$1/taken\"", dir.path());
        tokio::time::sleep(Duration::from_millis(800)).await;
        assert!(!taken.exists(), "etcdctl waits while distlock holds");
        let state = client.status(Some("ours")).await.unwrap();
        assert_eq!(state[0].waiters.len(), 1, "{state:?}");
        guard.release().await.unwrap();
        let succeeded = tokio::task::spawn_blocking(move || waiter.succeeds())
            .await
            .unwrap();
        assert!(succeeded);
        assert!(
            taken.exists(),
            "etcdctl took the lock once distlock released it"
        );
    });
}
