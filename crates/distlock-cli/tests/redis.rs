//! The `distlock` command on Redis: run, status, demo and bench against a real server.

use std::process::{Command, Stdio};

use serde_json::Value;

mod common;

use common::{distlock, json_lines, ok};

#[test]
fn run_status_demo_and_bench_work_on_redis() {
    let redis = distlock_testkit::redis_server().unwrap_or_else(|e| panic!("{e}"));
    let url = format!("redis://{}/0", redis.addr());
    let state = tempfile::tempdir().unwrap();

    let tokens: Vec<u64> = (0..2)
        .map(|_| {
            let out = distlock(
                &url,
                state.path(),
                &[
                    "run",
                    "--name",
                    "jobs/x",
                    "--",
                    "sh",
                    "-c",
                    "echo $DISTLOCK_FENCING_TOKEN",
                ],
            );
            ok(&out).trim().parse().unwrap()
        })
        .collect();
    assert!(tokens[0] < tokens[1], "{tokens:?}");

    let started = state.path().join("started");
    let mut holder = Command::new(env!("CARGO_BIN_EXE_distlock"))
        .args([
            "--url",
            &url,
            "run",
            "--name",
            "jobs/held",
            "--",
            "sh",
            "-c",
        ])
        .arg(format!("touch {}; exec sleep 30", started.display()))
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    for _ in 0..500 {
        if started.exists() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let out = distlock(&url, state.path(), &["status", "jobs/held", "--json"]);
    let shown: Value = serde_json::from_str(&ok(&out)).unwrap();
    assert_eq!(shown[0]["holders"][0]["meta"]["pid"], holder.id());
    let busy = distlock(
        &url,
        state.path(),
        &["run", "--name", "jobs/held", "--no-wait", "--", "true"],
    );
    assert_eq!(busy.status.code(), Some(75));
    distlock_testkit::send(holder.id(), distlock_testkit::Signal::Terminate);
    assert_eq!(
        holder.wait().unwrap().code(),
        Some(128 + 15),
        "SIGTERM reached the command"
    );

    let out = distlock(
        &url,
        state.path(),
        &[
            "demo",
            "--json",
            "--strategies",
            "none,lock",
            "--stock",
            "20",
            "--buyers",
            "60",
            "--workers",
            "3",
        ],
    );
    let rows = json_lines(&ok(&out));
    let lock = rows.iter().find(|r| r["strategy"] == "lock").unwrap();
    assert_eq!(lock["oversold"], 0);
    assert_eq!(lock["orders"], 20);

    let out = distlock(
        &url,
        state.path(),
        &["bench", "--json", "--clients", "4", "--duration", "300ms"],
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
