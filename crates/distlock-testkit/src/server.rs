//! Real servers for tests: start an installed server binary on a free loopback port in a
//! temporary directory, wait until it answers, keep its log, and control it (kill, pause,
//! resume, restart on the same port).

use std::fs::File;
use std::io::Read;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tempfile::TempDir;

use crate::signal::{Signal, send};

/// How a launcher knows its server is ready.
#[derive(Debug, Clone)]
pub enum Ready {
    /// A TCP connection to the port succeeds.
    TcpConnect,
    /// The log contains this text.
    LogLine(String),
}

/// What to start: a program, its arguments and how to tell it is up.
///
/// In `args`, `{port}` stands for the chosen port and `{dir}` for the temporary directory.
///
/// # Examples
///
/// ```no_run
/// use distlock_testkit::{Ready, Server, ServerSpec};
///
/// let spec = ServerSpec::new("python3", ["-m", "http.server", "--bind", "127.0.0.1", "{port}"])
///     .ready(Ready::TcpConnect)
///     .install_hint("apt-get install python3");
/// let server = Server::start(spec)?;
/// println!("serving on {}", server.addr());
/// # Ok::<(), distlock_testkit::LaunchError>(())
/// ```
#[derive(Debug, Clone)]
pub struct ServerSpec {
    program: String,
    args: Vec<String>,
    ready: Ready,
    install_hint: String,
    startup_timeout: Duration,
}

impl ServerSpec {
    /// A spec for `program` with `args`; ready on TCP connect, 30 s to start.
    ///
    /// # Examples
    ///
    /// See [`ServerSpec`].
    pub fn new<I, S>(program: &str, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        ServerSpec {
            program: program.to_owned(),
            args: args.into_iter().map(Into::into).collect(),
            ready: Ready::TcpConnect,
            install_hint: format!("install {program}"),
            startup_timeout: Duration::from_secs(30),
        }
    }

    /// How readiness is detected.
    ///
    /// # Examples
    ///
    /// See [`ServerSpec`].
    pub fn ready(mut self, ready: Ready) -> Self {
        self.ready = ready;
        self
    }

    /// What to tell the user when the program is not installed.
    ///
    /// # Examples
    ///
    /// See [`ServerSpec`].
    pub fn install_hint(mut self, hint: &str) -> Self {
        self.install_hint = hint.to_owned();
        self
    }

    /// How long the server may take to become ready.
    ///
    /// # Examples
    ///
    /// ```
    /// let spec = distlock_testkit::ServerSpec::new("redis-server", ["--port", "{port}"])
    ///     .startup_timeout(std::time::Duration::from_secs(10));
    /// ```
    pub fn startup_timeout(mut self, timeout: Duration) -> Self {
        self.startup_timeout = timeout;
        self
    }
}

/// Why a server could not be started.
#[derive(Debug)]
pub enum LaunchError {
    /// The program is not installed.
    Missing {
        /// The program looked for.
        program: String,
        /// How to install it.
        hint: String,
    },
    /// It started but did not become ready, or could not be started at all.
    Failed {
        /// What happened.
        reason: String,
        /// The end of its log.
        log_tail: String,
    },
}

impl std::fmt::Display for LaunchError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LaunchError::Missing { program, hint } => write!(
                f,
                "`{program}` is not installed, and this test needs the real server: {hint} (scripts/test installs it)"
            ),
            LaunchError::Failed { reason, log_tail } => {
                write!(f, "{reason}\n--- server log (tail) ---\n{log_tail}")
            }
        }
    }
}

impl std::error::Error for LaunchError {}

/// A running server owned by a test; killed when dropped (its log is printed if the test
/// is panicking).
#[derive(Debug)]
pub struct Server {
    spec: ServerSpec,
    program: PathBuf,
    port: u16,
    dir: TempDir,
    child: Option<Child>,
}

impl Server {
    /// Starts the server on a free loopback port in a new temporary directory.
    ///
    /// # Examples
    ///
    /// See [`ServerSpec`].
    pub fn start(spec: ServerSpec) -> Result<Server, LaunchError> {
        let program = find_program(&spec.program).ok_or_else(|| LaunchError::Missing {
            program: spec.program.clone(),
            hint: spec.install_hint.clone(),
        })?;
        let dir = tempfile::Builder::new()
            .prefix("distlock-server-")
            .tempdir()
            .map_err(|e| failed(format!("cannot create a temporary directory: {e}"), ""))?;
        let mut server = Server {
            spec,
            program,
            port: free_port().map_err(|e| failed(format!("no free port: {e}"), ""))?,
            dir,
            child: None,
        };
        server.launch()?;
        Ok(server)
    }

    fn launch(&mut self) -> Result<(), LaunchError> {
        let log = File::options()
            .create(true)
            .append(true)
            .open(self.log_path())
            .map_err(|e| failed(format!("cannot open the server log: {e}"), ""))?;
        let log_err = log
            .try_clone()
            .map_err(|e| failed(format!("cannot open the server log: {e}"), ""))?;
        let dir = self.dir.path().display().to_string();
        let args: Vec<String> = self
            .spec
            .args
            .iter()
            .map(|a| {
                a.replace("{port}", &self.port.to_string())
                    .replace("{dir}", &dir)
            })
            .collect();
        let child = Command::new(&self.program)
            .args(&args)
            .current_dir(self.dir.path())
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log_err)
            .spawn()
            .map_err(|e| failed(format!("cannot start {}: {e}", self.program.display()), ""))?;
        self.child = Some(child);
        self.wait_ready()
    }

    fn wait_ready(&mut self) -> Result<(), LaunchError> {
        let deadline = Instant::now() + self.spec.startup_timeout;
        while Instant::now() < deadline {
            if let Some(child) = self.child.as_mut() {
                if let Ok(Some(status)) = child.try_wait() {
                    return Err(failed(
                        format!("{} exited during startup with {status}", self.spec.program),
                        &self.log(),
                    ));
                }
            }
            let ready = match &self.spec.ready {
                Ready::TcpConnect => {
                    TcpStream::connect_timeout(&self.addr(), Duration::from_millis(200)).is_ok()
                }
                Ready::LogLine(line) => self.log().contains(line.as_str()),
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
    /// # fn f(server: &distlock_testkit::Server) {
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
    /// # fn f(server: &distlock_testkit::Server) {
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
    /// # fn f(server: &distlock_testkit::Server) {
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
    /// # fn f(mut server: distlock_testkit::Server) {
    /// server.kill();
    /// # }
    /// ```
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Freezes it with SIGSTOP: connections stay open, nothing answers.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn f(server: distlock_testkit::Server) {
    /// server.pause();
    /// server.resume();
    /// # }
    /// ```
    pub fn pause(&self) {
        if let Some(pid) = self.pid() {
            send(pid, Signal::Stop);
        }
    }

    /// Thaws it with SIGCONT.
    ///
    /// # Examples
    ///
    /// See [`Server::pause`].
    pub fn resume(&self) {
        if let Some(pid) = self.pid() {
            send(pid, Signal::Continue);
        }
    }

    /// Kills it and starts it again on the same port and directory.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn f(mut server: distlock_testkit::Server) -> Result<(), distlock_testkit::LaunchError> {
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

fn failed(reason: String, log: &str) -> LaunchError {
    LaunchError::Failed {
        reason,
        log_tail: tail_lines(log, 40),
    }
}

fn tail_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// A port nobody listens on right now, on 127.0.0.1.
///
/// # Examples
///
/// ```
/// let port = distlock_testkit::free_port().unwrap();
/// assert!(port > 0);
/// ```
pub fn free_port() -> std::io::Result<u16> {
    Ok(TcpListener::bind(("127.0.0.1", 0))?.local_addr()?.port())
}

/// Finds `program` on `PATH` (or as given, if it has a slash).
///
/// # Examples
///
/// ```
/// assert!(distlock_testkit::find_program("sh").is_some());
/// assert!(distlock_testkit::find_program("no-such-program-here").is_none());
/// ```
pub fn find_program(program: &str) -> Option<PathBuf> {
    if program.contains('/') {
        let path = PathBuf::from(program);
        return path.is_file().then_some(path);
    }
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join(program))
            .find(|candidate| candidate.is_file())
    })
}
