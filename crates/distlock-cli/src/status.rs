//! `distlock status`: who holds what.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use distlock::{LockOptions, LockState, Result};

use crate::args::StatusArgs;
use crate::deadline::{unanswered, within};
use crate::location::connect_shared;
use crate::output::outln;

pub async fn status(url: &Option<String>, args: StatusArgs) -> Result<u8> {
    if let Some(name) = &args.name {
        distlock::validate_name(name)?;
    }
    // Connecting and the listing, together within the default operation timeout: a store
    // that hangs is told of, not waited on.
    let ask = async {
        let (_, client) =
            connect_shared(url, "`status` shows the locks other processes hold").await?;
        let states = client.status(args.name.as_deref()).await?;
        Ok((client, states))
    };
    let within_limit = LockOptions::new().op_timeout_value();
    let (client, states) = within(within_limit, ask, unanswered).await?;
    if args.json {
        let json = serde_json::to_string_pretty(&states)
            .map_err(|e| distlock::Error::invalid(format!("cannot encode status: {e}")))?;
        outln!("{json}");
    } else {
        let place_of = |name: &str| client.place_of(name);
        crate::output::stdout_text(&table(&states, place_of));
    }
    Ok(0)
}

/// The table of `states`; `place_of` gives where a lock lives in the store, where that is
/// not its name.
pub(crate) fn table(states: &[LockState], place_of: impl Fn(&str) -> Option<String>) -> String {
    if states.is_empty() {
        return "no locks are held or awaited\n".to_owned();
    }
    let now_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0);
    // Columns as wide as their widest entry, so long tokens keep the rows aligned.
    let holders = states.iter().flat_map(|state| &state.holders);
    let waiters = states.iter().flat_map(|state| &state.waiters);
    let kind_width = holders
        .clone()
        .map(|h| permits_label(h.kind.as_str(), h.permits).len())
        .chain(waiters.map(|w| permits_label(w.kind.as_str(), w.permits).len()))
        .max()
        .unwrap_or(0);
    let token_width = holders
        .clone()
        .map(|h| h.fencing_token.to_string().len())
        .max()
        .unwrap_or(0);
    let ttl_width = holders.map(|h| ttl_label(h).len()).max().unwrap_or(0);
    let mut out = String::new();
    for state in states {
        let place = place_of(&state.name).map_or_else(String::new, |place| format!(", {place}"));
        out.push_str(&format!(
            "{}  (last fencing token {}, {} waiting{place})\n",
            state.name,
            state.last_fencing_token,
            state.waiters.len()
        ));
        if state.holders.is_empty() {
            out.push_str("  free\n");
        }
        for h in &state.holders {
            out.push_str(&format!(
                "  held: {:<kind_width$} token {:<token_width$} ttl left {:<ttl_width$} by {}{}{}\n",
                permits_label(h.kind.as_str(), h.permits),
                h.fencing_token,
                ttl_label(h),
                h.owner,
                h.stored_as
                    .as_ref()
                    .map_or_else(String::new, |id| format!(" as {id}")),
                whereabouts(&h.meta, now_ms, true),
            ));
        }
        for w in &state.waiters {
            out.push_str(&format!(
                "  wait: {:<kind_width$}{} by {}{}\n",
                permits_label(w.kind.as_str(), w.permits),
                if w.fair { " fair" } else { "" },
                w.owner,
                whereabouts(&w.meta, now_ms, false),
            ));
        }
    }
    out
}

/// A holder's time left: its lease's, `session` for a grant its client's session holds, or
/// `no expiry` for a foreign one that only deleting it ends.
fn ttl_label(holder: &distlock::HolderInfo) -> String {
    match (holder.no_expiry, holder.remaining_ms) {
        (true, _) => "no expiry".to_owned(),
        (false, None) => "session".to_owned(),
        (false, Some(ms)) => format!("{:.1}s", ms as f64 / 1000.0),
    }
}

/// ` (host h, pid p, for d)`: what the store knows of where a request comes from and, for a
/// holder, since when. A foreign client's lock (another library's key) records none of it.
fn whereabouts(meta: &distlock::HolderMeta, now_ms: u64, held: bool) -> String {
    let mut parts = Vec::new();
    if !meta.host.is_empty() {
        parts.push(format!("host {}", meta.host));
    }
    if meta.pid != 0 {
        parts.push(format!("pid {}", meta.pid));
    }
    if held && meta.acquired_at_unix_ms != 0 {
        let held_for = Duration::from_millis(now_ms.saturating_sub(meta.acquired_at_unix_ms));
        parts.push(format!(
            "for {}",
            humantime::format_duration(Duration::from_secs(held_for.as_secs()))
        ));
    }
    match parts.is_empty() {
        true => String::new(),
        false => format!(" ({})", parts.join(", ")),
    }
}

fn permits_label(kind: &str, permits: u32) -> String {
    if kind == "semaphore" {
        format!("{permits} permit{}", if permits == 1 { "" } else { "s" })
    } else {
        kind.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use distlock::{HolderInfo, HolderMeta, LockKind, WaiterInfo};

    use super::*;

    fn meta(pid: u32, acquired_at_unix_ms: u64) -> HolderMeta {
        HolderMeta {
            host: "db-7".to_owned(),
            pid,
            acquired_at_unix_ms,
        }
    }

    fn holder(kind: LockKind, token: u64, remaining_ms: Option<u64>) -> HolderInfo {
        let mut holder = HolderInfo::new("owner-a", kind, token);
        holder.permits = 2;
        holder.remaining_ms = remaining_ms;
        holder.meta = meta(42, 1);
        holder
    }

    /// Where each field starts on a line: the offsets of `token `, `ttl left ` and ` by `.
    fn columns(line: &str) -> (usize, usize, usize) {
        let at = |what: &str| {
            line.find(what)
                .unwrap_or_else(|| panic!("{what} in {line}"))
        };
        (at(" token "), at(" ttl left "), at(" by "))
    }

    #[test]
    fn holders_line_up_whatever_their_tokens_and_a_session_grant_shows_as_one() {
        let mut a = LockState::new("jobs/a");
        a.last_fencing_token = 1_795_665_427_729_000;
        let semaphore = LockKind::Semaphore { limit: 4 };
        a.holders = vec![holder(semaphore, 1_795_665_427_729_000, Some(29_500))];
        let mut waiter = WaiterInfo::new("owner-b", LockKind::Mutex);
        waiter.fair = true;
        waiter.meta = meta(43, 0);
        a.waiters = vec![waiter];
        let mut b = LockState::new("jobs/b");
        b.last_fencing_token = 7;
        b.holders = vec![holder(LockKind::Mutex, 7, None)];
        let states = vec![a, b];
        let table = table(&states, |_| None);
        let held: Vec<&str> = table.lines().filter(|l| l.contains("held:")).collect();
        assert_eq!(held.len(), 2, "{table}");
        assert_eq!(columns(held[0]), columns(held[1]), "aligned:\n{table}");
        assert!(held[0].contains("2 permits") && held[0].contains("ttl left 29.5s"));
        assert!(held[1].contains("ttl left session"), "{table}");
        assert!(held[1].contains("(host db-7, pid 42, for "), "{table}");
        let waiter = table.lines().find(|l| l.contains("wait:")).unwrap();
        assert!(
            waiter.contains("wait: mutex ")
                && waiter.ends_with(" fair by owner-b (host db-7, pid 43)"),
            "{waiter}"
        );
        assert!(
            !waiter.contains(" for "),
            "a waiter holds nothing yet: {waiter}"
        );
    }

    #[test]
    fn nothing_held_says_so() {
        assert_eq!(table(&[], |_| None), "no locks are held or awaited\n");
    }
}
