//! The torture report: one self-contained HTML file (inline SVG, style and script; nothing
//! fetched) that draws a run's history. A row per worker; each hold a bar labelled with its
//! token; renewals as ticks, AtRisk and Lost as marks; pauses shaded and kills struck
//! through; refused stale writes marked; every violation a red band across the rows while
//! it went on, its events ringed in red, and listed below with links to both; a summary
//! table above.
//!
//! ```
//! use distlock_check::checker::{Limits, check};
//! use distlock_check::history::parse;
//! use distlock_check::report::render;
//! let history = parse(concat!(
//!     r#"{"at":0,"worker":1,"ev":"granted","token":1,"safe_until":100}"#, "\n",
//!     r#"{"at":50,"worker":2,"ev":"granted","token":2,"safe_until":150}"#,
//! ))?;
//! let verdict = check(&history, &Limits { liveness: 1_000 });
//! let html = render(&history, &verdict, "two holders");
//! assert!(html.contains(r#"class="hold bad""#) && html.contains(r#"<li id="v0""#));
//! # Ok::<(), String>(())
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;

use crate::checker::{Held, Verdict, holds};
use crate::history::{Event, What};
use assets::{LEGEND, SCRIPT, STYLE};

mod assets;
mod tables;

/// The most holds, marks (renewals, health changes, writes) and violations a report draws
/// (besides the holds and events a drawn violation names): a day-long run has millions,
/// and a browser cannot show them; the summary still counts them all.
const MOST_HOLDS: usize = 20_000;
const MOST_MARKS: usize = 50_000;
const MOST_VIOLATIONS: usize = 1_000;

/// How a strike at a RedLock master is recorded (then the master's number).
const MASTER_STRIKES: [&str; 3] = ["master-restart", "failover", "master-clock-jump"];

/// Where the plot starts (after the row labels), how wide it is, and how tall a row is.
const LEFT: f64 = 80.0;
const WIDTH: f64 = 1100.0;
const ROW: f64 = 28.0;
/// The height of the time axis above the rows.
const AXIS: f64 = 24.0;

/// The report of a run whose history is `events` (sorted by time) and whose verdict is
/// `verdict`, headed `title`.
///
/// # Examples
///
/// ```
/// use distlock_check::checker::{Limits, check};
/// use distlock_check::report::render;
/// let html = render(&[], &check(&[], &Limits { liveness: 1 }), "empty");
/// assert!(html.starts_with("<!doctype html>") && html.contains("verdict: clean"));
/// ```
pub fn render(events: &[Event], verdict: &Verdict, title: &str) -> String {
    let mut html =
        String::with_capacity(64 * 1024 + events.len().min(MOST_HOLDS + MOST_MARKS) * 160);
    html.push_str("<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">");
    let _ = write!(
        html,
        "<title>{}</title><style>{STYLE}</style></head><body>",
        escape(title)
    );
    let _ = write!(html, "<h1>{}</h1>", escape(title));
    match verdict.clean() {
        true => html.push_str("<p class=\"verdict clean\">verdict: clean</p>"),
        false => {
            let _ = write!(
                html,
                "<p class=\"verdict dirty\">verdict: {} violations</p>",
                verdict.violations.len()
            );
        }
    }
    tables::summary(&mut html, events, verdict);
    Plot::new(events, verdict).draw(&mut html);
    html.push_str(LEGEND);
    tables::violations(&mut html, events, verdict);
    let _ = writeln!(html, "<script>{SCRIPT}</script></body></html>");
    html
}

/// The timeline: its scale, and the workers' rows.
struct Plot<'a> {
    events: &'a [Event],
    verdict: &'a Verdict,
    /// The events the drawn violations name.
    blamed: BTreeSet<usize>,
    /// The holds drawn.
    drawn: Vec<Held>,
    /// The first and last event's time.
    from: u64,
    to: u64,
    /// Each worker's row, from the top.
    rows: BTreeMap<u32, usize>,
    /// Whether the holds are an election's terms.
    terms: bool,
}

impl<'a> Plot<'a> {
    fn new(events: &'a [Event], verdict: &'a Verdict) -> Plot<'a> {
        let from = events.first().map_or(0, |e| e.at);
        let to = events.last().map_or(0, |e| e.at).max(from + 1);
        let workers: BTreeSet<u32> = events
            .iter()
            // The coordinator's own events (worker 0): the start, and server faults.
            .filter(|e| e.worker != 0)
            .map(|e| e.worker)
            .collect();
        let rows = workers
            .into_iter()
            .enumerate()
            .map(|(row, w)| (w, row))
            .collect();
        let blamed: BTreeSet<usize> = verdict
            .violations
            .iter()
            .take(MOST_VIOLATIONS)
            .flat_map(|v| v.events.iter().copied())
            .collect();
        let drawn = holds(events)
            .into_iter()
            .enumerate()
            .filter(|(n, held)| *n < MOST_HOLDS || blamed.contains(&held.grant))
            .map(|(_, held)| held)
            .collect();
        let terms = events
            .iter()
            .any(|e| matches!(&e.what, What::Start { scheme, .. } if scheme == "election"));
        Plot {
            events,
            verdict,
            blamed,
            drawn,
            from,
            to,
            rows,
            terms,
        }
    }

    /// The x of time `at`.
    fn x(&self, at: u64) -> f64 {
        let at = at.clamp(self.from, self.to);
        LEFT + (at - self.from) as f64 / (self.to - self.from) as f64 * WIDTH
    }

    /// The top of `worker`'s row.
    fn y(&self, worker: u32) -> Option<f64> {
        self.rows.get(&worker).map(|&row| AXIS + row as f64 * ROW)
    }

    fn draw(&self, html: &mut String) {
        let height = AXIS + self.rows.len() as f64 * ROW + 8.0;
        let _ = write!(
            html,
            "<svg id=\"timeline\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{height}\" viewBox=\"0 0 {w} {height}\">",
            w = LEFT + WIDTH + 20.0,
        );
        self.axis(html);
        for (&worker, &row) in &self.rows {
            let y = AXIS + row as f64 * ROW;
            let _ = write!(
                html,
                "<rect class=\"row{}\" x=\"0\" y=\"{y}\" width=\"{}\" height=\"{ROW}\"/><text class=\"label\" x=\"4\" y=\"{}\">worker {worker}</text>",
                if row % 2 == 0 { " alt" } else { "" },
                LEFT + WIDTH + 20.0,
                y + ROW / 2.0 + 4.0
            );
        }
        self.bands(html);
        self.faults(html);
        self.holds(html);
        self.marks(html);
        html.push_str("</svg>");
    }

    /// Ticks at a round interval, about ten across.
    fn axis(&self, html: &mut String) {
        let span = self.to - self.from;
        let rough = (span / 10).max(1);
        let magnitude = 10u64.pow(rough.ilog10());
        let step = [1, 2, 5, 10]
            .iter()
            .map(|m| m * magnitude)
            .find(|&s| s >= rough)
            .unwrap_or(rough);
        let mut tick = 0;
        while tick <= span {
            let x = self.x(self.from + tick);
            let _ = write!(
                html,
                "<line class=\"tick\" x1=\"{x:.1}\" y1=\"{AXIS}\" x2=\"{x:.1}\" y2=\"{}\"/><text class=\"time\" x=\"{x:.1}\" y=\"14\">{}</text>",
                AXIS + self.rows.len() as f64 * ROW,
                seconds(tick)
            );
            tick += step;
        }
    }

    /// A red band across every row while each violation went on.
    fn bands(&self, html: &mut String) {
        let bottom = AXIS + self.rows.len() as f64 * ROW;
        for (number, violation) in self
            .verdict
            .violations
            .iter()
            .enumerate()
            .take(MOST_VIOLATIONS)
        {
            let [from, to] = violation.span;
            let (x1, x2) = (self.x(from), self.x(to));
            let _ = write!(
                html,
                "<rect id=\"b{number}\" class=\"band\" x=\"{:.1}\" y=\"{AXIS}\" width=\"{:.1}\" height=\"{}\"><title>{}: {}</title></rect>",
                x1 - 1.5,
                (x2 - x1).max(0.0) + 3.0,
                bottom - AXIS,
                kind_name(violation.kind),
                escape(&violation.message)
            );
        }
    }

    /// Pauses shaded (to their resume, or the end), cut and black-holed links shaded (to
    /// their heal), kills struck through; a server's pause or restart, and a RedLock
    /// master out of reach, shaded across every row, and a strike at a master drawn
    /// across them.
    fn faults(&self, html: &mut String) {
        // What is open on each worker: a pause or a link fault, since when, and its title.
        let mut open: BTreeMap<(u32, &str), (u64, String)> = BTreeMap::new();
        let mut server: Option<(u64, &str)> = None;
        for event in self.events {
            let What::Fault { fault, step } = &event.what else {
                continue;
            };
            match fault.as_str() {
                "server-pause" | "server-restart" => server = Some((event.at, fault)),
                "server-resume" | "server-up" | "master-back" => {
                    if let Some((since, what)) = server.take() {
                        self.server_window(html, (since, event.at), what);
                    }
                }
                aside if aside.starts_with("master-aside") => server = Some((event.at, fault)),
                strike if MASTER_STRIKES.iter().any(|s| strike.starts_with(s)) => {
                    self.strike(html, event.at, strike);
                }
                _ => {}
            }
            let Some(y) = self.y(event.worker) else {
                continue;
            };
            let at = step
                .as_ref()
                .map_or(String::new(), |step| format!(" at {step}"));
            match fault.as_str() {
                "pause" => {
                    open.insert((event.worker, "pause"), (event.at, format!("paused{at}")));
                }
                "cut" | "black-hole" => {
                    let title = format!("link {fault}");
                    open.insert((event.worker, "link"), (event.at, title));
                }
                "clock-jump" => {
                    let title = "wall clock jumped ahead".to_owned();
                    open.insert((event.worker, "clock"), (event.at, title));
                }
                "resume" | "heal" | "clock-back" => {
                    let kind = match fault.as_str() {
                        "resume" => "pause",
                        "heal" => "link",
                        _ => "clock",
                    };
                    if let Some((since, title)) = open.remove(&(event.worker, kind)) {
                        self.window(html, (y, kind), (since, event.at), &title);
                    }
                }
                "kill" => {
                    let x = self.x(event.at);
                    let _ = write!(
                        html,
                        "<line class=\"kill\" x1=\"{x:.1}\" y1=\"{}\" x2=\"{x:.1}\" y2=\"{}\"><title>killed{} at {}</title></line>",
                        y + 2.0,
                        y + ROW - 2.0,
                        escape(&at),
                        self.time(event.at)
                    );
                }
                _ => {}
            }
        }
        for ((worker, kind), (since, title)) in open {
            if let Some(y) = self.y(worker) {
                self.window(html, (y, kind), (since, self.to), &title);
            }
        }
        if let Some((since, what)) = server {
            self.server_window(html, (since, self.to), what);
        }
    }

    /// A strike at a RedLock master (`what`, as recorded), across every row.
    fn strike(&self, html: &mut String, at: u64, what: &str) {
        let x = self.x(at);
        let _ = write!(
            html,
            "<line class=\"strike\" x1=\"{x:.1}\" y1=\"{AXIS}\" x2=\"{x:.1}\" y2=\"{}\"><title>{} at {}</title></line>",
            AXIS + self.rows.len() as f64 * ROW,
            escape(what),
            self.time(at)
        );
    }

    /// A server fault's window, across every row.
    fn server_window(&self, html: &mut String, (since, until): (u64, u64), what: &str) {
        let (x1, x2) = (self.x(since), self.x(until));
        let _ = write!(
            html,
            "<rect class=\"server\" x=\"{x1:.1}\" y=\"{AXIS}\" width=\"{:.1}\" height=\"{}\"><title>{} from {} to {}</title></rect>",
            (x2 - x1).max(1.0),
            self.rows.len() as f64 * ROW,
            escape(what),
            self.time(since),
            self.time(until)
        );
    }

    /// A fault's window on the row at `y`: `kind` is its class (`pause`, `link` or `clock`).
    fn window(
        &self,
        html: &mut String,
        (y, kind): (f64, &str),
        (since, until): (u64, u64),
        title: &str,
    ) {
        let (x1, x2) = (self.x(since), self.x(until));
        let _ = write!(
            html,
            "<rect class=\"{kind}\" x=\"{x1:.1}\" y=\"{}\" width=\"{:.1}\" height=\"{}\"><title>{} from {} to {}</title></rect>",
            y + 1.0,
            (x2 - x1).max(1.0),
            ROW - 2.0,
            escape(title),
            self.time(since),
            self.time(until)
        );
    }

    /// Each hold a bar (an election's: each term), labelled with its token when there is
    /// room; a bar whose grant a violation names is outlined in red.
    fn holds(&self, html: &mut String) {
        let held_as = match self.terms {
            true => "led term",
            false => "held with token",
        };
        for held in &self.drawn {
            let Some(y) = self.y(held.worker) else {
                continue;
            };
            let (x1, x2) = (self.x(held.start), self.x(held.end));
            let width = (x2 - x1).max(1.5);
            let class = match self.blamed.contains(&held.grant) {
                true => "hold bad",
                false => "hold",
            };
            let _ = write!(
                html,
                "<rect id=\"e{}\" class=\"{class}\" x=\"{x1:.1}\" y=\"{}\" width=\"{width:.1}\" height=\"{}\"><title>worker {} {held_as} {} from {} to {}</title></rect>",
                held.grant,
                y + 6.0,
                ROW - 12.0,
                held.worker,
                held.token,
                self.time(held.start),
                self.time(held.end),
            );
            let label = short_token(held.token);
            if width >= 8.0 * label.len() as f64 {
                let _ = write!(
                    html,
                    "<text class=\"token\" x=\"{:.1}\" y=\"{}\">{label}</text>",
                    x1 + 3.0,
                    y + ROW / 2.0 + 4.0
                );
            }
        }
        if self.verdict.stats.acquisitions as usize > self.drawn.len() {
            let _ = write!(
                html,
                "<text class=\"note\" x=\"{LEFT}\" y=\"{}\">{} of {} holds are drawn: the first {MOST_HOLDS}, and those a violation names</text>",
                AXIS - 12.0,
                self.drawn.len(),
                self.verdict.stats.acquisitions
            );
        }
    }

    /// Renewals, health changes, resource writes, and a ring around every event a
    /// violation names (its link target, unless its hold's bar is).
    fn marks(&self, html: &mut String) {
        let bars: BTreeSet<usize> = self.drawn.iter().map(|h| h.grant).collect();
        let mut marks = 0;
        for (index, event) in self.events.iter().enumerate() {
            let Some(y) = self.y(event.worker) else {
                continue;
            };
            let x = self.x(event.at);
            let when = self.time(event.at);
            let blamed = self.blamed.contains(&index);
            let marked = matches!(
                event.what,
                What::Renewed { .. } | What::Health { .. } | What::Write { .. }
            );
            if marked && !blamed {
                marks += 1;
                if marks > MOST_MARKS {
                    continue;
                }
            }
            let _ = match &event.what {
                What::Renewed { .. } => write!(
                    html,
                    "<line class=\"renew\" x1=\"{x:.1}\" y1=\"{}\" x2=\"{x:.1}\" y2=\"{}\"><title>renewed at {when}</title></line>",
                    y + 2.0,
                    y + 6.0
                ),
                What::Health { health } if health == "at-risk" => write!(
                    html,
                    "<path class=\"atrisk\" d=\"M{x:.1} {} l4 7 h-8 z\"><title>at risk at {when}</title></path>",
                    y + 1.0
                ),
                What::Health { health } if health == "lost" => write!(
                    html,
                    "<text class=\"lost\" x=\"{:.1}\" y=\"{}\">✕<title>lost at {when}</title></text>",
                    x - 4.0,
                    y + ROW - 2.0
                ),
                What::Write { token, accepted } => write!(
                    html,
                    "<circle class=\"{}\" cx=\"{x:.1}\" cy=\"{}\" r=\"{}\"><title>write with token {token} {} at {when}</title></circle>",
                    if *accepted { "write" } else { "refused" },
                    y + ROW - 5.0,
                    if *accepted { 1.5 } else { 3.5 },
                    if *accepted {
                        "accepted"
                    } else {
                        "refused (stale)"
                    },
                ),
                _ => Ok(()),
            };
            if blamed && !bars.contains(&index) {
                let _ = write!(
                    html,
                    "<circle id=\"e{index}\" class=\"mark\" cx=\"{x:.1}\" cy=\"{}\" r=\"6\"><title>event #{index} ({}) at {when}</title></circle>",
                    y + ROW / 2.0,
                    event_name(&event.what)
                );
            }
        }
    }

    /// `at` in ms from the first event.
    fn time(&self, at: u64) -> String {
        match at {
            u64::MAX => "the end".into(),
            at => ms(at.saturating_sub(self.from)),
        }
    }
}

/// A token short enough to label a bar: its last five digits.
fn short_token(token: u64) -> String {
    match token {
        0..=99_999 => token.to_string(),
        _ => format!("…{:05}", token % 100_000),
    }
}

fn ms(ns: u64) -> String {
    format!("{:.1} ms", ns as f64 / 1e6)
}

fn seconds(ns: u64) -> String {
    match ns {
        0 => "0".into(),
        ns if ns < 1_000_000_000 => format!("{} ms", ns / 1_000_000),
        ns => format!("{} s", ns as f64 / 1e9),
    }
}

fn kind_name(kind: crate::checker::Kind) -> String {
    serde_json::to_value(kind)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}

/// The history's name of an event: its `ev`, as the history writes it.
fn event_name(what: &What) -> String {
    serde_json::to_value(what)
        .ok()
        .and_then(|value| value["ev"].as_str().map(str::to_owned))
        .unwrap_or_default()
}

/// `text` safe inside HTML text and attribute values.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::render;
    use crate::checker::{Limits, check};
    use crate::history::{Event, What};

    #[test]
    fn a_master_out_of_reach_is_shaded_and_a_strike_drawn_across_the_rows() {
        let fault = |at: u64, name: &str| Event {
            at,
            worker: 0,
            what: What::Fault {
                fault: name.into(),
                step: None,
            },
        };
        let events = [
            Event {
                at: 0,
                worker: 1,
                what: What::Granted {
                    token: 1,
                    safe_until: 1_000,
                },
            },
            fault(100, "master-aside 2"),
            fault(200, "master-back"),
            fault(300, "failover 1"),
        ];
        let html = render(&events, &check(&events, &Limits { liveness: 1 }), "run");
        assert!(html.contains("<title>master-aside 2 from "), "{html}");
        assert!(html.contains("class=\"strike\""), "{html}");
        assert!(html.contains("<title>failover 1 at "), "{html}");
    }
}
