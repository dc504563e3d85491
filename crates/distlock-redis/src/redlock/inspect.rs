//! What `status` shows of a RedLock lock: each lock as a majority of masters sees it.

use std::collections::BTreeMap;
use std::time::Duration;

use distlock_core::backend::Backend;
use distlock_core::{HolderInfo, LockState, Result};

use super::backend::RedlockBackend;

impl RedlockBackend {
    /// Each lock as a majority of masters sees it: holders present on a majority
    /// ([`merged`](Self::merged)), and the waiters any master noted.
    pub(super) async fn states(&self, name: Option<&str>) -> Result<Vec<LockState>> {
        let answers = self
            .on_all(Duration::from_secs(5), |master| master.inspect(name))
            .await;
        self.quorum_of("inspect", &answers)?;
        let mut by_name: BTreeMap<String, (u64, Vec<HolderInfo>)> = BTreeMap::new();
        for state in answers.into_iter().flatten().flatten() {
            let (fence, holders) = by_name.entry(state.name).or_default();
            *fence = (*fence).max(state.last_fencing_token);
            holders.extend(state.holders);
        }
        let mut states = Vec::new();
        for (lock, (last_fencing_token, seen)) in by_name {
            let noted = self
                .on_all(Duration::from_secs(5), |master| {
                    master.redlock_waiters(&lock)
                })
                .await;
            let mut waiters: Vec<_> = noted
                .into_iter()
                .flatten()
                .flatten()
                .collect::<BTreeMap<_, _>>()
                .into_values()
                .collect();
            waiters.sort_by_key(|w| w.meta.acquired_at_unix_ms);
            let holders = self.merged(seen, self.quorum);
            if name.is_some() || !holders.is_empty() || !waiters.is_empty() {
                let mut state = LockState::new(lock);
                state.last_fencing_token = last_fencing_token;
                state.holders = holders;
                state.waiters = waiters;
                states.push(state);
            }
        }
        Ok(states)
    }

    /// The grants of one lock seen on the masters, one per owner and kind, where seen on
    /// `at_least` masters: with the fencing token a majority shows (the one the holder was
    /// given: the grant stamps it on every master of its majority, while a master that
    /// answered too late may show a higher number of its own), else the highest, and the
    /// shortest time left among them.
    pub(super) fn merged(
        &self,
        seen: impl IntoIterator<Item = HolderInfo>,
        at_least: usize,
    ) -> Vec<HolderInfo> {
        let mut holders: BTreeMap<String, (Vec<u64>, HolderInfo)> = BTreeMap::new();
        for holder in seen {
            let key = format!("{}/{}", holder.owner, holder.kind.as_str());
            let seen = holders.entry(key).or_insert((Vec::new(), holder.clone()));
            seen.0.push(holder.fencing_token);
            seen.1.remaining_ms = match (seen.1.remaining_ms, holder.remaining_ms) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
        }
        holders
            .into_values()
            .filter(|(tokens, _)| tokens.len() >= at_least)
            .map(|(tokens, mut holder)| {
                let agreed = tokens
                    .iter()
                    .find(|t| tokens.iter().filter(|u| u == t).count() >= self.quorum);
                holder.fencing_token = agreed
                    .or(tokens.iter().max())
                    .copied()
                    .unwrap_or(holder.fencing_token);
                holder
            })
            .collect()
    }
}
