//! The report's tables: the summary above the timeline, and the violations below it.

use std::collections::BTreeMap;
use std::fmt::Write;

use super::{MOST_VIOLATIONS, escape, event_name, kind_name, ms};
use crate::checker::Verdict;
use crate::history::{Event, What};

/// The summary table.
pub(super) fn summary(html: &mut String, events: &[Event], verdict: &Verdict) {
    let stats = &verdict.stats;
    let mut rows: Vec<(String, String)> = Vec::new();
    if let Some(What::Start {
        ttl,
        workers,
        scheme,
        backend,
        ..
    }) = events
        .iter()
        .map(|e| &e.what)
        .find(|w| matches!(w, What::Start { .. }))
    {
        rows.push(("backend".into(), backend.clone()));
        rows.push(("scheme".into(), scheme.clone()));
        rows.push(("workers".into(), workers.to_string()));
        rows.push(("TTL".into(), ms(*ttl)));
    }
    let mut by_kind: BTreeMap<String, usize> = BTreeMap::new();
    for violation in &verdict.violations {
        *by_kind.entry(kind_name(violation.kind)).or_default() += 1;
    }
    let by_kind: Vec<String> = by_kind.iter().map(|(k, n)| format!("{k} {n}")).collect();
    rows.extend([
        ("events".into(), events.len().to_string()),
        ("acquisitions".into(), stats.acquisitions.to_string()),
        ("transfers".into(), stats.transfers.to_string()),
        (
            "critical sections".into(),
            stats.critical_sections.to_string(),
        ),
        ("counter at the end".into(), stats.counter_final.to_string()),
        ("lost updates".into(), stats.lost_updates.to_string()),
        (
            "stale unfenced writes".into(),
            stats.stale_unfenced_writes.to_string(),
        ),
        ("writes accepted".into(), stats.writes_accepted.to_string()),
        (
            "stale writes refused".into(),
            stats.stale_writes_refused.to_string(),
        ),
        ("faults".into(), stats.faults.to_string()),
        (
            "longest free while waiting".into(),
            ms(stats.longest_free_wait_ns),
        ),
        (
            "starved workers".into(),
            format!("{:?}", stats.starved_workers),
        ),
        (
            "violations".into(),
            match by_kind.is_empty() {
                true => "none".into(),
                false => by_kind.join(", "),
            },
        ),
    ]);
    html.push_str("<table class=\"summary\">");
    for (name, value) in rows {
        let _ = write!(
            html,
            "<tr><th>{}</th><td>{}</td></tr>",
            escape(&name),
            escape(&value)
        );
    }
    html.push_str("</table>");
}

/// The violation list, each linking to its events' marks.
pub(super) fn violations(html: &mut String, events: &[Event], verdict: &Verdict) {
    html.push_str("<h2>Violations</h2>");
    if verdict.clean() {
        html.push_str("<p>none</p>");
        return;
    }
    let from = events.first().map_or(0, |e| e.at);
    let since = |at: u64| match at {
        u64::MAX => "the end".to_owned(),
        at => ms(at.saturating_sub(from)),
    };
    html.push_str("<ol id=\"violations\">");
    for (number, violation) in verdict.violations.iter().enumerate().take(MOST_VIOLATIONS) {
        let ids: Vec<String> = violation.events.iter().map(|e| e.to_string()).collect();
        let _ = write!(
            html,
            "<li id=\"v{number}\" class=\"violation\" data-events=\"{}\"><b>{}</b> {} <span class=\"events\"><a href=\"#b{number}\">{} to {}</a>; events:",
            ids.join(" "),
            kind_name(violation.kind),
            escape(&violation.message),
            since(violation.span[0]),
            since(violation.span[1]),
        );
        for &index in &violation.events {
            let what = events
                .get(index)
                .map_or_else(|| "?".to_owned(), |e| event_name(&e.what));
            let _ = write!(html, " <a href=\"#e{index}\">#{index} {what}</a>");
        }
        html.push_str("</span></li>");
    }
    html.push_str("</ol>");
    if verdict.violations.len() > MOST_VIOLATIONS {
        let _ = write!(
            html,
            "<p class=\"note\">the first {MOST_VIOLATIONS} of {} violations are drawn and listed (<code>--json</code> lists them all)</p>",
            verdict.violations.len()
        );
    }
}
