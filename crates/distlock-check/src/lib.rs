#![doc = include_str!("../docs.md")]

pub mod checker;
pub mod history;
mod recorder;
pub mod report;

pub use recorder::Recorder;
