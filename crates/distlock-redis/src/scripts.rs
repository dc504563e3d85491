//! The Lua scripts, kept as `.lua` files beside this one and put together here: every
//! script starts with the lock's keys (`keys.lua`); acquire and release then take their
//! fast path before the shared helpers (`helpers.lua`) are defined, so the common case does
//! not pay for them. `redis::Script` sends them with EVALSHA and loads them again when the
//! server answers NOSCRIPT (after a restart).

use std::sync::LazyLock;

use redis::Script;

const KEYS: &str = include_str!("scripts/keys.lua");
const HELPERS: &str = include_str!("scripts/helpers.lua");

/// A script made of the key names, an optional fast path, the helpers and `body`.
fn compose(fast_path: &str, body: &str) -> Script {
    Script::new(&[KEYS, fast_path, HELPERS, body].join("\n"))
}

/// A script made of the key names and `fast_path` alone, answering `declined` where the
/// fast path does not apply (the caller then runs the full script). It takes only the
/// first five keys and is a fraction of the full script's cost on the server.
fn fast_only(fast_path: &str, declined: &str) -> Script {
    Script::new(&[KEYS, fast_path, declined].join("\n"))
}

pub(crate) struct Scripts {
    pub(crate) acquire: Script,
    /// The acquire fast path alone: `{-1}` when it does not apply.
    pub(crate) try_exclusive: Script,
    /// The release fast path alone: `-1` when it does not apply.
    pub(crate) release_exclusive: Script,
    pub(crate) release: Script,
    pub(crate) renew: Script,
    pub(crate) cancel: Script,
    pub(crate) restamp: Script,
    pub(crate) redlock_waiting: Script,
}

pub(crate) static SCRIPTS: LazyLock<Scripts> = LazyLock::new(|| Scripts {
    acquire: compose(
        include_str!("scripts/acquire_fast.lua"),
        include_str!("scripts/acquire.lua"),
    ),
    try_exclusive: fast_only(include_str!("scripts/acquire_fast.lua"), "return {-1}"),
    release: compose(
        include_str!("scripts/release_fast.lua"),
        include_str!("scripts/release.lua"),
    ),
    release_exclusive: fast_only(include_str!("scripts/release_fast.lua"), "return -1"),
    renew: compose("", include_str!("scripts/renew.lua")),
    cancel: compose("", include_str!("scripts/cancel.lua")),
    restamp: Script::new(include_str!("scripts/restamp.lua")),
    redlock_waiting: Script::new(include_str!("scripts/redlock_waiting.lua")),
});
