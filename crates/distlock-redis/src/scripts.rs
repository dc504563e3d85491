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

pub(crate) struct Scripts {
    pub(crate) acquire: Script,
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
    release: compose(
        include_str!("scripts/release_fast.lua"),
        include_str!("scripts/release.lua"),
    ),
    renew: compose("", include_str!("scripts/renew.lua")),
    cancel: compose("", include_str!("scripts/cancel.lua")),
    restamp: Script::new(include_str!("scripts/restamp.lua")),
    redlock_waiting: Script::new(include_str!("scripts/redlock_waiting.lua")),
});
