//! The Lua scripts, kept as `.lua` files beside this one and put together here: every full
//! script starts with the lock's keys (`keys.lua`) and the shared helpers (`helpers.lua`).
//! The fast paths of acquire and release are scripts of their own, as small as the grant
//! allows: on the server, each key, argument and command of a script costs about as much
//! as a short script's whole work, and they run on every uncontended cycle.
//! [`Call`] sends them with EVALSHA; a server that answers NOSCRIPT (it restarted, or its
//! scripts were flushed) is given every script again at once.

use std::sync::LazyLock;

use redis::{Cmd, FromRedisValue, RedisResult, Script, ToRedisArgs};

use crate::keys::{Key, LockKeys};
use crate::redis::connection::Conn;

const KEYS: &str = include_str!("scripts/keys.lua");
const HELPERS: &str = include_str!("scripts/helpers.lua");

pub(crate) struct Scripts {
    pub(crate) acquire: Script,
    /// The acquire fast path (keys [`Key::TRY`](crate::keys::Key::TRY)): the grant's
    /// fencing token, or -1 when it does not apply.
    pub(crate) try_exclusive: Script,
    /// The release fast path (keys [`Key::RELEASE_FAST`](crate::keys::Key::RELEASE_FAST)):
    /// `-1` when it does not apply.
    pub(crate) release_exclusive: Script,
    pub(crate) release: Script,
    pub(crate) renew: Script,
    pub(crate) cancel: Script,
    pub(crate) restamp: Script,
    pub(crate) redlock_waiting: Script,
    /// Counts a first try's token where the fencing counter was never seeded, if the lock is
    /// still the request's (keys: the counter, the lock): the token, or -1.
    pub(crate) seed_fence: Script,
    /// Breaks grants whoever holds them (`Client::force_release`).
    pub(crate) force_release: Script,
    /// Writes a lock's note under a live grant (`Backend::write_note`).
    pub(crate) note_write: Script,
    /// Reads a lock's note (`Backend::read_note`).
    pub(crate) note_read: Script,
    /// Takes over a grant another client handed off (`Backend::adopt`).
    pub(crate) adopt: Script,
    /// The minimal lock's release, measured against by `distlock bench`: delete the key if
    /// it still holds the token.
    pub(crate) compare_and_delete: Script,
    /// Every script's source, the releasing ones first: loaded in this order on one
    /// connection, no call that takes a lock can run while one that gives it back would
    /// still find its script missing.
    /// Each with its hash.
    sources: Vec<(String, String)>,
}

impl Scripts {
    /// Whether `script` is one of these.
    fn holds(&self, script: &Script) -> bool {
        self.sources
            .iter()
            .any(|(_, hash)| hash == script.get_hash())
    }
}

/// Builds the scripts, keeping each one's source in the order built (to load them all).
#[derive(Default)]
struct Sources(Vec<(String, String)>);

impl Sources {
    fn plain(&mut self, code: &str) -> Script {
        let script = Script::new(code);
        self.0.push((code.to_owned(), script.get_hash().to_owned()));
        script
    }

    /// A full script: the key names, the helpers and `body`.
    fn full(&mut self, body: &str) -> Script {
        self.plain(&[KEYS, HELPERS, body].join("\n"))
    }
}

/// The scripts, built in the order [`Scripts::sources`] keeps: the releasing ones first.
pub(crate) static SCRIPTS: LazyLock<Scripts> = LazyLock::new(|| {
    let mut sources = Sources::default();
    Scripts {
        release_exclusive: sources.plain(include_str!("scripts/release_fast.lua")),
        release: sources.full(include_str!("scripts/release.lua")),
        cancel: sources.full(include_str!("scripts/cancel.lua")),
        force_release: sources.full(include_str!("scripts/force_release.lua")),
        compare_and_delete: sources.plain(
            "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0",
        ),
        renew: sources.full(include_str!("scripts/renew.lua")),
        note_write: sources.full(include_str!("scripts/note_write.lua")),
        note_read: sources.plain(include_str!("scripts/note_read.lua")),
        redlock_waiting: sources.plain(include_str!("scripts/redlock_waiting.lua")),
        seed_fence: sources.plain(include_str!("scripts/seed_fence.lua")),
        restamp: sources.plain(include_str!("scripts/restamp.lua")),
        adopt: sources.full(include_str!("scripts/adopt.lua")),
        try_exclusive: sources.plain(include_str!("scripts/acquire_fast.lua")),
        acquire: sources.full(include_str!("scripts/acquire.lua")),
        sources: sources.0,
    }
});

/// One call of a script on one lock's keys: an EVALSHA command, loading the script when the
/// server does not have it (after a restart). The command is built in one buffer, key names
/// included.
pub(crate) struct Call<'a> {
    script: &'a Script,
    cmd: Cmd,
}

impl<'a> Call<'a> {
    /// A call of `script` on keys `which` of `keys`; arguments follow with [`arg`](Self::arg).
    pub(crate) fn new(script: &'a Script, keys: LockKeys<'_>, which: &[Key]) -> Call<'a> {
        let mut cmd = Cmd::with_capacity(which.len() + 16, 384);
        cmd.arg("EVALSHA").arg(script.get_hash()).arg(which.len());
        for key in keys.list(which) {
            cmd.arg(key);
        }
        Call { script, cmd }
    }

    /// A call of `script` on `keys` named outright (another client's layout).
    pub(crate) fn with_keys(script: &'a Script, keys: &[&str]) -> Call<'a> {
        let mut cmd = Cmd::with_capacity(keys.len() + 8, 256);
        cmd.arg("EVALSHA").arg(script.get_hash()).arg(keys.len());
        for key in keys {
            cmd.arg(*key);
        }
        Call { script, cmd }
    }

    /// Appends an argument (`ARGV`).
    pub(crate) fn arg(&mut self, arg: impl ToRedisArgs) -> &mut Self {
        self.cmd.arg(arg);
        self
    }

    /// The EVALSHA command, for a pipeline (which must load the script itself).
    pub(crate) fn into_command(self) -> Cmd {
        self.cmd
    }

    /// Runs the call on `conn`, and once more if the server lacked the script, once it
    /// has been given it (with the others of its layout: see [`load_ours`]).
    pub(crate) async fn run<T: FromRedisValue>(&self, conn: &mut Conn) -> RedisResult<T> {
        match self.cmd.query_async(conn).await {
            Err(err) if lacks_script(&err) => {
                self.load(conn).await?;
                self.cmd.query_async(conn).await
            }
            answer => answer,
        }
    }

    /// Gives the server this call's script: every script of this layout where it is one
    /// (see [`load_ours`]).
    async fn load(&self, conn: &mut Conn) -> RedisResult<()> {
        match SCRIPTS.holds(self.script) {
            true => load_ours(conn).await,
            false => self
                .script
                .prepare_invoke()
                .load_async(conn)
                .await
                .map(drop),
        }
    }
}

/// Whether the server answered that it lacks the script.
pub(crate) fn lacks_script(err: &redis::RedisError) -> bool {
    err.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript)
}

/// Loads every script of [`SCRIPTS`], the releasing ones first. A server that lost one
/// script lost them all (a restart, a flush): loading the others with it spares each its
/// own failed call, and no call that needs a second script finds only the first. One
/// server's are loaded in one pipeline; a cluster's one by one, each on every primary.
pub(crate) async fn load_ours(conn: &mut Conn) -> RedisResult<()> {
    let loads = SCRIPTS.sources.iter().map(|(code, _)| {
        let mut load = redis::cmd("SCRIPT");
        load.arg("LOAD").arg(code);
        load
    });
    match conn {
        Conn::Single(_) => {
            let mut pipe = redis::pipe();
            for load in loads {
                pipe.add_command(load).ignore();
            }
            pipe.query_async(conn).await
        }
        Conn::Cluster(_) => {
            for load in loads {
                let _: String = load.query_async(conn).await?;
            }
            Ok(())
        }
    }
}
