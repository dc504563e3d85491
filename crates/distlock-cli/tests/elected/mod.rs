//! What `distlock elect` and `distlock leader` must do on every backend, checked the same
//! way on each.

use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use distlock_testkit::{Signal, send};

use crate::common::{command, distlock, ok};
use crate::waits::read_when_written;

/// The exit code of a campaign whose --wait ran out.
const BUSY: i32 = 75;

/// `elect` runs its command while leading, with its term and identity in the environment;
/// `leader` shows the leader (identity, term, proclaimed value), exit 1 when nobody leads;
/// a second candidate waits, wins with a greater term when the first ends (SIGTERM, which
/// reaches its command), and `leader --watch` prints the change; a campaign past `--wait`
/// exits 75; a bad identity is 64.
pub fn elect_leads_and_leader_shows_it(url: &str, state: &Path) {
    let name = "services/billing";
    let nobody = distlock(url, state, &["leader", name]);
    assert_eq!(nobody.status.code(), Some(1), "nobody leads yet");
    assert!(String::from_utf8_lossy(&nobody.stdout).contains("nobody leads"));

    let first_marker = state.join("elected-first");
    let first = candidate(
        url,
        state,
        &["--identity", "one", "--proclaim", "10.0.0.7:8080"],
        &format!(
            "echo $DISTLOCK_TERM $DISTLOCK_IDENTITY > {}; exec sleep 30",
            first_marker.display()
        ),
    );
    let written = read_when_written(&first_marker);
    let (term, identity) = written.split_once(' ').expect("term and identity");
    let first_term: u64 = term.parse().unwrap();
    assert_eq!(identity, "one");
    let shown: Value =
        serde_json::from_str(&ok(&distlock(url, state, &["leader", name, "--json"]))).unwrap();
    assert_eq!(shown["leader"]["identity"], "one");
    assert_eq!(shown["leader"]["term"], first_term);
    assert_eq!(shown["leader"]["value"], "10.0.0.7:8080");

    let watch_out = state.join("leader-watch");
    let mut watch = command(url, state, &["leader", name, "--watch", "--json"])
        .stdout(std::fs::File::create(&watch_out).unwrap())
        .spawn()
        .unwrap();
    let seen = lines_until(&watch_out, |line| line["leader"]["identity"] == "one");
    assert_eq!(seen.len(), 1, "the watch starts with the leader: {seen:?}");
    let second_marker = state.join("elected-second");
    let second = candidate(
        url,
        state,
        &["--identity", "two"],
        // Leading long enough for the watch, which reads every quarter second, to see it.
        &format!("echo $DISTLOCK_TERM > {}; sleep 2", second_marker.display()),
    );
    let impatient = distlock(
        url,
        state,
        &["elect", "--name", name, "--wait", "300ms", "--", "true"],
    );
    assert_eq!(
        impatient.status.code(),
        Some(BUSY),
        "a campaign past --wait"
    );

    send(first.id(), Signal::Terminate);
    assert_eq!(ended(first), Some(128 + 15), "SIGTERM reached the command");
    let second_term: u64 = read_when_written(&second_marker).parse().unwrap();
    assert!(
        second_term > first_term,
        "terms increase: {second_term} after {first_term}"
    );
    lines_until(&watch_out, |line| line["leader"]["identity"] == "two");
    assert_eq!(ended(second), Some(0), "the command's own code");
    send(watch.id(), Signal::Interrupt);
    assert_eq!(watch.wait().unwrap().code(), Some(128 + 2));

    let bad = distlock(
        url,
        state,
        &["elect", "--name", name, "--identity", "", "--", "true"],
    );
    assert_eq!(bad.status.code(), Some(64), "an empty identity");
}

/// `elect --requeue` whose process is frozen past its lease: thawed, it stops its command
/// (the leadership is lost) and campaigns again, running the command anew under a
/// greater term; frozen again and sent SIGTERM meanwhile, it ends instead.
pub fn requeued_leader_runs_again_after_a_loss(url: &str, state: &Path, ttl: Duration) {
    let terms = state.join("requeued-terms");
    let ttl_arg = humantime::format_duration(ttl).to_string();
    let leader = candidate(
        url,
        state,
        &[
            "--requeue",
            "--ttl",
            &ttl_arg,
            "--name",
            "services/requeued",
        ],
        &format!("echo $DISTLOCK_TERM >> {}; exec sleep 30", terms.display()),
    );
    read_when_written(&terms);
    send(leader.id(), Signal::Stop);
    std::thread::sleep(ttl * 3 / 2 + Duration::from_secs(1));
    send(leader.id(), Signal::Continue);
    let deadline = Instant::now() + Duration::from_secs(20);
    let written = loop {
        let written: Vec<u64> = std::fs::read_to_string(&terms)
            .unwrap_or_default()
            .lines()
            .map(|line| line.trim().parse().unwrap())
            .collect();
        if written.len() >= 2 || Instant::now() >= deadline {
            break written;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(
        written.len(),
        2,
        "the command ran again after the loss: {written:?}"
    );
    assert!(written[1] > written[0], "under a greater term: {written:?}");
    // Asked to end as the leadership is lost (SIGTERM sent while frozen past the lease):
    // it ends, and campaigns no more.
    send(leader.id(), Signal::Stop);
    std::thread::sleep(ttl * 3 / 2 + Duration::from_secs(1));
    send(leader.id(), Signal::Terminate);
    send(leader.id(), Signal::Continue);
    let code = ended(leader);
    assert!(
        matches!(code, Some(76) | Some(143)),
        "lost (76) or ended by the signal (143): {code:?}"
    );
    let runs = std::fs::read_to_string(&terms).unwrap().lines().count();
    assert_eq!(runs, 2, "no term after the signal");
}

/// `distlock elect` for `services/billing` (unless `args` names another) with `args`,
/// running `script`, started in the background.
fn candidate(url: &str, state: &Path, args: &[&str], script: &str) -> Child {
    let mut elect = command(url, state, &["elect"]);
    if !args.contains(&"--name") {
        elect.args(["--name", "services/billing"]);
    }
    elect
        .args(args)
        .args(["--", "sh", "-c", script])
        .stdin(Stdio::null())
        .spawn()
        .unwrap()
}

/// The exit code of `child` (it must end within 20 s).
fn ended(mut child: Child) -> Option<i32> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status.code();
        }
        assert!(Instant::now() < deadline, "the candidate ends");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The JSON lines in `path` once one of them is `wanted` (within 10 s).
fn lines_until(path: &Path, wanted: impl Fn(&Value) -> bool) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        let lines: Vec<Value> = text
            .lines()
            .filter_map(|line| serde_json::from_str(line).ok())
            .collect();
        if lines.iter().any(&wanted) {
            return lines;
        }
        assert!(Instant::now() < deadline, "the watch showed: {text}");
        std::thread::sleep(Duration::from_millis(50));
    }
}
