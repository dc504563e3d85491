//! `distlock status`, `demo` and `bench` as users run them.

use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::Value;

mod groups;

use groups::{Group, alive_in_group, alive_in_group_after};

fn distlock(state: &Path, args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_distlock"))
        .env("XDG_STATE_HOME", state)
        .env_remove("DISTLOCK_URL")
        .env_remove("DISTLOCK_URL_FILE")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("distlock runs");
    assert!(
        out.status.success(),
        "distlock {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

fn json_lines(text: &str) -> Vec<Value> {
    text.lines()
        .map(|l| serde_json::from_str(l).expect("one JSON object per line"))
        .collect()
}

#[test]
fn demo_shows_overselling_without_a_lock_and_none_with_one() {
    let state = tempfile::tempdir().unwrap();
    let (_, out) = distlock(
        state.path(),
        &[
            "demo",
            "--json",
            "--stock",
            "30",
            "--buyers",
            "90",
            "--workers",
            "3",
        ],
    );
    let rows = json_lines(&out);
    let by = |name: &str| rows.iter().find(|r| r["strategy"] == name).unwrap().clone();
    for strategy in ["none", "local-mutex"] {
        assert!(
            by(strategy)["oversold"].as_i64().unwrap() > 0,
            "{strategy} oversells: {out}"
        );
    }
    for strategy in ["optimistic", "select-for-update", "lock"] {
        let row = by(strategy);
        assert_eq!(row["oversold"], 0, "{strategy}: {out}");
        assert_eq!(row["orders"], 30, "{strategy}: {out}");
        assert_eq!(row["stock_left"], 0, "{strategy}: {out}");
        assert!(row["buys_per_s"].as_f64().unwrap() > 0.0);
    }
    assert!(by("optimistic")["retries"].as_u64().unwrap() > 0);
    // The shop file the demo made beside the lock file is gone.
    if let Some(left) = shop_file_under(state.path()) {
        panic!("{} is left", left.display());
    }
}

/// Whether a file named `shop.db…` is anywhere under `dir`.
fn shop_file_under(dir: &Path) -> Option<std::path::PathBuf> {
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(dir).unwrap().flatten() {
            if entry.file_name().to_string_lossy().starts_with("shop.db") {
                return Some(entry.path());
            }
            if entry.path().is_dir() {
                dirs.push(entry.path());
            }
        }
    }
    None
}

/// A demo in a process group of its own (see [`Group`]) with stock and buyers for minutes,
/// its state in `state` and its errors in `errors` (a file: a pipe would stay open while
/// workers it left behind run), once it has made its shop.
fn selling_demo(state: &Path, errors: &Path) -> Group {
    let mut command = Command::new(env!("CARGO_BIN_EXE_distlock"));
    command
        .env("XDG_STATE_HOME", state)
        .env_remove("DISTLOCK_URL")
        .env_remove("DISTLOCK_URL_FILE")
        .args(["demo", "--stock", "1000000", "--buyers", "1000000"])
        .args(["--workers", "2", "--strategies", "lock"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(errors).unwrap());
    let demo = Group::spawn(command);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
    while shop_file_under(state).is_none() {
        assert!(
            std::time::Instant::now() < deadline,
            "the demo made its shop"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    demo
}

/// Ctrl-C in the middle of the demo (SIGINT to its whole process group, as a terminal
/// sends it, workers included) or a supervisor's SIGTERM (to the demo alone) stops its
/// workers and still removes the shop it made, and the exit code says which signal ended
/// it. The workers release the lock they sold under as they stop: the next run finds it
/// free at once, not after its TTL.
#[test]
fn an_interrupted_demo_leaves_no_shop_behind() {
    for (signal, code, whole_group) in [(libc::SIGINT, 130, true), (libc::SIGTERM, 143, false)] {
        let state = tempfile::tempdir().unwrap();
        let errors = state.path().join("stderr");
        let mut demo = selling_demo(state.path(), &errors);
        let group = demo.id();
        // Its workers are buying by now.
        std::thread::sleep(std::time::Duration::from_millis(1500));
        assert!(
            demo.wait_for_alive(3, std::time::Duration::ZERO),
            "the demo and its workers run"
        );
        demo.signal(signal, whole_group);
        let status = demo
            .ended_within(std::time::Duration::from_secs(15))
            .unwrap_or_else(|| panic!("the demo did not end within 15 s of signal {signal}"));
        assert_eq!(
            status.code(),
            Some(code),
            "signal {signal}: {}",
            std::fs::read_to_string(&errors).unwrap_or_default()
        );
        if let Some(left) = shop_file_under(state.path()) {
            panic!("signal {signal}: {} is left", left.display());
        }
        assert_eq!(
            alive_in_group_after(group, std::time::Duration::from_secs(5)),
            0,
            "signal {signal}: the workers were stopped too"
        );
        let next = Command::new(env!("CARGO_BIN_EXE_distlock"))
            .env("XDG_STATE_HOME", state.path())
            .env_remove("DISTLOCK_URL")
            .env_remove("DISTLOCK_URL_FILE")
            .args([
                "run",
                "--name",
                "demo/shop/product-1",
                "--no-wait",
                "--",
                "true",
            ])
            .output()
            .unwrap();
        assert_eq!(
            next.status.code(),
            Some(0),
            "signal {signal}: the demo's lock is free: {}",
            String::from_utf8_lossy(&next.stderr)
        );
    }
}

/// A demo stopped while `lock` sells still tells the strategies that ran before it: their
/// rows, which wait for `lock`'s to be told beside it, come out without it.
#[test]
fn a_stopped_demo_still_tells_what_ran_before_it() {
    let state = tempfile::tempdir().unwrap();
    let out = state.path().join("stdout");
    let mut demo = Command::new(env!("CARGO_BIN_EXE_distlock"))
        .env("XDG_STATE_HOME", state.path())
        .env_remove("DISTLOCK_URL")
        .env_remove("DISTLOCK_URL_FILE")
        .args(["demo", "--json", "--strategies", "none,lock"])
        .args(["--stock", "1500", "--buyers", "1500", "--workers", "2"])
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(Stdio::null())
        .spawn()
        .expect("distlock runs");
    // `none` sells its 1500 in well under a second; `lock` takes many.
    std::thread::sleep(std::time::Duration::from_secs(5));
    // SAFETY: kill(2) has no memory-safety preconditions.
    unsafe { libc::kill(demo.id() as i32, libc::SIGTERM) };
    let status = demo.wait().unwrap();
    assert_eq!(status.code(), Some(143));
    let printed = std::fs::read_to_string(&out).unwrap();
    let rows = json_lines(&printed);
    assert_eq!(rows.len(), 1, "{printed}");
    assert_eq!(rows[0]["strategy"], "none", "{printed}");
    assert!(rows[0].get("vs_lock").is_none(), "{printed}");
}

/// A demo killed outright (SIGKILL, which it cannot catch) takes its workers with it: none
/// goes on buying from the shop, where it would spoil the next demo's figures.
#[test]
fn a_demo_killed_outright_takes_its_workers_with_it() {
    let state = tempfile::tempdir().unwrap();
    let errors = state.path().join("stderr");
    let mut demo = selling_demo(state.path(), &errors);
    let group = demo.id();
    // The workers are buying by now.
    std::thread::sleep(std::time::Duration::from_millis(1500));
    assert!(alive_in_group(group) >= 3, "the demo and its workers run");
    demo.0.kill().unwrap();
    let _ = demo.0.wait();
    assert_eq!(
        alive_in_group_after(group, std::time::Duration::from_secs(5)),
        0,
        "no worker outlived the demo"
    );
}

/// A second demo on the shop a first one sells from is refused at once (75), saying why,
/// and leaves the first one's sale and shop alone; once the first has ended, a demo runs.
#[test]
fn a_second_demo_on_the_same_shop_is_refused_and_harms_nothing() {
    let state = tempfile::tempdir().unwrap();
    let errors = state.path().join("stderr");
    let mut first = selling_demo(state.path(), &errors);
    let second = Command::new(env!("CARGO_BIN_EXE_distlock"))
        .env("XDG_STATE_HOME", state.path())
        .env_remove("DISTLOCK_URL")
        .env_remove("DISTLOCK_URL_FILE")
        .args([
            "demo",
            "--stock",
            "5",
            "--buyers",
            "10",
            "--strategies",
            "none",
        ])
        .stdin(Stdio::null())
        .output()
        .expect("distlock runs");
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert_eq!(second.status.code(), Some(75), "{stderr}");
    assert!(stderr.contains("another demo holds the shop"), "{stderr}");
    assert!(
        shop_file_under(state.path()).is_some(),
        "the first demo's shop is still there"
    );
    assert!(
        first.0.try_wait().unwrap().is_none(),
        "the first demo sells on"
    );
    first.signal(libc::SIGTERM, false);
    let status = first.0.wait().unwrap();
    assert_eq!(
        status.code(),
        Some(143),
        "{}",
        std::fs::read_to_string(&errors).unwrap_or_default()
    );
    let (_, out) = distlock(
        state.path(),
        &[
            "demo",
            "--json",
            "--stock",
            "5",
            "--buyers",
            "10",
            "--strategies",
            "none",
        ],
    );
    assert_eq!(
        json_lines(&out).len(),
        1,
        "a demo runs once the first has ended"
    );
}

#[test]
fn status_lists_nothing_then_json() {
    let state = tempfile::tempdir().unwrap();
    let (_, out) = distlock(state.path(), &["status"]);
    assert!(out.contains("no locks"));
    let (_, out) = distlock(state.path(), &["status", "some/lock", "--json"]);
    let states: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(states[0]["name"], "some/lock");
    assert_eq!(states[0]["holders"].as_array().unwrap().len(), 0);
}

fn check_bench(report: &Value, processes: bool) {
    for (section, fields) in [
        (
            "floor",
            &["p50_us", "ops_per_s", "concurrent_ops_per_s"][..],
        ),
        ("uncontended", &["cycles_per_s", "p50_us", "p99_us"][..]),
        (
            "contended",
            &[
                "acquisitions_per_s",
                "transfers_per_s",
                "wait_p50_us",
                "wait_p99_us",
                "per_client_max",
            ][..],
        ),
        ("many_names", &["cycles_per_s"][..]),
    ] {
        for field in fields {
            let v = report[section][field].as_f64();
            assert!(v.is_some_and(|v| v > 0.0), "{section}.{field} in {report}");
        }
    }
    assert!(report["floor"]["op"].is_string());
    assert_eq!(report["contended"]["processes"], processes);
    assert_eq!(report["contended"]["clients"], 4);
    assert_eq!(report["many_names"]["tasks"], 4);
    assert!(report["contended"]["per_client_min"].is_u64());
}

/// `distlock [global…] bench --json --clients 4 [extra…]`, parsed.
fn bench_report(state: &Path, global: &[&str], extra: &[&str]) -> Value {
    let quick = ["bench", "--json", "--clients", "4"];
    let args: Vec<&str> = global.iter().chain(&quick).chain(extra).copied().collect();
    let (_, out) = distlock(state, &args);
    serde_json::from_str(&out).unwrap()
}

#[test]
fn bench_reports_every_figure_beside_the_floor() {
    let state = tempfile::tempdir().unwrap();
    let report = bench_report(
        state.path(),
        &["--url", "memory://"],
        &["--duration", "300ms", "--runs", "2"],
    );
    check_bench(&report, false);
    assert_eq!(
        report["runs"], 2,
        "figures are medians of the runs asked for"
    );
    // Worker processes start together 1.5 s after they are spawned; on a loaded machine
    // one may still be late, so they get longer than the in-process clients to meet.
    let report = bench_report(state.path(), &[], &["--processes", "--duration", "2s"]);
    check_bench(&report, true);
    assert_eq!(report["backend"], "sqlite");
    // It forgot the fencing counters of its locks.
    let db = state.path().join("distlock/locks.db");
    let left: i64 = distlock_testkit::block_on(async {
        let url = format!("sqlite://{}", db.display());
        let mut db = <sqlx::SqliteConnection as sqlx::Connection>::connect(&url)
            .await
            .unwrap();
        sqlx::query_scalar("SELECT COUNT(*) FROM distlock_fence WHERE name LIKE 'bench/%'")
            .fetch_one(&mut db)
            .await
            .unwrap()
    });
    assert_eq!(left, 0, "no bench counter is left in {}", db.display());
}

/// The table names how its figures were taken: "one run", "medians of 3 runs".
#[test]
fn the_bench_table_says_how_many_runs_its_figures_come_from() {
    let state = tempfile::tempdir().unwrap();
    for (runs, says) in [("1", "one run of"), ("3", "medians of 3 runs of")] {
        let (_, out) = distlock(
            state.path(),
            &[
                "--url",
                "memory://",
                "bench",
                "--clients",
                "2",
                "--duration",
                "100ms",
                "--runs",
                runs,
            ],
        );
        assert!(out.contains(says), "{out}");
        assert!(!out.contains("1 runs"), "{out}");
    }
}

#[test]
fn bench_refuses_what_it_cannot_measure_with_a_usage_code() {
    let state = tempfile::tempdir().unwrap();
    let bench = |extra: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_distlock"))
            .env("XDG_STATE_HOME", state.path())
            .env_remove("DISTLOCK_URL")
            .env_remove("DISTLOCK_URL_FILE")
            .args(["--url", "memory://", "bench"])
            .args(extra)
            .stdin(Stdio::null())
            .output()
            .expect("distlock runs")
    };
    for (extra, code, said) in [
        (
            &["--duration", "300000000000y"][..],
            64,
            "--duration must be",
        ),
        (&["--duration", "1ns"][..], 64, "--duration must be"),
        (&["--processes", "--clients", "5000"][..], 64, "at most 256"),
        (&["--clients", "0"][..], 64, "--clients"),
        (&["--runtime", "fibers"][..], 64, "--runtime"),
    ] {
        let out = bench(extra);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{extra:?}: {stderr}");
        assert!(stderr.contains(said), "{extra:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
}
