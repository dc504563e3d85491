//! `run --wait` bounds everything before the grant, checked the same way on every backend:
//! a server that accepts connections and never answers, and a server frozen (SIGSTOP)
//! while the run waits behind a holder, each turn a `--wait 2s` into exit 75 within 2.3 s.

use std::net::TcpListener;
use std::time::{Duration, Instant};

use distlock_testkit::{Server, Signal, send};

use crate::common::command;
use crate::waits::{read_when_written, spawn};

/// The exit code of a run whose wait ran out.
const BUSY: i32 = 75;
/// The wait the runs are given, and the most a run may take with it.
const WAIT: &str = "2s";
const WITHIN: Duration = Duration::from_millis(2300);

/// Listeners that accept connections (the kernel completes them) and never answer.
pub struct BlackHoles(Vec<TcpListener>);

impl BlackHoles {
    /// `count` of them, on free loopback ports.
    pub fn new(count: usize) -> BlackHoles {
        BlackHoles(
            (0..count)
                .map(|_| TcpListener::bind("127.0.0.1:0").expect("a loopback port"))
                .collect(),
        )
    }

    /// Their addresses, `host:port` joined by commas.
    pub fn addrs(&self) -> String {
        let addrs: Vec<String> = self
            .0
            .iter()
            .map(|l| l.local_addr().unwrap().to_string())
            .collect();
        addrs.join(",")
    }
}

/// `run --wait 2s` against `url`, whose store never answers: busy, within 2.3 s.
pub fn a_store_that_never_answers_is_busy_at_the_wait(url: &str) {
    let state = tempfile::tempdir().unwrap();
    let started = Instant::now();
    let out = command(
        url,
        state.path(),
        &["run", "--name", "x", "--wait", WAIT, "--", "true"],
    )
    .output()
    .expect("distlock runs");
    let took = started.elapsed();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(BUSY), "{url}: {stderr}");
    assert!(took < WITHIN, "{url}: took {took:?}: {stderr}");
}

/// `demo`, `bench` and `torture` against `url`, whose store never answers: unavailable
/// (69), each within the 5 s they give a store to connect.
fn demo_bench_and_torture_give_up_connecting(url: &str) {
    let state = tempfile::tempdir().unwrap();
    let runs: [&[&str]; 3] = [
        &[
            "demo",
            "--strategies",
            "lock",
            "--stock",
            "2",
            "--buyers",
            "2",
            "--workers",
            "1",
        ],
        &["bench", "--duration", "100ms"],
        &["torture", "--duration", "1s"],
    ];
    for args in runs {
        let started = Instant::now();
        let out = command(url, state.path(), args)
            .output()
            .expect("distlock runs");
        let took = started.elapsed();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(69), "{args:?} on {url}: {stderr}");
        assert!(
            took < Duration::from_secs(7),
            "{args:?} on {url}: took {took:?}: {stderr}"
        );
    }
}

/// `run --wait 2s` behind a holder on `url`, with `server` frozen 300 ms into the wait:
/// busy, within 2.3 s of the run's start.
pub fn a_store_frozen_mid_wait_is_busy_at_the_wait(url: &str, server: &Server) {
    let state = tempfile::tempdir().unwrap();
    let go = state.path().join("go");
    let script = format!("echo go > {}; exec sleep 30", go.display());
    let holder = spawn(
        url,
        state.path(),
        &["run", "--name", "x", "--", "sh", "-c", &script],
    );
    assert_eq!(read_when_written(&go), "go");
    let started = Instant::now();
    let mut waiter = command(
        url,
        state.path(),
        &["run", "--name", "x", "--wait", WAIT, "--", "true"],
    )
    .stderr(std::process::Stdio::piped())
    .spawn()
    .expect("distlock runs");
    std::thread::sleep(Duration::from_millis(300));
    server.pause();
    // A run that hangs is killed after 20 s, the server thawed first, for the next test.
    let deadline = Instant::now() + Duration::from_secs(20);
    while waiter.try_wait().unwrap().is_none() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    let took = started.elapsed();
    server.resume();
    let _ = waiter.kill();
    let out = waiter.wait_with_output().expect("the waiter ends");
    send(holder.0.id(), Signal::Terminate);
    drop(holder);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(BUSY), "{url}: {stderr}");
    assert!(took < WITHIN, "{url}: took {took:?}: {stderr}");
}

/// Ctrl-C while `run --wait 30s` is still connecting to `url`, whose store never answers:
/// the run ends at once with 130, as it would while waiting for the lock.
pub fn ctrl_c_while_connecting_ends_the_run(url: &str) {
    let state = tempfile::tempdir().unwrap();
    let mut run = command(
        url,
        state.path(),
        &["run", "--name", "x", "--wait", "30s", "--", "true"],
    )
    .stderr(std::process::Stdio::piped())
    .spawn()
    .expect("distlock runs");
    std::thread::sleep(Duration::from_millis(500));
    send(run.id(), Signal::Interrupt);
    let sent = Instant::now();
    while run.try_wait().unwrap().is_none() && sent.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(10));
    }
    let took = sent.elapsed();
    let _ = run.kill();
    let out = run.wait_with_output().expect("the run ends");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{url}: {stderr}");
    assert!(
        took < Duration::from_secs(2),
        "{url}: took {took:?} after Ctrl-C"
    );
}

/// All of the above: the frozen server `server` at `url`, the black hole at
/// `black_hole_url`.
pub fn bounded_by_the_wait(url: &str, server: &Server, black_hole_url: &str) {
    a_store_that_never_answers_is_busy_at_the_wait(black_hole_url);
    demo_bench_and_torture_give_up_connecting(black_hole_url);
    ctrl_c_while_connecting_ends_the_run(black_hole_url);
    a_store_frozen_mid_wait_is_busy_at_the_wait(url, server);
}
