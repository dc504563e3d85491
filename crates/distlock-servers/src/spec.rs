//! What a test server is (the program, its arguments, when it is ready, where it may be
//! installed) and why one could not be started.

use std::path::PathBuf;
use std::time::Duration;

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
/// use distlock_servers::{Ready, Server, ServerSpec};
///
/// let spec = ServerSpec::new("python3", ["-m", "http.server", "--bind", "127.0.0.1", "{port}"])
///     .ready(Ready::TcpConnect)
///     .install_hint("apt-get install python3");
/// let server = Server::start(spec)?;
/// println!("serving on {}", server.addr());
/// # Ok::<(), distlock_servers::LaunchError>(())
/// ```
#[derive(Debug, Clone)]
pub struct ServerSpec {
    pub(crate) program: String,
    pub(crate) args: Vec<String>,
    pub(crate) ready: Ready,
    pub(crate) install_hint: String,
    pub(crate) startup_timeout: Duration,
    pub(crate) search_dirs: Vec<PathBuf>,
    pub(crate) files: Vec<(String, String)>,
    pub(crate) prepare: Vec<(String, Vec<String>)>,
    pub(crate) run_as: Option<String>,
    pub(crate) env: Vec<(String, String)>,
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
            search_dirs: Vec::new(),
            files: Vec::new(),
            prepare: Vec::new(),
            run_as: None,
            env: Vec::new(),
        }
    }

    /// Also looks for the programs in `dirs` (after `PATH`), e.g. PostgreSQL's versioned
    /// `bin` directory, which Debian keeps off `PATH`.
    ///
    /// # Examples
    ///
    /// ```
    /// let spec = distlock_servers::ServerSpec::new("postgres", ["-p", "{port}"])
    ///     .search(["/usr/lib/postgresql/15/bin"]);
    /// ```
    pub fn search<I, P>(mut self, dirs: I) -> Self
    where
        I: IntoIterator<Item = P>,
        P: Into<PathBuf>,
    {
        self.search_dirs.extend(dirs.into_iter().map(Into::into));
        self
    }

    /// Writes `contents` (with `{port}` and `{dir}` filled in) to `name` in the temporary
    /// directory (creating the directories it names) before the server first starts, e.g.
    /// a configuration file or a private key: readable by the server's user alone.
    ///
    /// # Examples
    ///
    /// ```
    /// let spec = distlock_servers::ServerSpec::new("mariadbd", ["--init-file={dir}/init.sql"])
    ///     .file("init.sql", "CREATE DATABASE IF NOT EXISTS distlock;");
    /// ```
    pub fn file(mut self, name: &str, contents: &str) -> Self {
        self.files.push((name.to_owned(), contents.to_owned()));
        self
    }

    /// Runs `program` with `args` (placeholders filled in) in the temporary directory once,
    /// before the server first starts (not on restart), e.g. to create a data directory. A
    /// failure fails the launch with the command's output.
    ///
    /// # Examples
    ///
    /// ```
    /// let spec = distlock_servers::ServerSpec::new("postgres", ["-D", "{dir}/data"])
    ///     .prepare("initdb", ["-D", "{dir}/data", "--no-sync"]);
    /// ```
    pub fn prepare<I, S>(mut self, program: &str, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.prepare.push((
            program.to_owned(),
            args.into_iter().map(Into::into).collect(),
        ));
        self
    }

    /// Sets the environment variable `key` to `value` (placeholders filled in) for the
    /// server, at every start, e.g. to preload a library into it.
    ///
    /// # Examples
    ///
    /// ```
    /// let spec = distlock_servers::ServerSpec::new("redis-server", ["--port", "{port}"])
    ///     .env("FAKETIME_TIMESTAMP_FILE", "{dir}/clock");
    /// ```
    pub fn env(mut self, key: &str, value: &str) -> Self {
        self.env.push((key.to_owned(), value.to_owned()));
        self
    }

    /// When the tests run as root, runs the preparation and the server as `user` (and gives
    /// it the temporary directory): PostgreSQL refuses to run as root.
    ///
    /// # Examples
    ///
    /// ```
    /// let spec = distlock_servers::ServerSpec::new("postgres", ["-D", "{dir}/data"])
    ///     .run_as("postgres");
    /// ```
    pub fn run_as(mut self, user: &str) -> Self {
        self.run_as = Some(user.to_owned());
        self
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
    /// let spec = distlock_servers::ServerSpec::new("redis-server", ["--port", "{port}"])
    ///     .startup_timeout(std::time::Duration::from_secs(10));
    /// ```
    pub fn startup_timeout(mut self, timeout: Duration) -> Self {
        self.startup_timeout = timeout;
        self
    }
}

impl ServerSpec {
    /// Where `program` is installed: on `PATH` or in the spec's search directories.
    pub(crate) fn locate(&self, program: &str) -> Result<PathBuf, LaunchError> {
        find_program(program)
            .or_else(|| {
                self.search_dirs
                    .iter()
                    .map(|dir| dir.join(program))
                    .find(|candidate| candidate.is_file())
            })
            .ok_or_else(|| LaunchError::Missing {
                program: program.to_owned(),
                hint: self.install_hint.clone(),
            })
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

/// Finds `program` on `PATH` (or as given, if it has a slash).
///
/// # Examples
///
/// ```
/// assert!(distlock_servers::find_program("sh").is_some());
/// assert!(distlock_servers::find_program("no-such-program-here").is_none());
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
