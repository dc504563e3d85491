//! The Lua scripts, kept as `.lua` files beside this one. `redis::Script` sends them with
//! EVALSHA and loads them again when the server answers NOSCRIPT (after a restart).

use std::sync::LazyLock;

use redis::Script;

const WAKE_HEAD: &str = include_str!("scripts/wake_head.lua");

pub(crate) struct Scripts {
    pub(crate) acquire: Script,
    pub(crate) release: Script,
    pub(crate) renew: Script,
    pub(crate) cancel: Script,
}

pub(crate) static SCRIPTS: LazyLock<Scripts> = LazyLock::new(|| Scripts {
    acquire: Script::new(include_str!("scripts/acquire.lua")),
    release: Script::new(&format!(
        "{WAKE_HEAD}\n{}",
        include_str!("scripts/release.lua")
    )),
    renew: Script::new(include_str!("scripts/renew.lua")),
    cancel: Script::new(&format!(
        "{WAKE_HEAD}\n{}",
        include_str!("scripts/cancel.lua")
    )),
});
