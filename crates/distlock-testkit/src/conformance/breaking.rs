//! Breaking a stuck lock: an operator's forced release of another holder's grant.

use std::time::Duration;

use distlock::{ErrorKind, Health, LockOptions};

use super::{Target, expect_kind, unique, wait_for_waiters};

/// How long a broken holder may take to learn of it: its next renewal (a third of the TTL
/// below) or, where the store tells, at once.
const LEARNS_WITHIN: Duration = Duration::from_secs(4);

/// A resource that applies a write only with a fencing token newer than the last one it
/// applied, as a store guarded by distlock should.
#[derive(Debug, Default)]
struct FencedResource {
    last_token: u64,
}

impl FencedResource {
    fn write(&mut self, token: u64) -> bool {
        let applied = token > self.last_token;
        self.last_token = self.last_token.max(token);
        applied
    }
}

/// A grant broken by another client (by its fencing token, as `status` shows it) is gone
/// at once: the waiter behind it is granted with a greater token, the broken holder's
/// guard goes `Lost`, and its late write is refused by a fenced resource the new holder
/// wrote. A wrong token breaks nothing. A backend that cannot break a grant refuses with
/// `Unsupported` and leaves it held.
///
/// # Examples
///
/// ```
/// # distlock_testkit::block_on(async {
/// distlock_testkit::conformance::a_broken_grant_goes_to_the_next_and_its_late_writes_are_refused(&distlock_testkit::Target::new("memory://doc")).await;
/// # });
/// ```
pub async fn a_broken_grant_goes_to_the_next_and_its_late_writes_are_refused(target: &Target) {
    let name = unique("break");
    let stuck = target.client().await;
    let operator = target.client().await;
    let options = LockOptions::new().ttl(Duration::from_secs(3));
    let guard = stuck.mutex(&name).lock_with(&options).await.unwrap();
    let token = guard.fencing_token();

    if !operator.capabilities().force_release {
        let refused = expect_kind(
            operator.force_release(&name, Some(token)).await,
            ErrorKind::Unsupported,
            "breaking a grant the store cannot break",
        );
        assert!(
            !refused.to_string().is_empty() && guard.health() == Health::Held,
            "refused ({refused}), and the grant stays held"
        );
        return;
    }

    let wrong = operator.force_release(&name, Some(token + 1_000_000)).await;
    assert_eq!(
        wrong.unwrap(),
        vec![],
        "a token nobody holds breaks nothing"
    );
    assert_eq!(guard.health(), Health::Held);

    let next = {
        let (operator, name) = (operator.clone(), name.clone());
        tokio::spawn(async move {
            operator
                .mutex(&name)
                .lock_timeout(Duration::from_secs(10))
                .await
        })
    };
    // Time to queue behind the holder (where the store keeps a queue, `status` lists it).
    tokio::time::sleep(Duration::from_millis(300)).await;

    let broken = operator.force_release(&name, Some(token)).await.unwrap();
    assert_eq!(broken.len(), 1, "the one grant is broken: {broken:?}");
    assert_eq!(broken[0].fencing_token, token);
    assert_eq!(broken[0].owner, guard.owner().to_string());

    let taken = tokio::time::timeout(Duration::from_secs(5), next)
        .await
        .expect("the waiter is granted once the grant is broken")
        .unwrap()
        .unwrap();
    assert!(
        taken.fencing_token() > token,
        "the next grant's token {} is above the broken one's {token}",
        taken.fencing_token()
    );
    tokio::time::timeout(LEARNS_WITHIN, guard.lost())
        .await
        .expect("the broken holder's guard goes Lost");

    let mut resource = FencedResource::default();
    assert!(
        resource.write(taken.fencing_token()),
        "the new holder writes"
    );
    assert!(
        !resource.write(token),
        "the broken holder's late write is refused"
    );
    assert_eq!(
        operator.force_release(&name, Some(token)).await.unwrap(),
        vec![],
        "breaking it again breaks nothing"
    );
    taken.release().await.unwrap();
}

/// Without a token every current grant of the name is broken: both readers of a
/// read/write lock (or every holder of a semaphore's permits, where there are no
/// read/write locks), and a writer waiting behind them is granted.
///
/// # Examples
///
/// ```
/// # distlock_testkit::block_on(async {
/// distlock_testkit::conformance::breaking_without_a_token_breaks_every_holder(&distlock_testkit::Target::new("memory://doc")).await;
/// # });
/// ```
pub async fn breaking_without_a_token_breaks_every_holder(target: &Target) {
    let caps = target.client().await.capabilities();
    if !caps.force_release || !caps.rwlock {
        return;
    }
    let name = unique("break-all");
    let (a, b, operator) = (
        target.client().await,
        target.client().await,
        target.client().await,
    );
    let short = LockOptions::new().ttl(Duration::from_secs(3));
    let r1 = a
        .rwlock(&name)
        .with_options(short.clone())
        .read()
        .await
        .unwrap();
    let r2 = b.rwlock(&name).with_options(short).read().await.unwrap();
    let writer = {
        let (operator, name) = (operator.clone(), name.clone());
        let waiting = LockOptions::new().wait(Duration::from_secs(10));
        tokio::spawn(async move { operator.rwlock(&name).with_options(waiting).write().await })
    };
    wait_for_waiters(&operator, &name, 1).await;

    let broken = operator.force_release(&name, None).await.unwrap();
    let mut tokens: Vec<u64> = broken.iter().map(|h| h.fencing_token).collect();
    tokens.sort_unstable();
    let mut held = vec![r1.fencing_token(), r2.fencing_token()];
    held.sort_unstable();
    assert_eq!(tokens, held, "both readers are broken: {broken:?}");

    let written = tokio::time::timeout(Duration::from_secs(5), writer)
        .await
        .expect("the waiting writer is granted")
        .unwrap()
        .unwrap();
    assert!(written.fencing_token() > held[1]);
    for reader in [&r1, &r2] {
        tokio::time::timeout(LEARNS_WITHIN, reader.lost())
            .await
            .expect("each broken reader goes Lost");
    }
    written.release().await.unwrap();
}

/// A store whose session-mode locks live as long as their holder's connection refuses to
/// break one, naming the statement that ends that connection; running it (through `run`,
/// on the store's server) frees the lock: the holder's guard goes `Lost` and another
/// client takes the lock.
///
/// # Examples
///
/// ```no_run
/// # distlock_testkit::block_on(async {
/// # let target = distlock_testkit::Target::new("postgres://h/db");
/// distlock_testkit::conformance::a_session_lock_break_names_the_statement_that_frees_it(
///     &target,
///     |statement| async move { println!("run {statement}") },
/// )
/// .await;
/// # });
/// ```
pub async fn a_session_lock_break_names_the_statement_that_frees_it<F, Fut>(target: &Target, run: F)
where
    F: FnOnce(String) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let name = unique("break-session");
    let (holder, operator) = (target.client().await, target.client().await);
    let options = LockOptions::new().ttl(Duration::from_secs(3));
    let guard = holder.mutex(&name).lock_with(&options).await.unwrap();
    let refused = expect_kind(
        operator.force_release(&name, None).await,
        ErrorKind::Unsupported,
        "breaking a session-mode lock",
    );
    let message = refused.message();
    let statement = message
        .split_once("instead: ")
        .map(|(_, statement)| statement.trim().to_owned())
        .unwrap_or_else(|| panic!("the refusal names the statement to run: {message}"));
    assert_eq!(guard.health(), Health::Held, "nothing was broken");
    run(statement).await;
    tokio::time::timeout(LEARNS_WITHIN, guard.lost())
        .await
        .expect("the holder learns that its connection was ended");
    let taken = operator
        .mutex(&name)
        .lock_timeout(Duration::from_secs(5))
        .await
        .expect("the lock is free once its holder's connection ended");
    assert!(taken.fencing_token() > guard.fencing_token());
}
