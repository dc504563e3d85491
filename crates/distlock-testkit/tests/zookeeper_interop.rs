//! distlock and the real peers exclude each other on the same ZooKeeper path: Apache
//! Curator 5.4 from Debian (`InterProcessMutex`, `InterProcessReadWriteLock`, compiled here
//! with `javac`) and kazoo's `Lock` (from `DISTLOCK_TEST_PYTHON`, which scripts/test points
//! at a virtual environment with kazoo installed). Each side runs its own rounds at the
//! same time; a counter updated non-atomically by every writer loses no update, and an
//! "inside" file that each writer creates exclusively proves no two were inside at once.

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::Arc;
use std::time::{Duration, Instant};

const ROUNDS: u32 = 25;

/// The permits of the semaphore both sides share.
const PERMITS: u32 = 2;

/// The jars Curator's contender is compiled and run with (their manifests name the rest).
const CURATOR_CLASSPATH: &str = "/usr/share/java/curator-recipes.jar:/usr/share/java/curator-framework.jar:/usr/share/java/curator-client.jar:/usr/share/java/zookeeper.jar";

fn interop_file(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/interop")
        .join(name)
}

/// Compiles `CuratorContender.java` into `dir`.
fn compile_curator_contender(dir: &Path) {
    assert!(
        Path::new("/usr/share/java/curator-recipes.jar").is_file(),
        "Curator is not installed: apt-get install libcurator-recipes-java (scripts/test installs it)"
    );
    let status = Command::new("javac")
        .args(["-nowarn", "-cp", CURATOR_CLASSPATH, "-d"])
        .arg(dir)
        .arg(interop_file("CuratorContender.java"))
        .status()
        .expect("javac runs (apt-get install default-jdk-headless)");
    assert!(status.success(), "javac failed");
}

/// A Curator contender process in `mode` (mutex, write, read) on `path`.
fn curator(classes: &Path, connect: &str, path: &str, mode: &str, files: &Files) -> Child {
    Command::new("java")
        .arg("-cp")
        .arg(format!("{}:{CURATOR_CLASSPATH}", classes.display()))
        .args([
            "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
            "CuratorContender",
            connect,
            path,
            mode,
        ])
        .arg(ROUNDS.to_string())
        .arg(&files.counter)
        .arg(&files.inside)
        .spawn()
        .expect("java runs")
}

/// The shared counter and the "inside" marker.
struct Files {
    _dir: tempfile::TempDir,
    counter: PathBuf,
    inside: PathBuf,
}

impl Files {
    fn new() -> Files {
        let dir = tempfile::tempdir().unwrap();
        let counter = dir.path().join("counter");
        std::fs::write(&counter, "0").unwrap();
        Files {
            counter,
            inside: dir.path().join("inside"),
            _dir: dir,
        }
    }

    fn count(&self) -> u32 {
        std::fs::read_to_string(&self.counter)
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    }

    /// A writer's critical section: alone inside, one non-atomic increment.
    async fn write(&self) {
        std::fs::File::create_new(&self.inside).expect("no one else is inside");
        let value = self.count();
        tokio::time::sleep(Duration::from_millis(1)).await;
        std::fs::write(&self.counter, (value + 1).to_string()).unwrap();
        std::fs::remove_file(&self.inside).unwrap();
    }

    /// A reader's critical section: no writer inside.
    async fn read(&self) {
        assert!(
            !self.inside.exists(),
            "a writer is inside while a reader holds the lock"
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
        assert!(
            !self.inside.exists(),
            "a writer entered while a reader held the lock"
        );
    }
}

/// Waits (at most 120 s) for a peer process, which must finish its rounds.
fn finish(mut peer: Child, who: &str) {
    let deadline = Instant::now() + Duration::from_secs(120);
    let status = loop {
        if let Some(status) = peer.try_wait().unwrap() {
            break status;
        }
        if Instant::now() >= deadline {
            let _ = peer.kill();
            panic!("{who} did not finish within 120 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(
        status.success(),
        "{who} failed ({status}): exit 3 means an overlap"
    );
}

/// Runs [`ROUNDS`] of distlock's `mode` (mutex, write, read, semaphore of [`PERMITS`]) on `name`, in one task per
/// client, all at once.
async fn distlock_rounds(
    url: &str,
    name: &str,
    mode: &'static str,
    files: &Arc<Files>,
    clients: usize,
) {
    let mut tasks = Vec::new();
    for _ in 0..clients {
        let client = distlock::Client::connect(url).await.unwrap();
        let (name, files) = (name.to_owned(), files.clone());
        tasks.push(tokio::spawn(async move {
            let wait = Duration::from_secs(60);
            let options = distlock::LockOptions::new().wait(wait);
            for _ in 0..ROUNDS {
                match mode {
                    "mutex" => {
                        let guard = client.mutex(&name).lock_timeout(wait).await.unwrap();
                        files.write().await;
                        guard.release().await.unwrap();
                    }
                    "write" => {
                        let guard = client.rwlock(&name).write_with(&options).await.unwrap();
                        files.write().await;
                        guard.release().await.unwrap();
                    }
                    "read" => {
                        let guard = client.rwlock(&name).read_with(&options).await.unwrap();
                        files.read().await;
                        guard.release().await.unwrap();
                    }
                    _ => {
                        let semaphore = client.semaphore(&name, PERMITS);
                        let permit = semaphore.acquire_with(1, &options).await.unwrap();
                        hold_permit(&files.inside, PERMITS as usize).await;
                        permit.release().await.unwrap();
                    }
                }
            }
        }));
    }
    for task in tasks {
        tokio::time::timeout(Duration::from_secs(120), task)
            .await
            .expect("the distlock side finishes")
            .unwrap();
    }
}

#[test]
fn distlock_and_curator_mutexes_exclude_each_other() {
    let zk = distlock_testkit::zookeeper_server().unwrap_or_else(|e| panic!("{e}"));
    let classes = tempfile::tempdir().unwrap();
    compile_curator_contender(classes.path());
    let files = Arc::new(Files::new());
    let peer = curator(
        classes.path(),
        &zk.addr().to_string(),
        "/interop/shared/job",
        "mutex",
        &files,
    );
    distlock_testkit::block_on(async {
        let url = format!("zk://{}/interop", zk.addr());
        distlock_rounds(&url, "shared/job", "mutex", &files, 2).await;
    });
    finish(peer, "Curator's InterProcessMutex");
    assert_eq!(files.count(), 3 * ROUNDS, "no update was lost");
}

/// A semaphore holder's critical section: a file of its own in the `inside` directory,
/// which never holds more than `limit` files.
async fn hold_permit(inside: &Path, limit: usize) {
    let mine = inside.join(distlock::random_id());
    std::fs::File::create_new(&mine).unwrap();
    let holders = std::fs::read_dir(inside).unwrap().count();
    assert!(
        holders <= limit,
        "{holders} holders of a semaphore of {limit}"
    );
    tokio::time::sleep(Duration::from_millis(1)).await;
    std::fs::remove_file(&mine).unwrap();
}

#[test]
fn distlock_and_curator_semaphores_share_one_set_of_permits() {
    let zk = distlock_testkit::zookeeper_server().unwrap_or_else(|e| panic!("{e}"));
    let classes = tempfile::tempdir().unwrap();
    compile_curator_contender(classes.path());
    let files = Arc::new(Files::new());
    std::fs::create_dir(&files.inside).unwrap();
    let connect = zk.addr().to_string();
    let peers: Vec<Child> = (0..2)
        .map(|_| {
            curator(
                classes.path(),
                &connect,
                "/interop/shared/pool",
                "semaphore2",
                &files,
            )
        })
        .collect();
    distlock_testkit::block_on(async {
        let url = format!("zk://{}/interop", zk.addr());
        distlock_rounds(&url, "shared/pool", "semaphore", &files, 2).await;
    });
    for peer in peers {
        finish(peer, "Curator's InterProcessSemaphoreV2");
    }
}

#[test]
fn distlock_and_curator_read_write_locks_exclude_each_other() {
    let zk = distlock_testkit::zookeeper_server().unwrap_or_else(|e| panic!("{e}"));
    let classes = tempfile::tempdir().unwrap();
    compile_curator_contender(classes.path());
    let files = Arc::new(Files::new());
    let connect = zk.addr().to_string();
    let writer = curator(
        classes.path(),
        &connect,
        "/interop/shared/table",
        "write",
        &files,
    );
    let reader = curator(
        classes.path(),
        &connect,
        "/interop/shared/table",
        "read",
        &files,
    );
    distlock_testkit::block_on(async {
        let url = format!("zk://{}/interop", zk.addr());
        let writers = distlock_rounds(&url, "shared/table", "write", &files, 1);
        let readers = distlock_rounds(&url, "shared/table", "read", &files, 2);
        tokio::join!(writers, readers);
    });
    finish(writer, "Curator's write lock");
    finish(reader, "Curator's read lock");
    assert_eq!(files.count(), 2 * ROUNDS, "no update was lost");
}

fn python() -> String {
    std::env::var("DISTLOCK_TEST_PYTHON").unwrap_or_else(|_| "python3".to_owned())
}

#[test]
fn distlock_and_kazoo_exclude_each_other() {
    let python = python();
    let has_kazoo = Command::new(&python)
        .args(["-c", "import kazoo"])
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        has_kazoo,
        "{python} cannot import kazoo; run scripts/test (it installs kazoo into a virtual \
         environment) or `pip install kazoo` and set DISTLOCK_TEST_PYTHON"
    );
    let zk = distlock_testkit::zookeeper_server().unwrap_or_else(|e| panic!("{e}"));
    let files = Arc::new(Files::new());
    let peer = Command::new(&python)
        .arg(interop_file("kazoo_lock.py"))
        .arg(zk.addr().to_string())
        .arg("/interop/shared/job")
        .arg(ROUNDS.to_string())
        .arg(&files.counter)
        .arg(&files.inside)
        .spawn()
        .unwrap();
    distlock_testkit::block_on(async {
        let url = format!("zk://{}/interop", zk.addr());
        distlock_rounds(&url, "shared/job", "mutex", &files, 2).await;
    });
    finish(peer, "kazoo's Lock");
    assert_eq!(files.count(), 3 * ROUNDS, "no update was lost");
}
