//! What `distlock run`, `status` and `demo` must do on every backend, checked the
//! same way on each.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::{command, distlock, json_lines, ok};
use crate::waits::read_when_written;

/// The exit code of a run that did not wait for a held lock.
const BUSY: i32 = 75;
/// The exit code of a run whose lock was lost, or held to its `--max-hold`.
const LOST: i32 = 76;

/// Two runs in a row get growing fencing tokens; while a third holds `jobs/held`, status
/// shows its process and a run that does not wait exits busy; SIGTERM reaches the held
/// command. Returns the holder as `status --json` showed it.
pub fn runs_guard_commands(url: &str, state: &Path) -> Value {
    let tokens: Vec<u64> = (0..2)
        .map(|_| {
            let run = [
                "run",
                "--name",
                "jobs/x",
                "--",
                "sh",
                "-c",
                "echo $DISTLOCK_FENCING_TOKEN",
            ];
            ok(&distlock(url, state, &run)).trim().parse().unwrap()
        })
        .collect();
    assert!(tokens[0] < tokens[1], "{tokens:?}");

    let holder = hold(url, state, &["--name", "jobs/held"]);
    let out = distlock(url, state, &["status", "jobs/held", "--json"]);
    let shown: Value = serde_json::from_str(&ok(&out)).unwrap();
    let held = shown[0]["holders"][0].clone();
    assert_eq!(held["meta"]["pid"], holder.id());
    let busy = distlock(
        url,
        state,
        &["run", "--name", "jobs/held", "--no-wait", "--", "true"],
    );
    assert_eq!(busy.status.code(), Some(BUSY));
    end(holder);
    held
}

/// A `distlock run` with `lock` (its name and kind) holding its lock, its command started.
fn hold(url: &str, state: &Path, lock: &[&str]) -> Child {
    let started = state.join(format!("started-{}", lock.join("-").replace('/', "-")));
    // Left by an earlier holder of the same lock.
    let _ = std::fs::remove_file(&started);
    let holder = Command::new(env!("CARGO_BIN_EXE_distlock"))
        .env("XDG_STATE_HOME", state)
        .args(["--url", url, "run"])
        .args(lock)
        .args(["--", "sh", "-c"])
        .arg(format!("echo go > {}; exec sleep 30", started.display()))
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    assert_eq!(read_when_written(&started), "go", "{lock:?} is held");
    holder
}

/// Ends a holder from [`hold`] with SIGTERM, which reaches its command.
fn end(mut holder: Child) {
    distlock_testkit::send(holder.id(), distlock_testkit::Signal::Terminate);
    assert_eq!(
        holder.wait().unwrap().code(),
        Some(128 + 15),
        "SIGTERM reached the command"
    );
}

/// `run --shared` and `--exclusive` (readers together, a writer alone), `--permits N --of
/// M` (at most M permits at once), `--max-hold` (the command stopped at the limit, 76).
pub fn runs_take_every_kind_of_lock(url: &str, state: &Path) {
    let no_wait = |lock: &[&str]| {
        let mut args = vec!["run"];
        args.extend_from_slice(lock);
        args.extend_from_slice(&["--no-wait", "--", "true"]);
        distlock(url, state, &args)
    };
    let reader = hold(url, state, &["--name", "kinds/rw", "--shared"]);
    ok(&no_wait(&["--name", "kinds/rw", "--shared"]));
    let writer = no_wait(&["--name", "kinds/rw", "--exclusive"]);
    assert_eq!(
        writer.status.code(),
        Some(BUSY),
        "a writer waits for readers"
    );
    end(reader);
    let writer = hold(url, state, &["--name", "kinds/rw", "--exclusive"]);
    let reader = no_wait(&["--name", "kinds/rw", "--shared"]);
    assert_eq!(
        reader.status.code(),
        Some(BUSY),
        "readers wait for a writer"
    );
    end(writer);

    let two = hold(
        url,
        state,
        &["--name", "kinds/pool", "--permits", "2", "--of", "3"],
    );
    ok(&no_wait(&["--name", "kinds/pool", "--of", "3"]));
    let more = no_wait(&["--name", "kinds/pool", "--permits", "2", "--of", "3"]);
    assert_eq!(more.status.code(), Some(BUSY), "2 + 2 permits of 3");
    end(two);

    let started = std::time::Instant::now();
    let capped = distlock(
        url,
        state,
        &[
            "run",
            "--name",
            "kinds/capped",
            "--max-hold",
            "1s",
            "--",
            "sleep",
            "30",
        ],
    );
    assert_eq!(
        capped.status.code(),
        Some(LOST),
        "{}",
        String::from_utf8_lossy(&capped.stderr)
    );
    assert!(
        started.elapsed() < std::time::Duration::from_secs(15),
        "stopped at --max-hold: {:?}",
        started.elapsed()
    );
    break_frees_a_stuck_lock(url, state);
}

/// `break`: a run holding a lock is broken by its token as `status` shows it, its command
/// stopped (76) and the lock free for the next run; a wrong token, a free lock and a break
/// without `--yes` off a terminal break nothing. A PostgreSQL or MySQL session-mode mutex
/// is refused (64), naming the statement that ends its holder's connection.
fn break_frees_a_stuck_lock(url: &str, state: &Path) {
    let session_mode = ["postgres", "mysql", "mariadb"]
        .iter()
        .any(|scheme| url.starts_with(scheme))
        && !url.contains("mode=lease");
    let name = "kinds/stuck";
    let holder = hold(url, state, &["--name", name, "--ttl", "3s"]);
    let shown = ok(&distlock(url, state, &["status", "--json", name]));
    let states: Value = serde_json::from_str(&shown).unwrap();
    let token = states[0]["holders"][0]["fencing_token"].as_u64().unwrap();

    let unasked = distlock(url, state, &["break", name]);
    assert_eq!(unasked.status.code(), Some(64), "no --yes off a terminal");
    let wrong = distlock(url, state, &["break", name, "--yes", "--token", "1"]);
    assert_eq!(wrong.status.code(), Some(1), "no holder has token 1");
    assert!(String::from_utf8_lossy(&wrong.stdout).contains("nothing broken"));

    let token_arg = token.to_string();
    let broken = distlock(url, state, &["break", name, "--yes", "--token", &token_arg]);
    if session_mode {
        assert_eq!(broken.status.code(), Some(64));
        let refusal = String::from_utf8_lossy(&broken.stderr);
        assert!(
            refusal.contains("pg_terminate_backend(") || refusal.contains("KILL "),
            "the refusal names the statement that frees the lock: {refusal}"
        );
        end(holder);
        return;
    }
    let said = ok(&broken);
    assert!(
        said.contains(&format!("broke mutex token {token}")),
        "{said}"
    );
    let started = std::time::Instant::now();
    let mut holder = holder;
    assert_eq!(
        holder.wait().unwrap().code(),
        Some(LOST),
        "the broken run stops its command"
    );
    assert!(
        started.elapsed() < std::time::Duration::from_secs(10),
        "the broken run learned of it within its renewal: {:?}",
        started.elapsed()
    );
    ok(&distlock(
        url,
        state,
        &["run", "--name", name, "--no-wait", "--", "true"],
    ));
    let free = distlock(url, state, &["break", name, "--yes"]);
    assert_eq!(free.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&free.stdout).contains("is free"));
}

/// The demo with and without a lock, and with the stock split into segments each under a
/// lock of its own: the locks sell exactly the stock.
pub fn demo_never_oversells(url: &str, state: &Path) {
    let demo = [
        "demo",
        "--json",
        "--strategies",
        "none,lock,segmented",
        "--segments",
        "4",
        "--stock",
        "20",
        "--buyers",
        "60",
        "--workers",
        "3",
    ];
    let rows = json_lines(&ok(&distlock(url, state, &demo)));
    for strategy in ["lock", "segmented"] {
        let row = rows.iter().find(|r| r["strategy"] == strategy).unwrap();
        assert_eq!(row["oversold"], 0, "{row}");
        assert_eq!(row["orders"], 20, "{row}");
        assert_eq!(row["stock_left"], 0, "{row}");
    }
    let segmented = rows.iter().find(|r| r["strategy"] == "segmented").unwrap();
    assert!(segmented["vs_lock"].as_f64().unwrap() > 0.0, "{segmented}");
}

/// `run --at-least 2s` keeps its lock until 2 s after the grant although its command ends
/// at once: a run in between is busy, one after takes it. Where the store keeps the grant
/// (`in_store`) distlock exits with its command; elsewhere it holds the lock until then.
pub fn at_least_keeps_the_lock_after_the_command(url: &str, state: &Path, in_store: bool) {
    let at_least = Duration::from_secs(2);
    let marker = state.join("at-least-ran");
    let spawned = Instant::now();
    let first = command(url, state, &["run", "--name", "jobs/at-least", "--no-wait"])
        .args(["--at-least", "2s", "--", "sh", "-c"])
        .arg(format!("echo ran > {}", marker.display()))
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    assert_eq!(read_when_written(&marker), "ran", "the command ran");
    let ran_at = spawned.elapsed();
    let second = distlock(
        url,
        state,
        &["run", "--name", "jobs/at-least", "--no-wait", "--", "true"],
    );
    assert_eq!(second.status.code(), Some(BUSY), "busy within --at-least");
    let first = first.wait_with_output().unwrap();
    let exited = spawned.elapsed();
    let first_said = String::from_utf8_lossy(&first.stderr);
    assert!(first.status.success(), "{:?}: {first_said}", first.status);
    match in_store {
        true => {
            if exited < ran_at + Duration::from_millis(1_500) {
                let third = distlock(
                    url,
                    state,
                    &["run", "--name", "jobs/at-least", "--no-wait", "--", "true"],
                );
                assert_eq!(
                    third.status.code(),
                    Some(BUSY),
                    "the store keeps it after distlock exited"
                );
            }
        }
        false => assert!(
            exited >= at_least,
            "distlock holds it for --at-least: exited after {exited:?}"
        ),
    }
    // Where distlock held the lock, it released it as it exited: free at once, not when
    // the lease or session of the test's store runs out, 2 s (1.5 s for the runs that
    // find it so: a run takes tens of milliseconds).
    let within = match in_store {
        true => Duration::from_secs(20),
        false => Duration::from_millis(1_500),
    };
    let deadline = Instant::now() + within;
    loop {
        let out = distlock(
            url,
            state,
            &["run", "--name", "jobs/at-least", "--no-wait", "--", "true"],
        );
        if out.status.success() {
            break;
        }
        assert_eq!(
            out.status.code(),
            Some(BUSY),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        if Instant::now() >= deadline {
            let held = distlock(url, state, &["status", "jobs/at-least", "--json"]);
            panic!(
                "the lock is free again once --at-least has passed; the run that held it \
                 said: {first_said}; the last try: {}; status: {}",
                String::from_utf8_lossy(&out.stderr),
                String::from_utf8_lossy(&held.stdout)
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        spawned.elapsed() >= at_least,
        "free after {:?}",
        spawned.elapsed()
    );
    let refused = distlock(
        url,
        state,
        &[
            "run",
            "--name",
            "jobs/at-least",
            "--at-least",
            "2m",
            "--max-hold",
            "1m",
            "--",
            "true",
        ],
    );
    assert_eq!(
        refused.status.code(),
        Some(64),
        "--at-least above --max-hold is bad input"
    );
    let refused = distlock(
        url,
        state,
        &[
            "run",
            "--name",
            "jobs/at-least",
            "--at-least",
            "0s",
            "--",
            "true",
        ],
    );
    assert_eq!(
        refused.status.code(),
        Some(64),
        "--at-least 0s is bad input"
    );
    assert!(String::from_utf8_lossy(&refused.stderr).contains("is not from 1ms to 10years"));
}

/// `run --once-per 3s`: a run right after a success is skipped (exit 0, saying when it
/// may run next) without starting its command; a failed command (its code kept) opens no
/// window; once the window has passed the command runs again.
pub fn once_per_skips_a_run_too_soon(url: &str, state: &Path) {
    let count = state.join("once-per-runs");
    let run = |name: &str, script: &str| {
        let script = format!("echo x >> {}; {script}", count.display());
        distlock(
            url,
            state,
            &[
                "run",
                "--name",
                name,
                "--once-per",
                "3s",
                "--",
                "sh",
                "-c",
                &script,
            ],
        )
    };
    let runs = || {
        std::fs::read_to_string(&count)
            .unwrap_or_default()
            .lines()
            .count()
    };
    let started = Instant::now();
    assert!(run("jobs/hourly", "true").status.success());
    assert_eq!(runs(), 1);
    let skipped = run("jobs/hourly", "true");
    let said = String::from_utf8_lossy(&skipped.stderr);
    assert_eq!(skipped.status.code(), Some(0), "{said}");
    assert!(
        said.contains("succeeded less than --once-per 3s ago"),
        "{said}"
    );
    assert!(said.contains("runs again from"), "{said}");
    assert_eq!(runs(), 1, "a skipped run starts no command");

    assert_eq!(
        run("jobs/flaky", "exit 3").status.code(),
        Some(3),
        "the command's code goes on"
    );
    assert_eq!(
        run("jobs/flaky", "true").status.code(),
        Some(0),
        "a failure opens no window"
    );
    assert_eq!(runs(), 3);

    let deadline = Instant::now() + Duration::from_secs(20);
    while runs() < 4 {
        assert!(
            Instant::now() < deadline,
            "the job runs again once --once-per has passed"
        );
        std::thread::sleep(Duration::from_millis(200));
        assert!(run("jobs/hourly", "true").status.success());
    }
    assert!(
        started.elapsed() >= Duration::from_secs(3),
        "ran again after {:?}",
        started.elapsed()
    );
    let refused = distlock(
        url,
        state,
        &["run", "--name", "x", "--once-per", "0s", "--", "true"],
    );
    assert_eq!(refused.status.code(), Some(64));
    let refused = distlock(
        url,
        state,
        &[
            "run",
            "--name",
            "x",
            "--once-per",
            "1m",
            "--shared",
            "--",
            "true",
        ],
    );
    assert_eq!(
        refused.status.code(),
        Some(2),
        "a shared run is no job (clap's usage error)"
    );
}
