//! Fuzz target `url`: see `crates/distlock/tests/typed/mod.rs` for what must hold.
#![no_main]

// Each target uses one of the shared checks.
#[allow(dead_code)]
#[path = "../../crates/distlock/tests/typed/mod.rs"]
mod typed;

libfuzzer_sys::fuzz_target!(|text: &str| typed::url_holds(text));
