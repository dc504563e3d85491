//! The contract's edges: durations too large to add, guards past their safe deadline,
//! renewals across runtimes, secrets in URLs, and backends that hang or are dropped mid-call.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use distlock_core::backend::{
    Backend, Capabilities, Grant, LeaseOutcome, PollOutcome, Session, Ticket, async_trait,
};
use distlock_core::{
    Client, ErrorKind, Health, LockOptions, LockState, MemoryBackend, Owner, Result,
    parse_lock_url, redact_url,
};

#[tokio::test]
async fn durations_too_large_to_add_mean_no_limit() {
    let client = Client::connect("memory://").await.unwrap();
    let guard = client
        .mutex("huge-wait")
        .lock_timeout(Duration::MAX)
        .await
        .unwrap();
    guard.release().await.unwrap();
    let options = LockOptions::new()
        .wait(Duration::from_secs(300_000_000_000 * 365 * 24 * 3600))
        .max_hold(Duration::MAX)
        .op_timeout(Duration::MAX);
    let guard = client.mutex("huge-wait").lock_with(&options).await.unwrap();
    assert_eq!(guard.health(), Health::Held);
    guard.renew().await.unwrap();
    guard.release().await.unwrap();
    let both = client
        .multi_lock(["huge-a", "huge-b"])
        .lock_timeout(Duration::MAX)
        .await
        .unwrap();
    both.release().await.unwrap();
}

#[tokio::test]
async fn a_multi_lock_naming_a_lock_twice_is_refused() {
    let client = Client::connect("memory://").await.unwrap();
    let twice = client.multi_lock(["orders/1", "orders/2", "orders/1"]);
    let err = twice.lock().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
    assert!(err.to_string().contains("`orders/1` twice"), "{err}");
    let err = twice.try_lock().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
    assert!(
        client.mutex("orders/2").try_lock().await.unwrap().is_some(),
        "nothing was taken"
    );
}

#[tokio::test]
async fn reentry_past_the_safe_deadline_is_lock_lost() {
    let client = Client::with_backend(Arc::new(MemoryBackend::new()));
    let owner = Owner::random();
    let options = LockOptions::new()
        .ttl(Duration::from_millis(50))
        .auto_renew(false)
        .reentrant(owner);
    let first = client.mutex("reentry").lock_with(&options).await.unwrap();
    let again = client.mutex("reentry").lock_with(&options).await.unwrap();
    drop(again);
    tokio::time::sleep(Duration::from_millis(80)).await;
    assert_eq!(first.health(), Health::Lost);
    let err = client
        .mutex("reentry")
        .lock_with(&options)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::LockLost, "{err}");
}

#[tokio::test]
async fn a_lost_guard_stays_lost_and_renew_says_so() {
    let client = Client::with_backend(Arc::new(MemoryBackend::new()));
    let options = LockOptions::new()
        .ttl(Duration::from_millis(50))
        .auto_renew(false);
    let guard = client.mutex("lost").lock_with(&options).await.unwrap();
    tokio::time::sleep(Duration::from_millis(60)).await;
    assert_eq!(guard.health(), Health::Lost);
    let err = guard.renew().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::LockLost, "{err}");
    assert_eq!(guard.health(), Health::Lost);
}

#[test]
fn renewals_outlive_the_runtime_that_started_them() {
    let client = Client::with_backend(Arc::new(MemoryBackend::new()));
    let options = LockOptions::new().ttl(Duration::from_millis(150));
    for round in 0..2 {
        let runtime = tokio::runtime::Runtime::new().unwrap();
        runtime.block_on(async {
            let guard = client.mutex("runtimes").lock_with(&options).await.unwrap();
            tokio::time::sleep(Duration::from_millis(500)).await;
            assert_eq!(
                guard.health(),
                Health::Held,
                "round {round}: renewed past its ttl"
            );
            guard.release().await.unwrap();
        });
    }
}

#[tokio::test]
async fn held_locks_are_kept_by_one_watchdog_task_not_a_task_each() {
    let client = Client::with_backend(Arc::new(MemoryBackend::new()));
    // Long leases: no renewal (which runs on a task while it lasts) falls in the count.
    let first = client.mutex("watched/0").lock().await.unwrap();
    let tasks = || {
        tokio::runtime::Handle::current()
            .metrics()
            .num_alive_tasks()
    };
    let with_one = tasks();
    let mut guards = vec![first];
    for i in 1..200 {
        guards.push(client.mutex(format!("watched/{i}")).lock().await.unwrap());
    }
    assert_eq!(tasks(), with_one, "200 guards, no task of their own");
    for guard in guards {
        guard.release().await.unwrap();
    }
    // Short leases, all renewed by that one task.
    let short = LockOptions::new().ttl(Duration::from_millis(150));
    let mut guards = Vec::new();
    for i in 0..50 {
        let name = format!("renewed/{i}");
        guards.push(client.mutex(name).lock_with(&short).await.unwrap());
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    for guard in guards {
        assert_eq!(guard.health(), Health::Held, "renewed past its ttl");
        guard.release().await.unwrap();
    }
}

#[test]
fn a_watchdog_task_dropped_before_it_ran_is_started_again() {
    let client = Client::with_backend(Arc::new(MemoryBackend::new()));
    let first = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    // The acquire ends within one poll, so the runtime goes before its watchdog task ran.
    let guard = first.block_on(client.mutex("first").lock()).unwrap();
    drop(guard);
    drop(first);
    let second = tokio::runtime::Runtime::new().unwrap();
    second.block_on(async {
        let short = LockOptions::new().ttl(Duration::from_millis(150));
        let guard = client.mutex("second").lock_with(&short).await.unwrap();
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert_eq!(guard.health(), Health::Held, "renewed past its ttl");
        guard.release().await.unwrap();
    });
}

#[test]
fn grants_on_a_live_runtime_stay_renewed_when_the_watchdogs_runtime_ends() {
    let client = Client::with_backend(Arc::new(MemoryBackend::new()));
    let short = LockOptions::new().ttl(Duration::from_millis(150));
    let first = tokio::runtime::Runtime::new().unwrap();
    // The first grant starts the watchdog task on the first runtime.
    let on_first = first.block_on(async {
        let guard = client.mutex("on-first").lock_with(&short).await.unwrap();
        tokio::time::sleep(Duration::from_millis(20)).await;
        guard
    });
    let second = tokio::runtime::Runtime::new().unwrap();
    let on_second = second
        .block_on(client.mutex("on-second").lock_with(&short))
        .unwrap();
    first.block_on(on_first.release()).unwrap();
    drop(first);
    second.block_on(async {
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert_eq!(on_second.health(), Health::Held, "renewed past its ttl");
        on_second.release().await.unwrap();
    });
}

#[tokio::test]
async fn passwords_never_appear_in_errors() {
    use rand::Rng;
    let alphabet: Vec<char> = "abcXYZ019@:/%?#".chars().collect();
    let mut rng = rand::rng();
    for _ in 0..500 {
        let password: String = (0..12)
            .map(|_| alphabet[rng.random_range(0..alphabet.len())])
            .collect();
        let secret = format!("S{password}");
        for url in [
            format!("memory://app:{secret}@host:99999/x"),
            format!("nosuch://app:{secret}@db/locks"),
            format!("memory://app:{secret}@space?bogus=1"),
        ] {
            assert!(!redact_url(&url).contains(&secret), "{url}");
            let errors = [
                parse_lock_url(&url).err(),
                Client::connect(&url).await.err(),
            ];
            for err in errors.into_iter().flatten() {
                assert!(!format!("{err}").contains(&secret), "{url}: {err}");
                assert!(!format!("{err:?}").contains(&secret), "{url}: {err:?}");
            }
        }
    }
}

/// A memory backend whose calls can be made to hang or fail as if the store were out of
/// reach, or its next grant reported as made in a session that ended, that can tell the
/// client of grants the store dropped early, and that counts enqueues, polls and
/// cancellations.
#[derive(Debug, Default)]
struct Faulty {
    inner: MemoryBackend,
    grant_in_ended_session: AtomicBool,
    hang_enqueue: AtomicBool,
    hang_poll: AtomicBool,
    hang_release: AtomicBool,
    unreachable: AtomicBool,
    /// Names whose grants the store dropped before their leases ran out.
    dropped: std::sync::Mutex<Vec<String>>,
    news: tokio::sync::watch::Sender<u64>,
    polls: AtomicUsize,
    enqueued: AtomicUsize,
    cancelled: AtomicUsize,
}

impl Faulty {
    async fn hang_if(&self, flag: &AtomicBool) {
        if flag.load(Ordering::SeqCst) {
            std::future::pending::<()>().await;
        }
    }
}

#[async_trait]
impl Backend for Faulty {
    fn scheme(&self) -> &'static str {
        "hanging"
    }

    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }

    fn session(&self) -> Option<tokio::sync::watch::Receiver<Session>> {
        self.inner.session()
    }

    fn loss_news(&self) -> Option<tokio::sync::watch::Receiver<u64>> {
        Some(self.news.subscribe())
    }

    fn grant_lost(&self, grant: &Grant) -> bool {
        self.dropped.lock().unwrap().contains(&grant.name)
    }

    /// Makes the queue entry here, as a queue-based store does (the memory backend makes
    /// it at the first poll that finds the lock taken), so a hang leaves an entry behind.
    async fn enqueue(&self, ticket: &mut Ticket) -> Result<()> {
        self.inner.poll(ticket).await?;
        self.enqueued.fetch_add(1, Ordering::SeqCst);
        self.hang_if(&self.hang_enqueue).await;
        Ok(())
    }

    async fn poll(&self, ticket: &mut Ticket) -> Result<PollOutcome> {
        self.polls.fetch_add(1, Ordering::SeqCst);
        self.hang_if(&self.hang_poll).await;
        if self.unreachable.load(Ordering::SeqCst) {
            return Err(
                distlock_core::Error::new(ErrorKind::Unavailable, "out of reach").temporary(),
            );
        }
        match self.inner.poll(ticket).await? {
            PollOutcome::Granted {
                fencing_token,
                session: Some(id),
                ..
            } if self.grant_in_ended_session.swap(false, Ordering::SeqCst) => {
                Ok(PollOutcome::granted_in_session(fencing_token, id - 1))
            }
            outcome => Ok(outcome),
        }
    }

    /// Out of reach, there is nothing to watch: it returns at once, as a session backend
    /// without a session does.
    async fn wait_for_change(&self, ticket: &mut Ticket, backstop: Option<Duration>) -> Result<()> {
        if self.unreachable.load(Ordering::SeqCst) {
            return Ok(());
        }
        self.inner.wait_for_change(ticket, backstop).await
    }

    async fn cancel(&self, ticket: &mut Ticket) -> Result<()> {
        self.cancelled.fetch_add(1, Ordering::SeqCst);
        self.inner.cancel(ticket).await
    }

    async fn renew_many(&self, grants: &[Grant], ttl: Duration) -> Result<Vec<LeaseOutcome>> {
        self.inner.renew_many(grants, ttl).await
    }

    async fn release(&self, grant: &Grant) -> Result<LeaseOutcome> {
        self.hang_if(&self.hang_release).await;
        self.inner.release(grant).await
    }

    async fn inspect(&self, name: Option<&str>) -> Result<Vec<LockState>> {
        self.inner.inspect(name).await
    }
}

#[tokio::test]
async fn a_wait_deadline_bounds_a_backend_call_that_hangs() {
    let backend = Arc::new(Faulty::default());
    let client = Client::with_backend(backend.clone());
    backend.hang_poll.store(true, Ordering::SeqCst);
    let started = Instant::now();
    let err = client
        .mutex("hung")
        .lock_timeout(Duration::from_millis(100))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Timeout);
    assert!(
        started.elapsed() < Duration::from_millis(200),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(
        backend.cancelled.load(Ordering::SeqCst),
        1,
        "the ticket was cancelled"
    );
    let quick = LockOptions::new().op_timeout(Duration::from_millis(50));
    let err = client.mutex("hung").with_options(quick).try_lock().await;
    assert_eq!(err.unwrap_err().kind(), ErrorKind::Unavailable);
}

/// A store out of reach while a request waits: the waiter asks again after growing pauses,
/// not in a tight loop, and gives up at its deadline.
#[tokio::test]
async fn a_waiter_backs_off_while_the_store_is_out_of_reach() {
    let backend = Arc::new(Faulty::default());
    let client = Client::with_backend(backend.clone());
    backend.unreachable.store(true, Ordering::SeqCst);
    let started = Instant::now();
    let err = client
        .mutex("outage")
        .lock_timeout(Duration::from_secs(1))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Timeout, "{err}");
    assert!(
        started.elapsed() < Duration::from_millis(1300),
        "{:?}",
        started.elapsed()
    );
    let polls = backend.polls.load(Ordering::SeqCst);
    assert!((2..=40).contains(&polls), "{polls} polls in a second");
}

#[tokio::test]
async fn a_release_that_hangs_is_bounded_by_the_operation_timeout() {
    let backend = Arc::new(Faulty::default());
    let client = Client::with_backend(backend.clone());
    let options = LockOptions::new().op_timeout(Duration::from_millis(100));
    let guard = client
        .mutex("hung-release")
        .lock_with(&options)
        .await
        .unwrap();
    backend.hang_release.store(true, Ordering::SeqCst);
    let started = Instant::now();
    let err = guard.release().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unavailable);
    assert!(err.is_temporary());
    assert!(
        started.elapsed() < Duration::from_millis(200),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn an_acquire_dropped_during_its_enqueue_leaves_no_queue_entry() {
    let backend = Arc::new(Faulty::default());
    let client = Client::with_backend(backend.clone());
    let held = client.mutex("dropped").lock().await.unwrap();
    backend.hang_enqueue.store(true, Ordering::SeqCst);
    let waiter = {
        let client = client.clone();
        tokio::spawn(async move { client.mutex("dropped").lock().await })
    };
    for _ in 0..200 {
        if backend.enqueued.load(Ordering::SeqCst) == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(
        client.status(Some("dropped")).await.unwrap()[0]
            .waiters
            .len(),
        1
    );
    waiter.abort();
    let _ = waiter.await;
    for _ in 0..200 {
        if backend.cancelled.load(Ordering::SeqCst) == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let state = &client.status(Some("dropped")).await.unwrap()[0];
    assert!(
        state.waiters.is_empty(),
        "the entry made before the drop is gone"
    );
    held.release().await.unwrap();
}

#[tokio::test]
async fn a_grant_made_in_a_session_that_ended_is_not_handed_out() {
    let backend = Arc::new(Faulty {
        inner: MemoryBackend::with_sessions(Duration::from_secs(10)),
        ..Faulty::default()
    });
    let client = Client::with_backend(backend.clone());
    backend.grant_in_ended_session.store(true, Ordering::SeqCst);
    let guard = client.mutex("ended").lock().await.unwrap();
    assert_eq!(guard.health(), Health::Held);
    assert_eq!(backend.enqueued.load(Ordering::SeqCst), 2, "asked again");
    assert_eq!(
        backend.cancelled.load(Ordering::SeqCst),
        1,
        "the first grant was withdrawn"
    );
    let state = &client.status(Some("ended")).await.unwrap()[0];
    assert_eq!(state.holders.len(), 1, "only the second grant holds");
    assert_eq!(state.holders[0].fencing_token, guard.fencing_token());
    guard.release().await.unwrap();
}

#[tokio::test]
async fn news_of_a_grant_dropped_early_turns_its_guard_lost_at_once() {
    let backend = Arc::new(Faulty::default());
    let client = Client::with_backend(backend.clone());
    let options = LockOptions::new().ttl(Duration::from_secs(30));
    let dropped = client.mutex("dropped").lock_with(&options).await.unwrap();
    let kept = client.mutex("kept").lock_with(&options).await.unwrap();
    backend.dropped.lock().unwrap().push("dropped".into());
    let told = Instant::now();
    backend.news.send_modify(|n| *n += 1);
    tokio::time::timeout(Duration::from_secs(1), dropped.lost())
        .await
        .expect("turned Lost on the news, not at its next renewal");
    assert!(told.elapsed() < Duration::from_millis(500));
    assert_eq!(dropped.health(), Health::Lost);
    assert_eq!(
        kept.health(),
        Health::Held,
        "only the dropped grant is lost"
    );
    // Given back too, in case the store still held it after all.
    let mut freed = false;
    for _ in 0..100 {
        let state = client.status(Some("dropped")).await.unwrap();
        if state.iter().all(|s| s.holders.is_empty()) {
            freed = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(freed, "the dropped grant was released");
    // A grant the news came too early for is found at its first check.
    backend.dropped.lock().unwrap().push("late".into());
    let late = client.mutex("late").lock().await.unwrap();
    tokio::time::timeout(Duration::from_secs(1), late.lost())
        .await
        .expect("found at its first check");
    kept.release().await.unwrap();
}

#[tokio::test]
async fn close_releases_every_grant_and_the_guards_find_them_released() {
    let backend = Arc::new(MemoryBackend::new());
    let client = Client::with_backend(backend.clone());
    let other = Client::with_backend(backend);
    let held = client.mutex("close/held").lock().await.unwrap();
    let reader = client.rwlock("close/read").read().await.unwrap();
    let permit = client
        .semaphore("close/permits", 1)
        .acquire()
        .await
        .unwrap();
    drop(client.mutex("close/dropped").lock().await.unwrap());
    client.close().await.unwrap();
    let taken = other.mutex("close/held").try_lock().await.unwrap();
    assert!(taken.is_some(), "`close/held` is free after close");
    for name in ["close/read", "close/dropped"] {
        assert!(
            other.mutex(name).try_lock().await.unwrap().is_some(),
            "`{name}` is free after close"
        );
    }
    assert!(
        other
            .semaphore("close/permits", 1)
            .try_acquire()
            .await
            .unwrap()
            .is_some()
    );
    assert_eq!(
        held.health(),
        Health::Lost,
        "a guard whose grant close released"
    );
    let err = held.release().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotHeld, "{err}");
    drop(reader);
    drop(permit);
    assert!(client.settle(Duration::from_secs(1)).await);
    let again = client.mutex("close/held").try_lock().await.unwrap();
    assert!(
        again.is_none(),
        "the other client holds it; the closed client still works"
    );
}

#[tokio::test]
async fn close_against_a_store_that_hangs_costs_one_operation_timeout_not_one_per_grant() {
    let backend = Arc::new(Faulty::default());
    let client = Client::with_backend(backend.clone());
    let options = LockOptions::new().op_timeout(Duration::from_millis(300));
    let mut guards = Vec::new();
    for name in ["hung/a", "hung/b", "hung/c", "hung/d"] {
        guards.push(client.mutex(name).lock_with(&options).await.unwrap());
    }
    backend.hang_release.store(true, Ordering::SeqCst);
    let started = Instant::now();
    let err = client.close().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    assert!(
        started.elapsed() < Duration::from_millis(900),
        "four releases ran one after another: {:?}",
        started.elapsed()
    );
    assert!(guards.iter().all(|g| g.health() == Health::Lost));
}
