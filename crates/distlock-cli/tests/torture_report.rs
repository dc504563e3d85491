//! The torture report: a faulted run's report draws what happened, and Debian's
//! `chromium`, headless, loads the report of a run the checker found wrong, runs its
//! script, and draws it; the DOM it ends with and a screenshot must show every hold's bar,
//! every violation's band and list item, and the violation the page was opened at picked
//! out.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

mod common;

use common::{distlock, json_lines, ok};

/// How long chromium may take to load and draw a report.
const BROWSER_LIMIT: Duration = Duration::from_secs(90);

/// Runs headless chromium on `url` with `args`, in a profile of its own under `dir`, for
/// at most [`BROWSER_LIMIT`].
fn chromium(dir: &Path, args: &[&str], url: &str) -> Output {
    let program = distlock_testkit::find_program("chromium").unwrap_or_else(|| {
        panic!(
            "`chromium` is not installed, and this test needs a real browser: apt-get install \
             chromium (scripts/test installs it)"
        )
    });
    let profile = dir.join("profile");
    let mut child = Command::new(program)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            "--no-first-run",
            "--window-size=1300,1000",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .arg(url)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("chromium starts");
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > BROWSER_LIMIT {
            let _ = child.kill();
            panic!("chromium did not finish within {BROWSER_LIMIT:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().unwrap()
}

/// How many times `needle` occurs in `haystack`.
fn count(haystack: &str, needle: &str) -> usize {
    haystack.matches(needle).count()
}

/// The negative control `no-renewal` (a lease taken once, never renewed nor looked at,
/// with sections longer than its TTL) is caught, and its report drawn.
#[test]
fn the_report_draws_every_hold_and_violation_in_a_browser() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("locks.db").display());
    let report = dir.path().join("report.html");
    // A lease without renewal under sections longer than its TTL: overlapping holders.
    let out = distlock(
        &url,
        dir.path(),
        &[
            "torture",
            "--json",
            "--scheme",
            "no-renewal",
            "--faults",
            "none",
            "--workers",
            "3",
            "--duration",
            "3s",
            "--ttl",
            "300ms",
            "--hold",
            "800ms",
            "--report",
            report.to_str().unwrap(),
        ],
    );
    let verdict = json_lines(&String::from_utf8_lossy(&out.stdout))
        .pop()
        .unwrap_or_else(|| panic!("no verdict: {out:?}"));
    assert_eq!(out.status.code(), Some(1), "{verdict:#}");
    assert_eq!(verdict["report"], report.to_str().unwrap());
    let acquisitions = verdict["stats"]["acquisitions"].as_u64().unwrap() as usize;
    let violations = verdict["violations"].as_array().unwrap().len();
    assert!(acquisitions >= 3 && violations >= 1, "{verdict:#}");
    // The negative control caught, with no fault at all: the overlapping holders, named.
    let overlap = verdict["violations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["kind"] == "overlap")
        .unwrap_or_else(|| panic!("no overlap: {verdict:#}"));
    assert!(
        overlap["message"]
            .as_str()
            .unwrap()
            .contains("held the lock at once")
    );

    // The DOM after the page's script ran, opened at the first violation.
    let page = format!("file://{}#v0", report.display());
    let dom = chromium(dir.path(), &["--dump-dom"], &page);
    let dom = String::from_utf8_lossy(&dom.stdout);
    assert!(dom.contains("<svg id=\"timeline\""), "{dom}");
    // Classes as drawn, and as the script added to them (`focus`).
    assert_eq!(count(&dom, "class=\"hold"), acquisitions);
    assert!(
        count(&dom, "class=\"hold bad") >= 2,
        "the overlapping holds are outlined"
    );
    assert_eq!(count(&dom, "class=\"band"), violations);
    assert_eq!(count(&dom, "<li id=\"v"), violations);
    assert!(
        dom.contains("class=\"violation picked\""),
        "the script picked #v0"
    );
    assert!(dom.contains("class=\"band focus\""));
    assert!(dom.contains("verdict: ") && dom.contains("overlap"));

    // What it drew: hold bars in their blue, and the violation's red.
    let shot = dir.path().join("report.png");
    let arg = format!("--screenshot={}", shot.display());
    let out = chromium(dir.path(), &[&arg], &format!("file://{}", report.display()));
    assert!(shot.exists(), "no screenshot: {out:?}");
    let decoder = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(&shot).unwrap()));
    let mut reader = decoder.read_info().unwrap();
    let mut pixels = vec![0; reader.output_buffer_size()];
    let frame = reader.next_frame(&mut pixels).unwrap();
    let channels = frame.color_type.samples();
    let (mut blue, mut red) = (0, 0);
    for pixel in pixels[..frame.buffer_size()].chunks(channels) {
        match (pixel[0], pixel[1], pixel[2]) {
            (59, 130, 246) => blue += 1,
            (r, g, b) if r > 200 && g < 80 && b < 80 => red += 1,
            _ => {}
        }
    }
    assert!(blue > 500, "hold bars drawn: {blue} blue pixels");
    assert!(red > 50, "violations drawn: {red} red pixels");
}

/// A faulted run's report draws its renewals, pauses, kills and the losses they cost.
#[test]
fn the_report_draws_renewals_faults_and_losses() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("locks.db").display());
    let report = dir.path().join("report.html");
    let history = dir.path().join("history.jsonl");
    // Holds longer than a renewal period, so holders renew, and pauses past the TTL.
    let out = distlock(
        &url,
        dir.path(),
        &[
            "torture",
            "--json",
            "--workers",
            "2",
            "--duration",
            "6s",
            "--hold",
            "800ms",
            "--faults",
            "pause,kill",
            "--seed",
            "7",
            "--report",
            report.to_str().unwrap(),
            "--history",
            history.to_str().unwrap(),
        ],
    );
    let verdict = json_lines(&ok(&out)).pop().unwrap();
    assert_eq!(verdict["clean"], true, "{verdict:#}");
    let html = std::fs::read_to_string(&report).unwrap();
    for class in ["hold", "renew", "pause", "kill", "write"] {
        assert!(html.contains(&format!("class=\"{class}\"")), "{class}");
    }
    // What a pause past the TTL cost, as the history has it (which it is depends on
    // where the pause landed), is drawn.
    let lines = std::fs::read_to_string(&history).unwrap();
    for (event, class) in [
        (r#""health":"lost""#, "lost"),
        (r#""health":"at-risk""#, "atrisk"),
        (r#""accepted":false"#, "refused"),
    ] {
        let drawn = html.contains(&format!("class=\"{class}\""));
        assert_eq!(lines.contains(event), drawn, "{class}");
    }
}
