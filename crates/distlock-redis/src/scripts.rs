//! The Lua scripts, kept as `.lua` files beside this one and put together here: every full
//! script starts with the lock's keys (`keys.lua`) and the shared helpers (`helpers.lua`).
//! The fast paths of acquire and release are scripts of their own, as small as the grant
//! allows: on the server, each key, argument and command of a script costs about as much
//! as a short script's whole work, and they run on every uncontended cycle.
//! `redis::Script` sends them with EVALSHA and loads them again when the server answers
//! NOSCRIPT (after a restart).

use std::sync::LazyLock;

use redis::{Cmd, FromRedisValue, RedisResult, Script, ToRedisArgs};

use crate::keys::{Key, LockKeys};

const KEYS: &str = include_str!("scripts/keys.lua");
const HELPERS: &str = include_str!("scripts/helpers.lua");

/// A full script: the key names, the helpers and `body`.
fn compose(body: &str) -> Script {
    Script::new(&[KEYS, HELPERS, body].join("\n"))
}

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
}

pub(crate) static SCRIPTS: LazyLock<Scripts> = LazyLock::new(|| Scripts {
    acquire: compose(include_str!("scripts/acquire.lua")),
    try_exclusive: Script::new(include_str!("scripts/acquire_fast.lua")),
    release: compose(include_str!("scripts/release.lua")),
    release_exclusive: Script::new(include_str!("scripts/release_fast.lua")),
    renew: compose(include_str!("scripts/renew.lua")),
    cancel: compose(include_str!("scripts/cancel.lua")),
    restamp: Script::new(include_str!("scripts/restamp.lua")),
    redlock_waiting: Script::new(include_str!("scripts/redlock_waiting.lua")),
    force_release: compose(include_str!("scripts/force_release.lua")),
    note_write: compose(include_str!("scripts/note_write.lua")),
    note_read: Script::new(include_str!("scripts/note_read.lua")),
    adopt: compose(include_str!("scripts/adopt.lua")),
    compare_and_delete: Script::new(
        "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0",
    ),
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

    /// Runs the call on `conn`, loading the script first if the server lacks it.
    pub(crate) async fn run<T: FromRedisValue>(
        &self,
        conn: &mut impl redis::aio::ConnectionLike,
    ) -> RedisResult<T> {
        match self.cmd.query_async(conn).await {
            Err(err)
                if err.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript) =>
            {
                self.script.prepare_invoke().load_async(conn).await?;
                self.cmd.query_async(conn).await
            }
            answer => answer,
        }
    }
}
