//! `distlock run` as a supervisor: every signal reaches the command, the command dies with
//! distlock, and in a terminal the command gets the terminal (reads, Ctrl-Z) and distlock
//! takes it back after. Terminals are real pseudo-terminals made by `script` (util-linux).

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Every signal the command must get from distlock (a supervisor's set).
const FORWARDED: [(&str, libc::c_int); 9] = [
    ("HUP", libc::SIGHUP),
    ("INT", libc::SIGINT),
    ("QUIT", libc::SIGQUIT),
    ("TERM", libc::SIGTERM),
    ("USR1", libc::SIGUSR1),
    ("USR2", libc::SIGUSR2),
    ("WINCH", libc::SIGWINCH),
    ("CONT", libc::SIGCONT),
    ("ALRM", libc::SIGALRM),
];

fn distlock_run(state: &Path, name: &str, script: &str) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_distlock"));
    command
        .env("XDG_STATE_HOME", state)
        .env_remove("DISTLOCK_URL")
        .env_remove("DISTLOCK_URL_FILE")
        .args(["run", "--name", name, "--", "bash", "-c", script])
        .stdin(Stdio::null());
    command
}

/// Waits (at most 20 s) for a file to hold a line, and returns its text.
fn wait_for_text(path: &Path) -> String {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        if text.ends_with('\n') || Instant::now() > deadline {
            return text;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Whether a process exists and has not ended (a zombie has ended).
fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| stat.rsplit(')').next().map(|rest| rest.trim().to_owned()))
        .is_some_and(|rest| !rest.starts_with('Z') && !rest.starts_with('X'))
}

/// The state letter of a process (`S`, `R`, `T` for stopped, …).
fn state_of(pid: i32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit(')').next()?.trim().chars().next()
}

fn kill(pid: i32, number: libc::c_int) {
    // SAFETY: kill(2) has no memory-safety preconditions.
    unsafe {
        libc::kill(pid, number);
    }
}

#[test]
fn every_signal_a_supervisor_sends_reaches_the_command_and_distlock_lives_on() {
    let state = tempfile::tempdir().unwrap();
    let seen = state.path().join("seen");
    let done = state.path().join("done");
    let traps: String = FORWARDED
        .iter()
        .map(|(name, _)| format!("trap 'echo {name} >> {}' {name}; ", seen.display()))
        .collect();
    // The command traps each signal and ends, with 3, once told to. It counts in the shell
    // itself: a signal that struck a `$(seq …)` subshell (which keeps no traps) would cut
    // the loop short.
    let script = format!(
        "{traps} echo ready >> {seen}; i=0; while [ $i -lt 600 ]; do [ -e {done} ] && exit 3; sleep 0.05; i=$((i + 1)); done; exit 9",
        seen = seen.display(),
        done = done.display()
    );
    let mut run = Running(
        distlock_run(state.path(), "signals", &script)
            .spawn()
            .unwrap(),
    );
    assert_eq!(wait_for_text(&seen).trim(), "ready", "the command started");
    for (name, number) in FORWARDED {
        kill(run.0.id() as i32, number);
        let deadline = Instant::now() + Duration::from_secs(10);
        while !std::fs::read_to_string(&seen)
            .unwrap()
            .lines()
            .any(|l| l == name)
            && Instant::now() < deadline
        {
            std::thread::sleep(Duration::from_millis(20));
        }
        let text = std::fs::read_to_string(&seen).unwrap();
        assert!(
            text.lines().any(|l| l == name),
            "SIG{name} reached the command: {text}"
        );
        assert!(
            run.0.try_wait().unwrap().is_none(),
            "distlock lives on after SIG{name}"
        );
    }
    std::fs::write(&done, "").unwrap();
    assert_eq!(
        run.0.wait().unwrap().code(),
        Some(3),
        "the command's own code"
    );
}

#[test]
fn a_command_that_dies_of_a_signal_gives_128_plus_its_number() {
    let state = tempfile::tempdir().unwrap();
    let out = distlock_run(state.path(), "dies", "kill -USR2 $$")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(128 + libc::SIGUSR2), "{out:?}");
}

#[test]
fn the_command_does_not_outlive_a_killed_distlock() {
    let state = tempfile::tempdir().unwrap();
    let pid_file = state.path().join("pid");
    let mut run = distlock_run(
        state.path(),
        "orphan",
        &format!("echo $$ > {}; exec sleep 60", pid_file.display()),
    )
    .spawn()
    .unwrap();
    let pid: i32 = wait_for_text(&pid_file).trim().parse().unwrap();
    assert!(alive(pid));
    kill(run.id() as i32, libc::SIGKILL);
    run.wait().unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while alive(pid) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let outlived = alive(pid);
    kill(pid, libc::SIGKILL);
    assert!(
        !outlived,
        "the command ended when distlock was killed (SIGTERM from the kernel)"
    );
}

/// A child killed when the test ends, passed or failed.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A shell command line run in a new pseudo-terminal by `script`, its input written by the
/// test and its output read line by line.
struct InTerminal {
    script: Running,
    input: ChildStdin,
    lines: mpsc::Receiver<String>,
}

impl InTerminal {
    fn start(state: &Path, command_line: &str) -> InTerminal {
        let mut script = Command::new("script")
            .args([
                "--quiet",
                "--return",
                "--command",
                command_line,
                "/dev/null",
            ])
            .env("XDG_STATE_HOME", state)
            .env("DISTLOCK", env!("CARGO_BIN_EXE_distlock"))
            .env("SHELL", "/bin/sh")
            .env_remove("DISTLOCK_URL")
            .env_remove("DISTLOCK_URL_FILE")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("script (util-linux) runs");
        let input = script.stdin.take().unwrap();
        let output = script.stdout.take().unwrap();
        let (send, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(output).lines() {
                let Ok(line) = line else { break };
                if send.send(line).is_err() {
                    break;
                }
            }
        });
        InTerminal {
            script: Running(script),
            input,
            lines,
        }
    }

    /// Waits (at most 20 s) for a line that contains `text`; every line seen on the way
    /// is in the panic message if none does.
    fn expect(&self, text: &str) {
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut seen = Vec::new();
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            match self.lines.recv_timeout(left) {
                Ok(line) if line.contains(text) => return,
                Ok(line) => seen.push(line),
                Err(_) => break,
            }
        }
        panic!("no line with `{text}` from the terminal; saw {seen:?}");
    }

    /// Types `keys` on the terminal.
    fn type_keys(&mut self, keys: &[u8]) {
        self.input.write_all(keys).unwrap();
        self.input.flush().unwrap();
    }

    /// The exit code of the command line, within 20 s (killed otherwise).
    fn finish(mut self) -> Option<i32> {
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if let Some(status) = self.script.0.try_wait().unwrap() {
                return status.code();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("the terminal's command did not end within 20 s");
    }
}

#[test]
fn in_a_terminal_the_command_reads_it_and_the_shell_gets_it_back() {
    let state = tempfile::tempdir().unwrap();
    // A shell with job control, as a user's: distlock is a job of its own. The shell reads
    // the terminal after distlock ends: it must be foreground again.
    let mut terminal = InTerminal::start(
        state.path(),
        r#"set -m; "$DISTLOCK" run --name tty -- sh -c 'echo ready; read line; echo "command read $line"'; read after; echo "shell read $after""#,
    );
    terminal.expect("ready");
    terminal.type_keys(b"first\n");
    terminal.expect("command read first");
    terminal.type_keys(b"second\n");
    terminal.expect("shell read second");
    assert_eq!(terminal.finish(), Some(0));
}

#[test]
fn ctrl_z_in_a_terminal_stops_distlock_with_its_command_and_both_continue() {
    let state = tempfile::tempdir().unwrap();
    let pid_file = state.path().join("distlock.pid");
    let mut terminal = InTerminal::start(
        state.path(),
        &format!(
            r#"echo $$ > {}; exec "$DISTLOCK" run --name tty -- sh -c 'echo ready; read line; echo "command read $line"'"#,
            pid_file.display()
        ),
    );
    terminal.expect("ready");
    let distlock: i32 = wait_for_text(&pid_file).trim().parse().unwrap();
    terminal.type_keys(&[0x1a]); // Ctrl-Z
    let deadline = Instant::now() + Duration::from_secs(10);
    while state_of(distlock) != Some('T') && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(
        state_of(distlock),
        Some('T'),
        "distlock stopped with its command, as a job does"
    );
    // Stopped, it holds up no other client of the database, which takes a lock meanwhile.
    // (A smoke test: a stop lands in the middle of a write rarely; the testkit's
    // paused-writes tests check that distlock stops between them.)
    let mut other = Running(
        Command::new(env!("CARGO_BIN_EXE_distlock"))
            .env("XDG_STATE_HOME", state.path())
            .env_remove("DISTLOCK_URL")
            .env_remove("DISTLOCK_URL_FILE")
            .args(["run", "--name", "other", "--wait", "10s", "--", "true"])
            .stdin(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let other_ends = Instant::now() + Duration::from_secs(15);
    let mut other_status = None;
    while other_status.is_none() && Instant::now() < other_ends {
        other_status = other.0.try_wait().unwrap();
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(
        other_status.and_then(|status| status.code()),
        Some(0),
        "another run on the same database while this one is stopped"
    );
    // `script` stops itself when its command stops; continued, it continues its command,
    // as a shell's `fg` continues a job.
    let script = terminal.script.0.id() as i32;
    while state_of(script) != Some('T') && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    kill(script, libc::SIGCONT);
    kill(distlock, libc::SIGCONT);
    terminal.type_keys(b"later\n");
    terminal.expect("command read later");
    assert_eq!(terminal.finish(), Some(0));
}

#[test]
fn break_in_a_terminal_shows_the_grant_and_breaks_it_only_on_yes() {
    let state = tempfile::tempdir().unwrap();
    let started = state.path().join("started");
    let mut holder = Running(
        Command::new(env!("CARGO_BIN_EXE_distlock"))
            .env("XDG_STATE_HOME", state.path())
            .env_remove("DISTLOCK_URL")
            .env_remove("DISTLOCK_URL_FILE")
            .args(["run", "--name", "stuck", "--ttl", "3s", "--", "sh", "-c"])
            .arg(format!("echo go > {}; exec sleep 30", started.display()))
            .stdin(Stdio::null())
            .spawn()
            .unwrap(),
    );
    assert_eq!(wait_for_text(&started).trim(), "go");
    let mut terminal = InTerminal::start(
        state.path(),
        r#""$DISTLOCK" break stuck; echo "first $?"; "$DISTLOCK" break stuck; echo "second $?""#,
    );
    terminal.expect("held: mutex token");
    terminal.expect("[y/N]");
    terminal.type_keys(b"n\n");
    terminal.expect("not broken");
    terminal.expect("first 1");
    terminal.expect("[y/N]");
    terminal.type_keys(b"yes\n");
    terminal.expect("broke mutex token");
    terminal.expect("second 0");
    assert_eq!(terminal.finish(), Some(0));
    let deadline = Instant::now() + Duration::from_secs(10);
    let code = loop {
        if let Some(status) = holder.0.try_wait().unwrap() {
            break status.code();
        }
        assert!(Instant::now() < deadline, "the broken run stops");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(code, Some(76), "the broken run says its lock was lost");
}
