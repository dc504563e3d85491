//! `distlock status`: who holds what.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use distlock::{LockState, Result};

use crate::args::StatusArgs;
use crate::location::connect;

pub async fn status(url: &Option<String>, args: StatusArgs) -> Result<u8> {
    let (_, client) = connect(url).await?;
    let states = client.status(args.name.as_deref()).await?;
    if args.json {
        let json = serde_json::to_string_pretty(&states)
            .map_err(|e| distlock::Error::invalid(format!("cannot encode status: {e}")))?;
        println!("{json}");
    } else {
        print!("{}", table(&states));
    }
    Ok(0)
}

fn table(states: &[LockState]) -> String {
    if states.is_empty() {
        return "no locks are held or awaited\n".to_owned();
    }
    let now_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0);
    let mut out = String::new();
    for state in states {
        out.push_str(&format!(
            "{}  (last fencing token {}, {} waiting)\n",
            state.name,
            state.last_fencing_token,
            state.waiters.len()
        ));
        if state.holders.is_empty() {
            out.push_str("  free\n");
        }
        for h in &state.holders {
            let held_for = Duration::from_millis(now_ms.saturating_sub(h.meta.acquired_at_unix_ms));
            out.push_str(&format!(
                "  held: {:<9} token {:<6} ttl left {:<8} by {} (host {}, pid {}, for {})\n",
                permits_label(h.kind.as_str(), h.permits),
                h.fencing_token,
                h.remaining_ms.map_or_else(
                    || "session".to_owned(),
                    |ms| format!("{:.1}s", ms as f64 / 1000.0),
                ),
                h.owner,
                h.meta.host,
                h.meta.pid,
                humantime::format_duration(Duration::from_secs(held_for.as_secs())),
            ));
        }
        for w in &state.waiters {
            out.push_str(&format!(
                "  wait: {:<9}{} by {} (host {}, pid {})\n",
                permits_label(w.kind.as_str(), w.permits),
                if w.fair { " fair" } else { "" },
                w.owner,
                w.meta.host,
                w.meta.pid,
            ));
        }
    }
    out
}

fn permits_label(kind: &str, permits: u32) -> String {
    if kind == "semaphore" {
        format!("{permits} permit{}", if permits == 1 { "" } else { "s" })
    } else {
        kind.to_owned()
    }
}
