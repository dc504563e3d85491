//! Real servers for tests: start an installed server binary on a free loopback port in a
//! temporary directory, wait until it answers, keep its log, and control it (kill, pause,
//! resume, restart on the same port).

use std::fs::File;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use tempfile::TempDir;

use crate::signal::{Signal, send};
use crate::spec::{LaunchError, Ready, ServerSpec};

/// A running server owned by a test; killed when dropped (its log is printed if the test
/// is panicking).
#[derive(Debug)]
pub struct Server {
    spec: ServerSpec,
    program: PathBuf,
    port: u16,
    dir: TempDir,
    child: Option<Child>,
    identity: Option<Identity>,
}

/// The user and group a server runs as, when the tests run as root.
#[derive(Debug, Clone, Copy)]
struct Identity {
    uid: u32,
    gid: u32,
}

impl Identity {
    /// `user`'s ids from `/etc/passwd`, when this process is root; `None` otherwise.
    fn for_user(user: &str) -> Result<Option<Identity>, LaunchError> {
        // SAFETY: geteuid(2) has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            return Ok(None);
        }
        let passwd = std::fs::read_to_string("/etc/passwd")
            .map_err(|e| failed(format!("cannot read /etc/passwd: {e}"), ""))?;
        passwd
            .lines()
            .map(|line| line.split(':').collect::<Vec<_>>())
            .find(|fields| fields.first() == Some(&user))
            .and_then(|fields| {
                Some(Identity {
                    uid: fields.get(2)?.parse().ok()?,
                    gid: fields.get(3)?.parse().ok()?,
                })
            })
            .map(Some)
            .ok_or_else(|| {
                failed(
                    format!("the tests run as root and the server must run as `{user}`, but there is no such user"),
                    "",
                )
            })
    }

    fn apply(self, command: &mut Command) {
        use std::os::unix::process::CommandExt;
        command.uid(self.uid).gid(self.gid);
    }
}

impl Server {
    /// Starts the server on a free loopback port in a new temporary directory.
    ///
    /// # Examples
    ///
    /// See [`ServerSpec`].
    pub fn start(spec: ServerSpec) -> Result<Server, LaunchError> {
        let mut tries = 1;
        loop {
            match Server::start_once(spec.clone()) {
                // Another test process picked the same free port and bound it first.
                Err(LaunchError::Failed { log_tail, .. })
                    if tries < PORT_TRIES
                        && log_tail.to_lowercase().contains("address already in use") =>
                {
                    tries += 1;
                }
                outcome => return outcome,
            }
        }
    }

    /// [`start`](Self::start), on one port.
    fn start_once(spec: ServerSpec) -> Result<Server, LaunchError> {
        let program = spec.locate(&spec.program)?;
        let dir = tempfile::Builder::new()
            .prefix("distlock-server-")
            .tempdir()
            .map_err(|e| failed(format!("cannot create a temporary directory: {e}"), ""))?;
        let identity = match &spec.run_as {
            Some(user) => Identity::for_user(user)?,
            None => None,
        };
        if let Some(identity) = identity {
            std::os::unix::fs::chown(dir.path(), Some(identity.uid), Some(identity.gid)).map_err(
                |e| failed(format!("cannot hand the temporary directory over: {e}"), ""),
            )?;
        }
        let mut server = Server {
            spec,
            program,
            port: spare_port()?,
            dir,
            child: None,
            identity,
        };
        server.prepare()?;
        server.launch()?;
        Ok(server)
    }

    /// `text` with `{port}` and `{dir}` filled in.
    fn fill(&self, text: &str) -> String {
        text.replace("{port}", &self.port.to_string())
            .replace("{dir}", &self.dir.path().display().to_string())
    }

    /// Writes the spec's files and runs its preparation commands.
    fn prepare(&self) -> Result<(), LaunchError> {
        for (name, contents) in &self.spec.files {
            let path = self.dir.path().join(name);
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent)
                    .map_err(|e| failed(format!("cannot create {}: {e}", parent.display()), ""))?;
            }
            let cannot_write =
                |e: std::io::Error| failed(format!("cannot write {}: {e}", path.display()), "");
            // Only the server may read them: they hold passwords and private keys, which
            // PostgreSQL refuses to use when others can read them.
            let mut file = File::options()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(0o600)
                .open(&path)
                .map_err(cannot_write)?;
            file.write_all(self.fill(contents).as_bytes())
                .map_err(cannot_write)?;
            if let Some(identity) = self.identity {
                std::os::unix::fs::chown(&path, Some(identity.uid), Some(identity.gid))
                    .map_err(cannot_write)?;
            }
        }
        for (program, args) in &self.spec.prepare {
            let path = self.spec.locate(program)?;
            let mut command = Command::new(&path);
            command
                .args(args.iter().map(|a| self.fill(a)))
                .current_dir(self.dir.path())
                .stdin(Stdio::null());
            if let Some(identity) = self.identity {
                identity.apply(&mut command);
            }
            let output = command
                .output()
                .map_err(|e| failed(format!("cannot run {}: {e}", path.display()), ""))?;
            if !output.status.success() {
                let log = format!(
                    "{}{}",
                    String::from_utf8_lossy(&output.stdout),
                    String::from_utf8_lossy(&output.stderr)
                );
                return Err(failed(
                    format!("{program} failed with {}", output.status),
                    &log,
                ));
            }
        }
        Ok(())
    }

    fn launch(&mut self) -> Result<(), LaunchError> {
        let log_start = self.log().len();
        let log = File::options()
            .create(true)
            .append(true)
            .open(self.log_path())
            .map_err(|e| failed(format!("cannot open the server log: {e}"), ""))?;
        let log_err = log
            .try_clone()
            .map_err(|e| failed(format!("cannot open the server log: {e}"), ""))?;
        let mut command = Command::new(&self.program);
        command
            .args(self.spec.args.iter().map(|a| self.fill(a)))
            .envs(
                self.spec
                    .env
                    .iter()
                    .map(|(key, value)| (key, self.fill(value))),
            )
            .current_dir(self.dir.path())
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log_err);
        if let Some(identity) = self.identity {
            identity.apply(&mut command);
        }
        if OWN_PROCESS_GROUPS.load(Ordering::Relaxed) {
            command.process_group(0);
        }
        let child = command
            .spawn()
            .map_err(|e| failed(format!("cannot start {}: {e}", self.program.display()), ""))?;
        self.child = Some(child);
        self.wait_ready(log_start)
    }

    /// Waits until the server is ready; a log line counts only if written after `log_start`
    /// (a restarted server's log still holds the first start's lines).
    fn wait_ready(&mut self, log_start: usize) -> Result<(), LaunchError> {
        let deadline = Instant::now() + self.spec.startup_timeout;
        while Instant::now() < deadline {
            if let Some(child) = self.child.as_mut()
                && let Ok(Some(status)) = child.try_wait()
            {
                return Err(failed(
                    format!("{} exited during startup with {status}", self.spec.program),
                    &self.log(),
                ));
            }
            let ready = match &self.spec.ready {
                Ready::TcpConnect => {
                    TcpStream::connect_timeout(&self.addr(), Duration::from_millis(200)).is_ok()
                }
                Ready::LogLine(line) => self
                    .log()
                    .get(log_start..)
                    .is_some_and(|new| new.contains(line.as_str())),
            };
            if ready {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let log = self.log();
        self.kill();
        Err(failed(
            format!(
                "{} did not become ready within {:?}",
                self.spec.program, self.spec.startup_timeout
            ),
            &log,
        ))
    }

    /// The loopback port it listens on.
    ///
    /// # Examples
    ///
    /// See [`ServerSpec`].
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `127.0.0.1:port`.
    ///
    /// # Examples
    ///
    /// See [`ServerSpec`].
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.port))
    }

    /// Its temporary directory (removed when the server is dropped).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn f(server: &distlock_servers::Server) {
    /// println!("{}", server.dir().display());
    /// # }
    /// ```
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The process id, while it runs.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn f(server: &distlock_servers::Server) {
    /// assert!(server.pid().is_some());
    /// # }
    /// ```
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join("server.log")
    }

    /// Everything the server wrote so far.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn f(server: &distlock_servers::Server) {
    /// eprintln!("{}", server.log());
    /// # }
    /// ```
    pub fn log(&self) -> String {
        let mut text = String::new();
        if let Ok(mut file) = File::open(self.log_path()) {
            let _ = file.read_to_string(&mut text);
        }
        text
    }

    /// Kills it with SIGKILL and reaps it.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn f(mut server: distlock_servers::Server) {
    /// server.kill();
    /// # }
    /// ```
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let tree = process_tree(child.id());
            for &pid in &tree {
                send(pid, Signal::Kill);
            }
            let _ = child.wait();
            // The server's own children are reaped by someone else: wait (bounded) until
            // they have exited too, or a restart finds their shared memory still attached.
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
            while tree.iter().any(|&pid| running(pid)) && std::time::Instant::now() < deadline {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
        }
    }

    /// Freezes it with SIGSTOP: connections stay open, nothing answers.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn f(server: distlock_servers::Server) {
    /// server.pause();
    /// server.resume();
    /// # }
    /// ```
    pub fn pause(&self) {
        if let Some(pid) = self.pid() {
            for pid in process_tree(pid) {
                send(pid, Signal::Stop);
            }
        }
    }

    /// Thaws it with SIGCONT.
    ///
    /// # Examples
    ///
    /// See [`Server::pause`].
    pub fn resume(&self) {
        if let Some(pid) = self.pid() {
            for pid in process_tree(pid) {
                send(pid, Signal::Continue);
            }
        }
    }

    /// Kills it and starts it again on the same port and directory.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn f(mut server: distlock_servers::Server) -> Result<(), distlock_servers::LaunchError> {
    /// server.restart()?;
    /// # Ok(()) }
    /// ```
    pub fn restart(&mut self) -> Result<(), LaunchError> {
        self.kill();
        self.launch()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let log = self.log();
            let tail: String = tail_lines(&log, 40);
            eprintln!("--- {} log (tail) ---\n{tail}", self.spec.program);
        }
        self.resume();
        self.kill();
    }
}

/// A launch failure for `reason`, with the end of the server's `log` (empty if none).
pub(crate) fn failed(reason: String, log: &str) -> LaunchError {
    LaunchError::Failed {
        reason,
        log_tail: tail_lines(log, 40),
    }
}

fn tail_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// How many ports a server is started on before its start fails: a port found free may be
/// taken by another test process before the server binds it.
const PORT_TRIES: u32 = 3;

/// A free loopback port for a launch (a peer or bus port a server needs besides its own).
pub(crate) fn spare_port() -> Result<u16, LaunchError> {
    free_port().map_err(|e| failed(format!("no free port: {e}"), ""))
}

/// `pid` and every process descended from it (a server that forks a process per
/// connection, like PostgreSQL, is paused or killed as a whole), read from `/proc`.
/// Whether process `pid` exists and has not exited (a zombie has).
fn running(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rfind(')')
            .and_then(|end| stat[end + 1..].split_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X")
    })
}

fn process_tree(pid: u32) -> Vec<u32> {
    let parents: Vec<(u32, u32)> = std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let child: u32 = entry.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(entry.path().join("stat")).ok()?;
            // The command name in parentheses may hold spaces; the parent pid is the second
            // field after it.
            let after_name = &stat[stat.rfind(')')? + 1..];
            let parent = after_name.split_whitespace().nth(1)?.parse().ok()?;
            Some((child, parent))
        })
        .collect();
    let mut tree = vec![pid];
    let mut next = 0;
    while next < tree.len() {
        let parent = tree[next];
        tree.extend(
            parents
                .iter()
                .filter(|(_, p)| *p == parent)
                .map(|(child, _)| *child),
        );
        next += 1;
    }
    tree
}

/// A port nobody listens on right now, on 127.0.0.1, picked at random below the kernel's
/// range of ephemeral ports: a port from that range (what binding port 0 gives) may be
/// taken by any outgoing connection before the server binds it, which made an etcd member
/// fail to start with "address already in use" while other tests were connecting. No port
/// is given twice in one process: a launch picks several before any is bound (a ZooKeeper
/// ensemble's peer ports, then each member's client port), and once two of them were one.
///
/// # Examples
///
/// ```
/// let (one, other) = (distlock_servers::free_port().unwrap(), distlock_servers::free_port().unwrap());
/// assert_ne!(one, other);
/// ```
pub fn free_port() -> std::io::Result<u16> {
    static GIVEN: std::sync::Mutex<Vec<u16>> = std::sync::Mutex::new(Vec::new());
    let mut given = GIVEN
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let ephemeral_low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|range| range.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(32768);
    if ephemeral_low > FIRST_PORT {
        for _ in 0..200 {
            let port = FIRST_PORT + random_below(ephemeral_low - FIRST_PORT);
            if !given.contains(&port) && TcpListener::bind(("127.0.0.1", port)).is_ok() {
                given.push(port);
                return Ok(port);
            }
        }
    }
    for _ in 0..200 {
        let port = TcpListener::bind(("127.0.0.1", 0))?.local_addr()?.port();
        if !given.contains(&port) {
            given.push(port);
            return Ok(port);
        }
    }
    Err(std::io::Error::new(
        std::io::ErrorKind::AddrInUse,
        "every free port found was given already",
    ))
}

/// The lowest port [`free_port`] picks: above the ports services commonly use.
const FIRST_PORT: u16 = 10_000;

/// Whether servers started from now on lead process groups of their own.
static OWN_PROCESS_GROUPS: AtomicBool = AtomicBool::new(false);

/// Has every server this process starts from now on lead a process group of its own, so
/// that a signal to the starter's group (Ctrl-C in a terminal) does not reach it: for a
/// program that stops its servers itself when interrupted. Tests leave servers in their
/// group, so an interrupted test run takes them with it.
///
/// # Examples
///
/// ```
/// distlock_servers::servers_in_own_process_groups();
/// ```
pub fn servers_in_own_process_groups() {
    OWN_PROCESS_GROUPS.store(true, Ordering::Relaxed);
}

/// A number below `bound` (above 0), different in every call and every process.
fn random_below(bound: u16) -> u16 {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos(),
    );
    (hasher.finish() % u64::from(bound)) as u16
}

/// Checks `done` every 100 ms for at most `within` (at least once): true as soon as it
/// holds.
pub(crate) fn wait_until(within: Duration, mut done: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + within;
    loop {
        if done() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}
