//! The library half of the `distlock` command: the torture harness's history (what every
//! worker did, on one clock) and the checker that judges it. `distlock torture` runs a
//! lock under faults and writes the history; the checker finds two valid holders at once,
//! lost updates, stale writes a fenced resource accepted, tokens out of order, and a lock
//! left free while workers waited; the report draws it all in one HTML file.

pub mod checker;
pub mod history;
pub mod report;
