//! `distlock break`: free a stuck lock by breaking its grants, after showing them.

use std::io::IsTerminal;

use distlock::{Client, Error, HolderInfo, LockOptions, LockState, Result};

use crate::args::BreakArgs;
use crate::deadline::{unanswered, within};
use crate::location::connect_shared;
use crate::output::{errln, outln};

/// Exit code when nothing was broken: the lock was free, no holder had the token, or the
/// break was declined at the prompt.
pub const NOTHING_BROKEN: u8 = 1;

pub async fn break_lock(url: &Option<String>, args: BreakArgs) -> Result<u8> {
    distlock::validate_name(&args.name)?;
    let interactive = std::io::stdin().is_terminal();
    if !args.yes && !interactive {
        return Err(Error::invalid(
            "`break` asks before it breaks a lock, and stdin is not a terminal: pass --yes",
        ));
    }
    let limit = LockOptions::new().op_timeout_value();
    let ask = async {
        let (_, client) = connect_shared(url, "`break` frees a lock other processes hold").await?;
        let states = client.status(Some(&args.name)).await?;
        Ok((client, states))
    };
    let (client, states) = within(limit, ask, unanswered).await?;
    let doomed: Vec<HolderInfo> = states
        .iter()
        .flat_map(|state| &state.holders)
        .filter(|holder| args.token.is_none_or(|token| token == holder.fencing_token))
        .cloned()
        .collect();
    if doomed.is_empty() {
        outln!("{}", nothing_to_break(&args.name, args.token, &states));
        return Ok(NOTHING_BROKEN);
    }
    let mut shown = LockState::new(args.name.clone());
    shown.last_fencing_token = states.first().map_or(0, |s| s.last_fencing_token);
    shown.holders = doomed.clone();
    let place_of = |name: &str| client.place_of(name);
    crate::output::stdout_text(&crate::status::table(&[shown], place_of));
    if !args.yes && !confirmed(doomed.len()).await? {
        outln!("not broken");
        return Ok(NOTHING_BROKEN);
    }
    let broken = break_each(&client, &args.name, &doomed).await?;
    for holder in &broken {
        outln!(
            "broke {} token {} of {}",
            holder.kind.as_str(),
            holder.fencing_token,
            holder.owner
        );
    }
    let gone = doomed.len().saturating_sub(broken.len());
    if gone > 0 {
        outln!("{gone} of the grants shown had already gone (released or expired)");
    }
    Ok(match broken.is_empty() {
        true => NOTHING_BROKEN,
        false => 0,
    })
}

/// Breaks exactly the grants shown, each by its token: a holder that came after the
/// listing is never broken unseen.
async fn break_each(client: &Client, name: &str, shown: &[HolderInfo]) -> Result<Vec<HolderInfo>> {
    let mut broken = Vec::new();
    for holder in shown {
        let ask = client.force_release(name, Some(holder.fencing_token));
        let limit = LockOptions::new().op_timeout_value();
        broken.extend(within(limit, ask, unanswered).await?);
    }
    Ok(broken)
}

/// Asks on the terminal whether to break `count` grants; only `y` or `yes` does.
async fn confirmed(count: usize) -> Result<bool> {
    errln!(
        "break {count} grant{}? A broken holder's late writes are refused only by resources that check fencing tokens. [y/N] ",
        if count == 1 { "" } else { "s" }
    );
    let answer = tokio::task::spawn_blocking(|| {
        let mut line = String::new();
        std::io::stdin().read_line(&mut line).map(|_| line)
    })
    .await
    .map_err(|e| Error::invalid(format!("the prompt failed: {e}")))?
    .map_err(|e| Error::invalid(format!("cannot read the answer: {e}")))?;
    Ok(matches!(
        answer.trim().to_ascii_lowercase().as_str(),
        "y" | "yes"
    ))
}

/// Why nothing is to be broken: the lock is free, or no holder has `token`.
fn nothing_to_break(name: &str, token: Option<u64>, states: &[LockState]) -> String {
    let held: Vec<String> = states
        .iter()
        .flat_map(|state| &state.holders)
        .map(|holder| holder.fencing_token.to_string())
        .collect();
    match token {
        Some(token) if !held.is_empty() => format!(
            "no holder of {name} has token {token} (held now by token {}): nothing broken",
            held.join(", ")
        ),
        _ => format!("{name} is free: nothing to break"),
    }
}
