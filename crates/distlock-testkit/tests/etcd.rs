//! The conformance suites (session and general), cross-process tests and process faults
//! against a real etcd started for each test.

async fn target() -> distlock_testkit::Target {
    distlock_testkit::etcd_target().await
}

distlock_testkit::conformance_suite!(target, liveness = Session);
distlock_testkit::process_suite!(target);

use std::time::{Duration, Instant};

use etcd_client::{Compare, CompareOp, Txn, TxnOp};

/// Runs `etcdctl` against `endpoint` with `args`, which must succeed: its output.
fn etcdctl(endpoint: &str, args: &[&str]) -> String {
    distlock_testkit::etcdctl(endpoint, args)
        .unwrap_or_else(|| panic!("etcdctl {args:?} failed (apt-get install etcd-client)"))
}

/// A contender key on no lease (put by hand, or by a program that forgot its lease) is a
/// lock no session's end frees: status shows its holder with no expiry.
#[test]
fn a_key_on_no_lease_shows_as_a_holder_with_no_expiry() {
    distlock_testkit::block_on(async {
        let server = distlock_testkit::etcd_server().unwrap_or_else(|e| panic!("{e}"));
        let endpoint = server.addr().to_string();
        etcdctl(&endpoint, &["put", "ops/stuck/694d7a1b2c3d4e5f", "by hand"]);
        let client = distlock::Client::connect(&format!("etcd://{endpoint}/ops"))
            .await
            .unwrap();
        assert!(client.mutex("stuck").try_lock().await.unwrap().is_none());
        let state = &client.status(Some("stuck")).await.unwrap()[0];
        assert_eq!(state.holders.len(), 1, "{state:?}");
        assert!(state.holders[0].no_expiry, "{state:?}");
        let guard = client.mutex("free").lock().await.unwrap();
        let state = &client.status(Some("free")).await.unwrap()[0];
        assert!(!state.holders[0].no_expiry, "{state:?}");
        guard.release().await.unwrap();
    });
}

/// `?prefix=/locks` names the key prefix verbatim, leading slash and all: a lock `x` is
/// the keys under `/locks/x/`, where a Go service's `concurrency.NewMutex(s, "/locks/x/")`
/// queues, not under `locks/x/`.
#[test]
fn a_verbatim_prefix_keeps_its_leading_slash() {
    distlock_testkit::block_on(async {
        let server = distlock_testkit::etcd_server().unwrap_or_else(|e| panic!("{e}"));
        let endpoint = server.addr().to_string();
        let client = distlock::Client::connect(&format!("etcd://{endpoint}?prefix=/locks"))
            .await
            .unwrap();
        let guard = client.mutex("x").lock().await.unwrap();
        let keys = etcdctl(&endpoint, &["get", "--prefix", "--keys-only", "/locks/x/"]);
        assert!(keys.lines().any(|k| k.starts_with("/locks/x/")), "{keys:?}");
        let unslashed = etcdctl(&endpoint, &["get", "--prefix", "--keys-only", "locks/"]);
        assert!(unslashed.trim().is_empty(), "{unslashed:?}");
        guard.release().await.unwrap();
    });
}

/// A holder whose key an operator deletes (`etcdctl del`) learns it through the watch on
/// its own key and turns `Lost` alone (its other guards, in the same live session, stay
/// held); the next holder's token is greater.
#[test]
fn a_holder_whose_key_is_deleted_by_hand_turns_lost_alone() {
    distlock_testkit::block_on(async {
        let server = distlock_testkit::etcd_server().unwrap_or_else(|e| panic!("{e}"));
        let endpoint = server.addr().to_string();
        let url = format!("etcd://{endpoint}/ops?session_ttl=2s");
        distlock_testkit::a_holder_deleted_by_hand_turns_lost_alone(&url, || async {
            let keys = etcdctl(&endpoint, &["get", "--prefix", "--keys-only", "ops/held/"]);
            let key = keys
                .lines()
                .find(|l| !l.is_empty())
                .expect("the holder's key");
            etcdctl(&endpoint, &["del", key]);
        })
        .await;
    });
}

/// The member frozen (SIGSTOP) under a held lock: the guard goes `AtRisk`, then `Lost`
/// before the member runs again; the next holder's token is greater.
#[test]
fn a_paused_member_puts_the_guard_at_risk_then_lost() {
    distlock_testkit::block_on(async {
        let server = distlock_testkit::etcd_server().unwrap_or_else(|e| panic!("{e}"));
        let url = format!("etcd://{}/faults?session_ttl=2s", server.addr());
        distlock_testkit::lose_to_a_paused_server(&url, &server, "paused").await;
    });
}

/// A client whose link goes silent (the proxy black-holes it): its guard goes `AtRisk`,
/// then `Lost` — before etcd expires the lease and deletes its key, as a watch from another
/// client sees — and the next holder's token is greater.
#[test]
fn a_client_cut_off_is_lost_before_its_lease_expires_on_the_server() {
    distlock_testkit::block_on(async {
        let server = distlock_testkit::etcd_server().unwrap_or_else(|e| panic!("{e}"));
        let endpoint = server.addr().to_string();
        let proxy = distlock_testkit::FaultProxy::start(server.addr())
            .await
            .unwrap();
        let through = format!("etcd://{}/faults?session_ttl=2s", proxy.addr());
        let direct = format!("etcd://{endpoint}/faults");
        let client = distlock::Client::connect(&through).await.unwrap();
        let guard = client.mutex("cut").lock().await.unwrap();
        let observer = etcd_client::Client::connect([endpoint.as_str()], None)
            .await
            .unwrap();
        let options = etcd_client::WatchOptions::new()
            .with_prefix()
            .with_filters([etcd_client::WatchFilterType::NoPut]);
        let mut deletes = observer
            .watch_client()
            .watch("faults/cut/", Some(options))
            .await
            .unwrap();
        assert!(deletes.message().await.unwrap().unwrap().created());
        let deleted = tokio::spawn(async move {
            loop {
                let answer = deletes.message().await.unwrap().expect("the watch goes on");
                if !answer.events().is_empty() {
                    return Instant::now();
                }
            }
        });
        distlock_testkit::a_cut_off_holder_is_lost_before_the_store_lets_go(
            &guard, &proxy, &direct, deleted,
        )
        .await;
    });
}

/// A write to etcd made in a transaction on `still_holds(&guard)` lands while the guard
/// holds, and is refused once its session expired and someone else took the lock, or once
/// another client adopted its hand-off: the safe way to write to etcd under an etcd lock.
#[test]
fn a_stale_holders_guarded_write_is_refused() {
    distlock_testkit::block_on(async {
        let server = distlock_testkit::etcd_server().unwrap_or_else(|e| panic!("{e}"));
        let endpoint = server.addr().to_string();
        let proxy = distlock_testkit::FaultProxy::start(server.addr())
            .await
            .unwrap();
        let through = format!("etcd://{}/fenced?session_ttl=2s", proxy.addr());
        let stale = distlock::Client::connect(&through).await.unwrap();
        let guard = stale.mutex("account").lock().await.unwrap();
        let condition = distlock::etcd::still_holds(&guard).unwrap();
        let mut kv = etcd_client::Client::connect([endpoint.as_str()], None)
            .await
            .unwrap()
            .kv_client();
        let write = |value: &str, held: distlock::etcd::HeldKey| {
            let condition = Compare::mod_revision(held.key, CompareOp::Equal, held.mod_revision);
            Txn::new()
                .when([condition])
                .and_then([TxnOp::put("balance", value, None)])
        };
        let first = kv.txn(write("100", condition.clone())).await.unwrap();
        assert!(first.succeeded(), "the holder's write lands");

        proxy.set(distlock_testkit::ProxyMode::BlackHole);
        tokio::time::timeout(Duration::from_secs(5), guard.lost())
            .await
            .expect("the cut-off holder is lost");
        let direct = format!("etcd://{endpoint}/fenced");
        let next = distlock_testkit::take_over(
            &direct,
            "account",
            guard.fencing_token(),
            Duration::from_secs(8),
        )
        .await;
        let stale_write = kv.txn(write("1", condition.clone())).await.unwrap();
        assert!(
            !stale_write.succeeded(),
            "the stale holder's write is refused"
        );
        let fresh = distlock::etcd::still_holds(&next).unwrap();
        assert!(
            kv.txn(write("120", fresh.clone()))
                .await
                .unwrap()
                .succeeded()
        );
        let balance = kv.get("balance", None).await.unwrap();
        assert_eq!(balance.kvs()[0].value(), b"120");
        // The same condition as etcdctl's `txn` reads it: the fresh holder's write lands,
        // the stale one's is refused.
        for (held, verdict) in [(&fresh, "SUCCESS"), (&condition, "FAILURE")] {
            let script = format!("{}\n\nput balance 130\n\n\n", held.etcdctl_compare());
            assert_eq!(
                etcdctl_txn(&endpoint, &script).lines().next(),
                Some(verdict)
            );
        }
        // Handed off: the sender's write is refused once the adopter took the key over.
        let adopter = distlock::Client::connect(&direct).await.unwrap();
        let handed = next.hand_off(Duration::from_secs(10)).unwrap();
        let adopted = adopter.adopt(&handed).await.unwrap();
        let sender_write = kv.txn(write("2", fresh.clone())).await.unwrap();
        assert!(
            !sender_write.succeeded(),
            "the sender's write after the adoption is refused"
        );
        let adopters = distlock::etcd::still_holds(&adopted).unwrap();
        assert_eq!(
            adopters.create_revision, fresh.create_revision,
            "its place kept"
        );
        assert!(kv.txn(write("140", adopters)).await.unwrap().succeeded());
        next.handed_over(&handed).await.unwrap();
        adopted.release().await.unwrap();
        let memory = distlock::Client::connect("memory://fenced").await.unwrap();
        let elsewhere = memory.mutex("account").lock().await.unwrap();
        let err = distlock::etcd::still_holds(&elsewhere).unwrap_err();
        assert_eq!(err.kind(), distlock::ErrorKind::InvalidInput, "{err}");
    });
}

/// Names a user may pick — nested, doubled and trailing slashes, dots, `%`, unicode, the
/// longest allowed — are each a lock of their own on etcd, and `status` gives them back.
#[test]
fn odd_names_are_locks_of_their_own_and_status_gives_them_back() {
    distlock_testkit::block_on(async {
        let server = distlock_testkit::etcd_server().unwrap_or_else(|e| panic!("{e}"));
        let url = format!("etcd://{}/names", server.addr());
        distlock_testkit::odd_names_are_locks_of_their_own(&url).await;
    });
}

/// A member that hangs (SIGSTOP) mid-call: an acquire returns within its wait, a release
/// within its operation timeout.
#[test]
fn a_hung_member_bounds_every_call_by_its_deadline() {
    distlock_testkit::block_on(async {
        let server = distlock_testkit::etcd_server().unwrap_or_else(|e| panic!("{e}"));
        let url = format!("etcd://{}/hung?session_ttl=10s", server.addr());
        distlock_testkit::a_hung_server_bounds_every_call(&url, &server).await;
    });
}

/// Session TTLs etcd cannot have, and URLs that cannot work, are refused with the reason,
/// never a panic; an address nobody answers at fails within seconds.
#[test]
fn bad_urls_are_refused_with_the_reason() {
    distlock_testkit::block_on(async {
        for ttl in ["300000000000y", "1ns", "0s", "-1s", "1500ms", "soon", ""] {
            let url = format!("etcd://127.0.0.1:1/x?session_ttl={ttl}");
            let err = distlock::Client::connect(&url).await.unwrap_err();
            assert_eq!(
                err.kind(),
                distlock::ErrorKind::InvalidInput,
                "{ttl}: {err}"
            );
            assert!(err.to_string().contains("session_ttl"), "{err}");
        }
        let port = distlock_testkit::free_port().unwrap();
        let started = Instant::now();
        let err = distlock::Client::connect(&format!("etcd://u:s3cret@127.0.0.1:{port}/x"))
            .await
            .unwrap_err();
        assert_eq!(err.kind(), distlock::ErrorKind::Unavailable, "{err}");
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{:?}",
            started.elapsed()
        );
        assert!(!format!("{err} {err:?}").contains("s3cret"), "{err:?}");
    });
}

/// `etcds://` reaches a TLS member when `tls_ca` is the authority of its certificate;
/// another authority, a missing file and a file that is no certificate are refused with
/// the reason, and nothing shows the password.
#[test]
fn tls_with_the_members_authority_works_and_another_is_refused() {
    distlock_testkit::block_on(async {
        let dirs = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let certs = distlock_testkit::TestCertificates::make(dirs.0.path()).unwrap();
        let stranger = distlock_testkit::TestCertificates::make(dirs.1.path()).unwrap();
        let server = distlock_testkit::etcd_tls_server(&certs).unwrap_or_else(|e| panic!("{e}"));
        let url = |ca: &std::path::Path| {
            format!(
                "etcds://app:s3cret@{}/tls?tls_ca={}",
                server.addr(),
                ca.display()
            )
        };
        // Without auth enabled on the member, credentials are refused: connect without.
        let plain = |ca: &std::path::Path| url(ca).replace("app:s3cret@", "");

        let client = distlock::Client::connect(&plain(&certs.ca)).await.unwrap();
        let guard = client.mutex("over-tls").lock().await.unwrap();
        let shown = client.status(Some("over-tls")).await.unwrap();
        assert_eq!(shown[0].holders.len(), 1);
        guard.release().await.unwrap();

        let err = distlock::Client::connect(&url(&stranger.ca))
            .await
            .unwrap_err();
        assert_eq!(err.kind(), distlock::ErrorKind::Unavailable, "{err}");
        assert!(err.to_string().contains("TLS"), "{err}");
        let not_pem = dirs.0.path().join("san.cnf");
        for ca in [
            std::path::Path::new("/nonexistent/ca.pem"),
            not_pem.as_path(),
        ] {
            let refused = distlock::Client::connect(&url(ca)).await.unwrap_err();
            assert_eq!(
                refused.kind(),
                distlock::ErrorKind::InvalidInput,
                "{refused}"
            );
            assert!(!format!("{refused} {refused:?}").contains("s3cret"));
        }
        assert!(!format!("{err} {err:?}").contains("s3cret"));
    });
}

/// A client that only reads the state (`status`) or breaks locks holds no lease: etcd's
/// lease list stays empty until its first lock, which grants the session's one lease.
#[test]
fn looking_and_breaking_hold_no_lease() {
    distlock_testkit::block_on(async {
        let server = distlock_testkit::etcd_server().unwrap_or_else(|e| panic!("{e}"));
        let hosts = server.addr().to_string();
        let client = distlock::Client::connect(&format!("etcd://{hosts}/looks"))
            .await
            .unwrap();
        assert!(client.status(None).await.unwrap().is_empty());
        assert!(client.force_release("x", None).await.unwrap().is_empty());
        let leases = etcdctl(&hosts, &["lease", "list"]);
        assert!(leases.contains("found 0 leases"), "{leases}");
        let guard = client.mutex("x").lock().await.unwrap();
        let leases = etcdctl(&hosts, &["lease", "list"]);
        assert!(leases.contains("found 1 leases"), "{leases}");
        guard.release().await.unwrap();
    });
}

/// Turns auth on at the member at `hosts`, with user `alice` (password `al1cepw`) whose
/// role may read and write under `app/`: etcdctl's arguments for `root`.
fn alice_may_lock_under_app(hosts: &str) -> [&'static str; 2] {
    let root = ["--user", "root:r00tpw"];
    etcdctl(
        hosts,
        &["user", "add", "root", "--new-user-password=r00tpw"],
    );
    etcdctl(hosts, &["auth", "enable"]);
    for args in [
        &["role", "add", "locker"][..],
        &[
            "role",
            "grant-permission",
            "locker",
            "--prefix=true",
            "readwrite",
            "app/",
        ],
        &["user", "add", "alice", "--new-user-password=al1cepw"],
        &["user", "grant-role", "alice", "locker"],
    ] {
        etcdctl(hosts, &[&root[..], args].concat());
    }
    root
}

/// etcd forgets an auth token unused for its TTL (`--auth-token-ttl`, here 1 s) and checks
/// every watch created on a stream against the token the stream was opened with. A client
/// idle past that still watches what it holds: its next call gets a new token, the watch
/// of its next grant goes on a stream opened with it, and a deletion of the grant's key
/// (`etcdctl del`) turns the guard `Lost`.
#[test]
fn a_client_idle_past_its_auth_token_still_watches_what_it_holds() {
    distlock_testkit::block_on(async {
        let server = distlock_testkit::etcd_server_with(&["--auth-token-ttl", "1"])
            .unwrap_or_else(|e| panic!("{e}"));
        let hosts = server.addr().to_string();
        let root = alice_may_lock_under_app(&hosts);
        let alice = distlock::Client::connect(&format!("etcd://alice:al1cepw@{hosts}/app"))
            .await
            .unwrap();
        // Its grant's watch opens the client's watch stream.
        let first = alice.mutex("first").lock().await.unwrap();
        tokio::time::sleep(Duration::from_millis(2500)).await;
        let second = alice.mutex("second").lock().await.unwrap();
        tokio::time::sleep(Duration::from_millis(500)).await;
        etcdctl(
            &hosts,
            &[&root[..], &["del", "--prefix", "app/second/"]].concat(),
        );
        tokio::time::timeout(Duration::from_secs(5), second.lost())
            .await
            .expect("the deletion is seen: the grant is watched");
        first.release().await.unwrap();
    });
}

/// On an etcd with auth enabled: a user whose role may read and write the URL's prefix
/// locks there; a wrong password, no credentials, and a prefix the role may not touch are
/// each refused as bad input with a hint, and no output shows a password.
#[test]
fn credentials_are_checked_and_never_shown() {
    distlock_testkit::block_on(async {
        let server = distlock_testkit::etcd_server().unwrap_or_else(|e| panic!("{e}"));
        let hosts = server.addr().to_string();
        alice_may_lock_under_app(&hosts);

        let alice = distlock::Client::connect(&format!("etcd://alice:al1cepw@{hosts}/app"))
            .await
            .unwrap();
        let guard = alice.mutex("jobs/x").lock().await.unwrap();
        assert_eq!(
            alice.status(Some("jobs/x")).await.unwrap()[0].holders.len(),
            1
        );
        guard.release().await.unwrap();

        let wrong = distlock::Client::connect(&format!("etcd://alice:wr0ng@{hosts}/app"))
            .await
            .unwrap_err();
        assert_eq!(wrong.kind(), distlock::ErrorKind::InvalidInput, "{wrong}");
        let outside = distlock::Client::connect(&format!("etcd://alice:al1cepw@{hosts}/other"))
            .await
            .unwrap();
        let anonymous = distlock::Client::connect(&format!("etcd://{hosts}/app"))
            .await
            .unwrap();
        let mut refused = vec![wrong];
        for client in [&outside, &anonymous] {
            let err = client.mutex("jobs/x").try_lock().await.unwrap_err();
            assert_eq!(err.kind(), distlock::ErrorKind::InvalidInput, "{err}");
            refused.push(err);
        }
        for err in refused {
            let shown = format!("{err} {err:?}");
            for secret in ["al1cepw", "wr0ng", "r00tpw"] {
                assert!(!shown.contains(secret), "{shown}");
            }
        }
    });
}

/// What `etcdctl txn` prints for the transaction `script` (its condition, success and
/// failure requests, each block ended by an empty line), given on its standard input.
fn etcdctl_txn(endpoint: &str, script: &str) -> String {
    use std::io::Write;
    let mut etcdctl = std::process::Command::new("etcdctl")
        .args(["--endpoints", endpoint, "txn"])
        .env("ETCDCTL_API", "3")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("etcdctl runs");
    let mut stdin = etcdctl.stdin.take().unwrap();
    stdin.write_all(script.as_bytes()).unwrap();
    drop(stdin);
    let out = etcdctl.wait_with_output().unwrap();
    assert!(out.status.success(), "etcdctl txn failed");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The store's revision: it moves with every write.
async fn revision(endpoint: &str) -> i64 {
    let mut kv = etcd_client::Client::connect([endpoint], None)
        .await
        .unwrap()
        .kv_client();
    let answer = kv.get("revision-probe", None).await.unwrap();
    answer.header().expect("a header").revision()
}

/// A `try_lock` (or `try_write`) on a busy lock is refused after one read: it writes no
/// contender key to delete again, so it costs etcd no write and wakes no watcher. On a free
/// lock it is granted in one write, also where a deeper lock's keys are under its prefix,
/// and on a name in use as a semaphore it is still refused as bad input.
#[test]
fn a_try_on_a_busy_lock_writes_nothing() {
    distlock_testkit::block_on(async {
        let server = distlock_testkit::etcd_server().unwrap_or_else(|e| panic!("{e}"));
        let endpoint = server.addr().to_string();
        let url = format!("etcd://{endpoint}/tries");
        let holder = distlock::Client::connect(&url).await.unwrap();
        let trier = distlock::Client::connect(&url).await.unwrap();
        let held = holder.mutex("busy").lock().await.unwrap();
        let written = holder.rwlock("shared").read().await.unwrap();
        let before = revision(&endpoint).await;
        for _ in 0..5 {
            assert!(trier.mutex("busy").try_lock().await.unwrap().is_none());
            assert!(trier.rwlock("shared").try_write().await.unwrap().is_none());
        }
        assert_eq!(
            revision(&endpoint).await,
            before,
            "busy tries wrote nothing"
        );

        let deeper = holder.mutex("busy/deeper").lock().await.unwrap();
        held.release().await.unwrap();
        let before = revision(&endpoint).await;
        let guard = trier
            .mutex("busy")
            .try_lock()
            .await
            .unwrap()
            .expect("free but for a deeper lock's key");
        assert!(guard.fencing_token() > before as u64);
        assert_eq!(revision(&endpoint).await, before + 1, "one write");
        guard.release().await.unwrap();
        deeper.release().await.unwrap();
        written.release().await.unwrap();

        let permit = holder.semaphore("permits", 2).acquire().await.unwrap();
        let refused = trier.mutex("permits").try_lock().await.unwrap_err();
        assert_eq!(
            refused.kind(),
            distlock::ErrorKind::InvalidInput,
            "{refused}"
        );
        permit.release().await.unwrap();
    });
}

/// A client's waits and its held keys' watches share one watch stream: etcd counts a
/// watcher for each, on one stream for each client, not a stream for each. Every wait
/// still ends in a grant once its lock is released.
#[test]
fn a_clients_watches_share_one_stream() {
    distlock_testkit::block_on(async {
        let server = distlock_testkit::etcd_server().unwrap_or_else(|e| panic!("{e}"));
        let endpoint = server.addr().to_string();
        let url = format!("etcd://{endpoint}/streams");
        let holder = distlock::Client::connect(&url).await.unwrap();
        let waiter = distlock::Client::connect(&url).await.unwrap();
        let names: Vec<String> = (0..8).map(|i| format!("shared/{i}")).collect();
        let mut held = Vec::new();
        for name in &names {
            held.push(holder.mutex(name).lock().await.unwrap());
        }
        let waits: Vec<_> = names
            .iter()
            .map(|name| {
                let (waiter, name) = (waiter.clone(), name.clone());
                tokio::spawn(async move {
                    waiter
                        .mutex(&name)
                        .lock_timeout(Duration::from_secs(30))
                        .await
                })
            })
            .collect();
        let (streams, watchers) = watch_counts_once(server.addr(), |(_, w)| w >= 16).await;
        assert_eq!(watchers, 16, "a watcher for each held key and each wait");
        assert_eq!(streams, 2, "one stream for each client");
        for guard in held {
            guard.release().await.unwrap();
        }
        for wait in waits {
            let guard = wait.await.unwrap().expect("granted once released");
            guard.release().await.unwrap();
        }
        // Every watch let go of is cancelled on etcd: none is left behind.
        let (_, watchers) = watch_counts_once(server.addr(), |(_, w)| w == 0).await;
        assert_eq!(watchers, 0, "watchers left on etcd");
    });
}

/// etcd's watch counts once `reached` holds of them, or as they are after 10 s.
async fn watch_counts_once(
    endpoint: std::net::SocketAddr,
    reached: impl Fn((u64, u64)) -> bool,
) -> (u64, u64) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let counts = distlock_testkit::etcd_watch_counts(endpoint).expect("etcd's metrics");
        if reached(counts) || Instant::now() > deadline {
            return counts;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// An observer hears of each change of leader from etcd's watches, not only from its
/// polling.
#[test]
fn observers_are_told_of_each_change_by_etcds_watches() {
    distlock_testkit::block_on(async {
        let server = distlock_testkit::etcd_server().unwrap_or_else(|e| panic!("{e}"));
        let url = format!("etcd://{}/observed", server.addr());
        distlock_testkit::observers_hear_each_change_within_a_second(&url).await;
    });
}
