//! The `distlock` command on Redis: run, status, demo and bench against a real server.

use std::process::Command;

use serde_json::Value;

mod common;
mod deadlines;
mod elected;
mod frozen;
mod groups;
mod guarded;
mod min_ttl;
mod waits;

use common::{distlock, ok};
use groups::{Group, alive_in_group_after};

/// With the shop in Redis, every strategy that keeps the stock sells exactly the stock —
/// distlock's lock and segments, WATCH/MULTI, DECR given back below zero, the script — and
/// the shop's keys are gone afterwards; a strategy of SQL shops is refused, naming those
/// that apply.
#[test]
fn demo_sells_exactly_the_stock_from_a_shop_in_redis() {
    let redis = distlock_testkit::redis_server().unwrap_or_else(|e| panic!("{e}"));
    let url = format!("redis://{}/0", redis.addr());
    let shop = format!("redis://{}/1", redis.addr());
    let state = tempfile::tempdir().unwrap();
    let demo = [
        "demo",
        "--json",
        "--shop",
        &shop,
        "--stock",
        "30",
        "--buyers",
        "90",
        "--workers",
        "3",
    ];
    let rows = common::json_lines(&ok(&distlock(&url, state.path(), &demo)));
    let strategies: Vec<_> = rows
        .iter()
        .map(|r| r["strategy"].as_str().unwrap())
        .collect();
    assert_eq!(
        strategies,
        [
            "none",
            "local-mutex",
            "optimistic",
            "lock",
            "segmented",
            "redis-decr",
            "atomic-script"
        ]
    );
    for row in rows
        .iter()
        .filter(|r| !matches!(r["strategy"].as_str(), Some("none" | "local-mutex")))
    {
        assert_eq!(row["orders"], 30, "{row}");
        assert_eq!(row["oversold"], 0, "{row}");
        assert_eq!(row["stock_left"], 0, "{row}");
    }
    let mut connection = redis::Client::open(shop.as_str())
        .unwrap()
        .get_connection()
        .unwrap();
    let left: Vec<String> = redis::cmd("KEYS")
        .arg("distlock:demo:*")
        .query(&mut connection)
        .unwrap();
    assert!(left.is_empty(), "the shop's keys stay: {left:?}");

    let refused = distlock(
        &url,
        state.path(),
        &[
            "demo",
            "--shop",
            &shop,
            "--strategies",
            "lock,select-for-update",
        ],
    );
    assert_eq!(refused.status.code(), Some(64));
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(
        said.contains("select-for-update") && said.contains("atomic-script"),
        "{said}"
    );
}

#[test]
fn run_status_demo_and_bench_work_on_redis() {
    let redis = distlock_testkit::redis_server().unwrap_or_else(|e| panic!("{e}"));
    let url = format!("redis://{}/0", redis.addr());
    let state = tempfile::tempdir().unwrap();

    guarded::runs_guard_commands(&url, state.path());
    guarded::at_least_keeps_the_lock_after_the_command(&url, state.path(), true);
    guarded::once_per_skips_a_run_too_soon(&url, state.path());
    guarded::demo_never_oversells(&url, state.path());

    let out = distlock(
        &url,
        state.path(),
        &[
            "bench",
            "--json",
            "--clients",
            "4",
            "--duration",
            "300ms",
            "--new-names",
        ],
    );
    let report: Value = serde_json::from_str(&ok(&out)).unwrap();
    assert_eq!(report["backend"], "redis");
    assert_eq!(report["floor"]["op"], "PING");
    assert!(report["contended"]["transfers_per_s"].as_f64().unwrap() > 0.0);
    let uncontended = &report["uncontended"];
    assert!(
        uncontended["minimal_cycle_op"]
            .as_str()
            .unwrap()
            .contains("SET NX PX")
    );
    let minimal = uncontended["minimal_cycle_p50_us"].as_f64().unwrap();
    let ratio = uncontended["p50_vs_minimal_cycle_p50"].as_f64().unwrap();
    assert!(minimal > 0.0 && ratio > 0.0, "{uncontended}");
    let new_names = &uncontended["new_names"];
    for figure in ["cycles_per_s", "p50_us", "cycles_vs_minimal_cycles"] {
        let value = new_names[figure].as_f64().unwrap_or(0.0);
        assert!(value > 0.0, "{figure} in {uncontended}");
    }
    for kind in ["minimal", "same-name", "new-names"] {
        let args = ["bench", "--cycles-of", kind, "--cycles", "50"];
        let said = ok(&distlock(&url, state.path(), &args));
        assert!(said.starts_with(&format!("50 {kind} cycles in ")), "{said}");
    }
    assert_no_bench_key_left(&redis, "a bench that ran to its end");

    let out = distlock(
        &url,
        state.path(),
        &[
            "bench",
            "--json",
            "--duration",
            "200ms",
            "--runtime",
            "current-thread",
        ],
    );
    let report: Value = serde_json::from_str(&ok(&out)).unwrap();
    assert_eq!(report["runtime"], "current-thread");
    assert!(
        report["uncontended"]["p50_vs_minimal_cycle_p50"]
            .as_f64()
            .unwrap()
            > 0.0
    );
}

/// Ctrl-C (and SIGTERM, SIGHUP) while `distlock run` waits: it withdraws its request before
/// it exits, so no queue entry is left behind.
#[test]
fn a_run_interrupted_while_it_waits_leaves_no_queue_entry() {
    let redis = distlock_testkit::redis_server().unwrap_or_else(|e| panic!("{e}"));
    let url = format!("redis://{}/0", redis.addr());
    let state = tempfile::tempdir().unwrap();
    waits::interrupted_waits_leave_no_queue_entry(&url, state.path());
}

/// The same with `--fair` on Redisson's layout: the interrupted waiter leaves Redisson's
/// fair queue (which `status` shows, Java's waiters included) before it exits.
#[test]
fn a_fair_run_interrupted_while_it_waits_leaves_redissons_queue() {
    let redis = distlock_testkit::redis_server().unwrap_or_else(|e| panic!("{e}"));
    let url = format!("redis://{}/0?layout=redisson", redis.addr());
    let state = tempfile::tempdir().unwrap();
    waits::interrupted_waits_with_flags_leave_no_queue_entry(&url, state.path(), &["--fair"]);
    let mut conn = redis::Client::open(format!("redis://{}/0", redis.addr()))
        .unwrap()
        .get_connection()
        .unwrap();
    let queued: u64 = redis::cmd("LLEN")
        .arg("redisson_lock_queue:{busy}")
        .query(&mut conn)
        .unwrap();
    assert_eq!(queued, 0);
}

/// `distlock run` frozen (SIGSTOP) past its 1 s lease: another run takes the lock with a
/// greater token, and when the first resumes it stops its command and exits lost.
#[test]
fn a_frozen_run_whose_lease_expired_stops_its_command_on_resume() {
    let redis = distlock_testkit::redis_server().unwrap_or_else(|e| panic!("{e}"));
    let url = format!("redis://{}/0", redis.addr());
    let state = tempfile::tempdir().unwrap();
    frozen::a_frozen_run_stops_its_command_on_resume(&url, state.path());
}

/// A server that answers and refuses what the URL asks is bad input (64), not an outage or
/// an internal failure, and the password never shows.
#[test]
fn a_url_the_server_refuses_is_bad_input() {
    let [redis, second, third] = [(); 3].map(|()| {
        distlock_testkit::redis_server_with(&["--requirepass", "s3cret"])
            .unwrap_or_else(|e| panic!("{e}"))
    });
    let state = tempfile::tempdir().unwrap();
    for (url, what) in [
        (
            format!("redis://:wrong-pw@{}/0", redis.addr()),
            "a wrong password",
        ),
        (
            format!("redis://:s3cret@{}/99", redis.addr()),
            "a database index out of range",
        ),
        (
            format!("redis+cluster://:s3cret@{}", redis.addr()),
            "a cluster URL naming a node in no cluster",
        ),
        (
            format!(
                "redlock://:wrong-pw@{},{},{}",
                redis.addr(),
                second.addr(),
                third.addr()
            ),
            "a password every RedLock master refuses",
        ),
    ] {
        let out = distlock(&url, state.path(), &["status"]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(64), "{what}: {stderr}");
        assert!(
            !stderr.contains("wrong-pw") && !stderr.contains("s3cret"),
            "{stderr}"
        );
    }
    let out = distlock(
        &format!("redis://:s3cret@{}/0", redis.addr()),
        state.path(),
        &["status"],
    );
    ok(&out);
}

/// The bench leaves no key behind, its fencing counters included: at most a queue's
/// arrival counter, which expires within seconds.
fn assert_no_bench_key_left(redis: &distlock_testkit::Server, after: &str) {
    let port = redis.addr().port().to_string();
    let cli = |args: &[&str]| {
        let out = Command::new("redis-cli")
            .args(["-p", &port])
            .args(args)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    for key in cli(&["--scan"]).lines().filter(|k| k.contains("bench/")) {
        let ttl_ms: i64 = cli(&["PTTL", key]).trim().parse().unwrap();
        assert!(
            key.ends_with(":seq") && (1..=60_000).contains(&ttl_ms),
            "{after}: {key} is left, for {ttl_ms} ms"
        );
    }
}

/// A bench stopped while its worker processes contend (Ctrl-C from a terminal, which
/// reaches the whole process group; a supervisor's SIGTERM, which reaches the bench alone)
/// stops them, and they release and withdraw what they hold; the bench forgets its names
/// and exits with 128 + the signal's number, leaving no process and no key behind. So
/// does `--cycles-of`.
#[test]
fn an_interrupted_bench_leaves_nothing_behind() {
    let redis = distlock_testkit::redis_server().unwrap_or_else(|e| panic!("{e}"));
    let url = format!("redis://{}/0", redis.addr());
    for (signal, code, whole_group) in [(libc::SIGINT, 130, true), (libc::SIGTERM, 143, false)] {
        let state = tempfile::tempdir().unwrap();
        let errors = state.path().join("stderr");
        let args = ["bench", "--processes", "--clients", "3", "--duration", "2s"];
        let mut command = common::command(&url, state.path(), &args);
        command
            .stdout(std::process::Stdio::null())
            .stderr(std::fs::File::create(&errors).unwrap());
        let mut bench = Group::spawn(command);
        let told = || std::fs::read_to_string(&errors).unwrap_or_default();
        let started = bench.wait_for_alive(4, std::time::Duration::from_secs(30));
        assert!(
            started,
            "signal {signal}: the bench started its workers: {}",
            told()
        );
        // They contend from 1.5 s after they start, for 2 s.
        std::thread::sleep(std::time::Duration::from_millis(2500));
        bench.signal(signal, whole_group);
        let status = bench
            .ended_within(std::time::Duration::from_secs(20))
            .unwrap_or_else(|| panic!("the bench did not end within 20 s of signal {signal}"));
        assert_eq!(status.code(), Some(code), "signal {signal}: {}", told());
        assert!(
            told().contains(&format!("stopped by signal {signal}")),
            "{}",
            told()
        );
        let alive = alive_in_group_after(bench.id(), std::time::Duration::from_secs(5));
        assert_eq!(alive, 0, "signal {signal}: the workers were stopped too");
        assert_no_bench_key_left(&redis, &format!("signal {signal}"));
    }
    // `--cycles-of` too, in the middle of its cycles.
    let state = tempfile::tempdir().unwrap();
    let args = ["bench", "--cycles-of", "new-names", "--cycles", "10000000"];
    let mut command = common::command(&url, state.path(), &args);
    command.stdout(std::process::Stdio::null());
    let mut cycling = Group::spawn(command);
    std::thread::sleep(std::time::Duration::from_millis(1500));
    cycling.signal(libc::SIGINT, true);
    let status = cycling
        .ended_within(std::time::Duration::from_secs(20))
        .expect("the cycles end within 20 s of Ctrl-C");
    assert_eq!(status.code(), Some(130));
    assert_no_bench_key_left(&redis, "--cycles-of stopped by Ctrl-C");
}

/// The worker processes of `bench --processes` and `demo` get the lock URL on stdin: no
/// command line (which `ps` shows every user) holds its password, even while they run.
#[test]
fn no_worker_command_line_holds_the_password() {
    let redis = distlock_testkit::redis_server_with(&["--requirepass", "s3cret-pw"])
        .unwrap_or_else(|e| panic!("{e}"));
    let url = format!("redis://:s3cret-pw@{}/0", redis.addr());
    let state = tempfile::tempdir().unwrap();
    let shop = state.path().join("shop.db").display().to_string();
    let runs: [&[&str]; 3] = [
        &["bench", "--processes", "--clients", "3", "--duration", "1s"],
        &[
            "torture",
            "--duration",
            "2s",
            "--faults",
            "none",
            "--scheme",
            "get-then-del",
        ],
        &[
            "demo",
            "--strategies",
            "lock",
            "--workers",
            "3",
            "--shop",
            &shop,
        ],
    ];
    for args in runs {
        let mut run = std::process::Command::new(env!("CARGO_BIN_EXE_distlock"))
            .env("XDG_STATE_HOME", state.path())
            .env("DISTLOCK_URL", &url)
            .args(args)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let mut workers_seen = 0;
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while run.try_wait().unwrap().is_none() && std::time::Instant::now() < deadline {
            for entry in std::fs::read_dir("/proc").unwrap().flatten() {
                let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
                    continue;
                };
                let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
                assert!(!cmdline.contains("s3cret-pw"), "{cmdline}");
                if cmdline.contains("-worker") && cmdline.contains("distlock") {
                    workers_seen += 1;
                }
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert!(run.wait().unwrap().success(), "{args:?}");
        assert!(workers_seen > 0, "{args:?}: saw the workers run");
    }
}

/// The store gone while the command runs: `run` exits promptly after the command, with the
/// command's code and a warning: the release is given up after 2 s, as the README says (the
/// test allows 1.5 s more for the command's own end and a loaded machine).
#[test]
fn a_store_gone_at_release_time_does_not_hold_up_the_exit() {
    let mut redis = distlock_testkit::redis_server().unwrap_or_else(|e| panic!("{e}"));
    let url = format!("redis://{}/0", redis.addr());
    let state = tempfile::tempdir().unwrap();
    let (started, go) = (state.path().join("started"), state.path().join("go"));
    let script = format!(
        "touch {}; for i in $(seq 400); do [ -e {} ] && exit 0; sleep 0.05; done; exit 9",
        started.display(),
        go.display()
    );
    let run = std::process::Command::new(env!("CARGO_BIN_EXE_distlock"))
        .env("XDG_STATE_HOME", state.path())
        .env_remove("DISTLOCK_URL")
        .env_remove("DISTLOCK_URL_FILE")
        .args(["--url", &url, "run", "--name", "gone", "--ttl", "30s", "--"])
        .args(["sh", "-c", &script])
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !started.exists() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(started.exists(), "the command started");
    redis.kill();
    let ended = std::time::Instant::now();
    std::fs::write(&go, "").unwrap();
    let out = run.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "the command's code: {stderr}");
    assert!(
        ended.elapsed() < std::time::Duration::from_millis(3500),
        "run exited {:?} after the store went and the command ended: {stderr}",
        ended.elapsed()
    );
    assert!(stderr.contains("warning"), "{stderr}");
}

/// A lock another client holds (a redis-py key: its bare token, with a TTL) shows as a
/// foreign holder with its TTL, not with a host, pid and hold time it never recorded;
/// tokens of any length keep the columns aligned.
#[test]
fn status_shows_a_foreign_holder_with_its_ttl() {
    let redis = distlock_testkit::redis_server().unwrap_or_else(|e| panic!("{e}"));
    let url = format!("redis://{}/0", redis.addr());
    let state = tempfile::tempdir().unwrap();
    let set = std::process::Command::new("redis-cli")
        .args([
            "-p",
            &redis.port().to_string(),
            "SET",
            "shared",
            "py-token-1",
            "PX",
            "60000",
        ])
        .output()
        .expect("redis-cli (redis-tools) runs");
    assert!(set.status.success(), "{set:?}");
    let table = ok(&distlock(&url, state.path(), &["status", "shared"]));
    let held = table
        .lines()
        .find(|l| l.contains("held:"))
        .unwrap_or_default();
    assert!(
        held.contains("foreign client (token py-token-1)"),
        "{table}"
    );
    assert!(
        held.contains("ttl left 5") || held.contains("ttl left 6"),
        "{table}"
    );
    assert!(!held.contains("pid 0") && !held.contains("year"), "{table}");
    // A key without a TTL is a lock no time frees: status says so, in JSON too.
    let set = std::process::Command::new("redis-cli")
        .args([
            "-p",
            &redis.port().to_string(),
            "SET",
            "stuck",
            "py-token-2",
        ])
        .output()
        .expect("redis-cli (redis-tools) runs");
    assert!(set.status.success(), "{set:?}");
    let table = ok(&distlock(&url, state.path(), &["status", "stuck"]));
    assert!(table.contains("ttl left no expiry"), "{table}");
    let json = ok(&distlock(
        &url,
        state.path(),
        &["status", "stuck", "--json"],
    ));
    let shown: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(shown[0]["holders"][0]["no_expiry"], true, "{json}");
    assert_eq!(
        shown[0]["holders"][0]["remaining_ms"],
        Value::Null,
        "{json}"
    );
    // `break` frees it: a foreign lock's token is 0.
    let broken = ok(&distlock(
        &url,
        state.path(),
        &["break", "stuck", "--yes", "--token", "0"],
    ));
    assert!(
        broken.contains("broke mutex token 0 of foreign client (token py-token-2)"),
        "{broken}"
    );
    ok(&distlock(
        &url,
        state.path(),
        &["run", "--name", "stuck", "--no-wait", "--", "true"],
    ));
}

/// A run at the shortest TTL it takes holds its lock for ten times its length.
#[test]
fn a_run_at_the_minimum_ttl_holds_its_lock() {
    let redis = distlock_testkit::redis_server().unwrap_or_else(|e| panic!("{e}"));
    let state = tempfile::tempdir().unwrap();
    min_ttl::holds_at_the_minimum_ttl(
        &format!("redis://{}/0", redis.addr()),
        state.path(),
        std::time::Duration::from_secs(1),
    );
}

/// The same on a Redis Cluster and on RedLock's three masters, whose renewals cross
/// several servers.
#[test]
fn a_run_at_the_minimum_ttl_holds_its_lock_on_a_cluster_and_on_redlock() {
    let state = tempfile::tempdir().unwrap();
    let cluster = distlock_testkit::redis_cluster(3, 0).unwrap_or_else(|e| panic!("{e}"));
    min_ttl::holds_at_the_minimum_ttl(
        &cluster.url(),
        state.path(),
        std::time::Duration::from_secs(1),
    );
    let masters: Vec<_> = (0..3)
        .map(|_| distlock_testkit::redis_server().unwrap_or_else(|e| panic!("{e}")))
        .collect();
    let hosts: Vec<String> = masters.iter().map(|m| m.addr().to_string()).collect();
    min_ttl::holds_at_the_minimum_ttl(
        &format!("redlock://{}/0", hosts.join(",")),
        state.path(),
        std::time::Duration::from_secs(1),
    );
}

/// A store that holds, under the lock's key, what distlock cannot read (a hash another
/// program wrote where the lock's string goes) is "any other failure": exit 70, saying what
/// the server answered.
#[test]
fn a_lock_key_another_program_made_a_hash_exits_with_the_software_code() {
    let redis = distlock_testkit::redis_server().unwrap_or_else(|e| panic!("{e}"));
    let url = format!("redis://{}/0", redis.addr());
    let mut conn = redis::Client::open(url.as_str())
        .unwrap()
        .get_connection()
        .unwrap();
    let _: () = redis::cmd("HSET")
        .arg(&["not-a-lock", "field", "value"])
        .query(&mut conn)
        .unwrap();
    let state = tempfile::tempdir().unwrap();
    let out = distlock(
        &url,
        state.path(),
        &["run", "--name", "not-a-lock", "--", "true"],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(70), "{stderr}");
    assert!(stderr.contains("WRONGTYPE"), "{stderr}");
    assert!(
        !stderr.contains("WARN"),
        "no warning above the error: {stderr}"
    );
}

/// A process out of file descriptors is not a store that is down, nor a store it cannot
/// use: never 69 or 64, and the message names the limit to raise. The limit is set low
/// enough for some of the runs to run out as they connect (how many descriptors a run
/// opens first varies by build), on Redis and on the SQLite default (where SQLite says
/// "unable to open database file", or reading the boot id fails, when it runs out).
#[test]
fn running_out_of_file_descriptors_is_blamed_on_the_limit_not_the_store() {
    let redis = distlock_testkit::redis_server().unwrap_or_else(|e| panic!("{e}"));
    let state = tempfile::tempdir().unwrap();
    let sqlite = format!("sqlite://{}/locks.db", state.path().display());
    let mut ran_out = 0;
    // A waiting run does not wait out its --wait for descriptors either: not worth asking
    // again, so not 75.
    let runs = [format!("redis://{}/0", redis.addr()), sqlite]
        .into_iter()
        .flat_map(|url| {
            (6..=24).flat_map(move |limit| {
                [
                    (url.clone(), limit, "status"),
                    (url.clone(), limit, "run --name fds --wait 30s -- true"),
                ]
            })
        });
    for (url, limit, args) in runs {
        let out = Command::new("sh")
            .arg("-c")
            .arg(format!(
                "ulimit -n {limit} && exec \"$0\" --url \"$1\" {args}",
            ))
            .arg(env!("CARGO_BIN_EXE_distlock"))
            .arg(&url)
            .env("XDG_STATE_HOME", state.path())
            .output()
            .expect("sh runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            matches!(out.status.code(), Some(0 | 70)),
            "{url}, limit {limit}, {args}: {stderr}"
        );
        if out.status.code() == Some(70) {
            // SQLite may say only its own words for it, once the descriptors it failed with
            // are given back.
            assert!(
                stderr.contains("file descriptors")
                    || (url.starts_with("sqlite")
                        && stderr.contains("unable to open database file")),
                "{url}, limit {limit}, {args}: {stderr}"
            );
            ran_out += 1;
        }
    }
    assert!(ran_out > 0, "no run ran out of descriptors");
}

/// A lock URL with a password, given in a file (`--url-file`, `DISTLOCK_URL_FILE`): the
/// password is on no command line and in no environment, and the guarded command gets the
/// file's name; given in `DISTLOCK_URL`, it is kept out of the command's environment; given
/// with `--url`, it is warned about. A URL without a password is handed to the command.
#[test]
fn a_password_given_in_a_file_reaches_neither_argv_nor_the_command() {
    use std::os::unix::fs::PermissionsExt;
    let redis = distlock_testkit::redis_server_with(&["--requirepass", "s3cret-pw"])
        .unwrap_or_else(|e| panic!("{e}"));
    let url = format!("redis://:s3cret-pw@{}/0", redis.addr());
    let state = tempfile::tempdir().unwrap();
    let file = state.path().join("lock-url");
    std::fs::write(&file, format!("{url}\n")).unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let binary = env!("CARGO_BIN_EXE_distlock");
    let show_env = |setup: &dyn Fn(&mut Command)| {
        let mut command = Command::new(binary);
        command
            .env("XDG_STATE_HOME", state.path())
            .env_remove("DISTLOCK_URL")
            .env_remove("DISTLOCK_URL_FILE");
        setup(&mut command);
        command
            .args(["run", "--name", "secret", "--", "sh", "-c"])
            .arg("echo \"url=${DISTLOCK_URL-unset} file=${DISTLOCK_URL_FILE-unset}\"")
            .output()
            .expect("distlock runs")
    };
    let by_flag = show_env(&|c| {
        c.arg("--url-file").arg(&file);
    });
    let by_env_file = show_env(&|c| {
        c.env("DISTLOCK_URL_FILE", &file);
    });
    let by_env = show_env(&|c| {
        c.env("DISTLOCK_URL", &url);
    });
    let by_argv = show_env(&|c| {
        c.arg("--url").arg(&url);
    });
    for (out, seen) in [
        (&by_flag, format!("url=unset file={}", file.display())),
        (&by_env_file, format!("url=unset file={}", file.display())),
        (&by_env, "url=unset file=unset".to_owned()),
        (&by_argv, "url=unset file=unset".to_owned()),
    ] {
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(ok(out).trim(), seen, "{stderr}");
        assert!(!stderr.contains("s3cret-pw"), "{stderr}");
    }
    for quiet in [&by_flag, &by_env_file, &by_env] {
        let stderr = String::from_utf8_lossy(&quiet.stderr);
        assert!(!stderr.contains("warning"), "{stderr}");
    }
    let stderr = String::from_utf8_lossy(&by_argv.stderr);
    assert!(
        stderr.contains("--url-file"),
        "a password in argv is warned about: {stderr}"
    );
    // A URL without a password is handed on, whichever way it came: a nested distlock
    // finds the same store, not one the caller's environment names.
    let open_redis = distlock_testkit::redis_server().unwrap_or_else(|e| panic!("{e}"));
    let open = format!("redis://{}/0", open_redis.addr());
    for by_flag in [false, true] {
        let mut command = Command::new(binary);
        command.env("XDG_STATE_HOME", state.path());
        match by_flag {
            true => command
                .env("DISTLOCK_URL", "redis://elsewhere/0")
                .args(["--url", &open]),
            false => command.env("DISTLOCK_URL", &open),
        };
        let out = command
            .args([
                "run",
                "--name",
                "open",
                "--",
                "sh",
                "-c",
                "echo \"$DISTLOCK_URL\"",
            ])
            .output()
            .unwrap();
        assert_eq!(ok(&out).trim(), open);
    }
}

/// `run --shared`, `--exclusive`, `--permits N --of M` and `--max-hold`, on one server and
/// on a cluster.
#[test]
fn runs_take_every_kind_of_lock() {
    let redis = distlock_testkit::redis_server().unwrap_or_else(|e| panic!("{e}"));
    let state = tempfile::tempdir().unwrap();
    guarded::runs_take_every_kind_of_lock(&format!("redis://{}/0", redis.addr()), state.path());
    let cluster = distlock_testkit::redis_cluster(3, 0).unwrap_or_else(|e| panic!("{e}"));
    guarded::runs_take_every_kind_of_lock(&cluster.url(), state.path());
}

/// `run --wait 2s` against a server that never answers, and behind a holder with the
/// server frozen mid-wait: busy (75) within 2.3 s, on one server, a cluster and RedLock.
#[test]
fn a_wait_bounds_connecting_and_every_call() {
    let redis = distlock_testkit::redis_server().unwrap_or_else(|e| panic!("{e}"));
    let holes = deadlines::BlackHoles::new(3);
    let first = holes.addrs().split(',').next().unwrap().to_owned();
    deadlines::bounded_by_the_wait(
        &format!("redis://{}/0", redis.addr()),
        &redis,
        &format!("redis://{first}/0"),
    );
    deadlines::a_store_that_never_answers_is_busy_at_the_wait(&format!("redis+cluster://{first}"));
    deadlines::a_store_that_never_answers_is_busy_at_the_wait(&format!(
        "redlock://{}",
        holes.addrs()
    ));
}

/// `elect` and `leader` on Redis; a frozen `elect --requeue` leads again.
#[test]
fn elect_runs_the_leader_and_leader_shows_it() {
    let redis = distlock_testkit::redis_server().unwrap_or_else(|e| panic!("{e}"));
    let url = format!("redis://{}/0", redis.addr());
    let state = tempfile::tempdir().unwrap();
    elected::elect_leads_and_leader_shows_it(&url, state.path());
    elected::requeued_leader_runs_again_after_a_loss(
        &url,
        state.path(),
        std::time::Duration::from_secs(1),
    );
}
