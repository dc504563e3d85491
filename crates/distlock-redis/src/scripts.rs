//! The Lua scripts, kept as `.lua` files beside this one. `redis::Script` sends them with
//! EVALSHA and loads them again when the server answers NOSCRIPT (after a restart).

use std::sync::LazyLock;

use redis::Script;

const PRELUDE: &str = include_str!("scripts/prelude.lua");

fn with_prelude(body: &str) -> Script {
    Script::new(&format!("{PRELUDE}\n{body}"))
}

pub(crate) struct Scripts {
    pub(crate) acquire: Script,
    pub(crate) release: Script,
    pub(crate) renew: Script,
    pub(crate) cancel: Script,
}

pub(crate) static SCRIPTS: LazyLock<Scripts> = LazyLock::new(|| Scripts {
    acquire: with_prelude(include_str!("scripts/acquire.lua")),
    release: with_prelude(include_str!("scripts/release.lua")),
    renew: with_prelude(include_str!("scripts/renew.lua")),
    cancel: with_prelude(include_str!("scripts/cancel.lua")),
});
