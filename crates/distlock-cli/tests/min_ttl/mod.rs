//! The shortest TTL `distlock run` takes, held on each backend.

use std::path::Path;

use crate::common::distlock;

/// A run at the shortest TTL `run` takes (1 s) holds its lock for ten times its length on
/// the backend at `url` (its command ends with 0, nothing lost), and a shorter TTL is refused
/// as bad input.
pub fn holds_at_the_minimum_ttl(url: &str, state: &Path) {
    let out = distlock(
        url,
        state,
        &[
            "run", "--name", "min-ttl", "--ttl", "1s", "--", "sleep", "10",
        ],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{url}: {stderr}");
    assert!(!stderr.contains("lost"), "{url}: {stderr}");
    let out = distlock(
        url,
        state,
        &["run", "--name", "min-ttl", "--ttl", "999ms", "--", "true"],
    );
    assert_eq!(out.status.code(), Some(64), "{url}: {out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("shorter than the minimum"));
}
