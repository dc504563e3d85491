//! Which members of a cluster a client's requests go to.
//!
//! The gRPC channel spreads requests over every member it was given, and keeps sending to a
//! member that is down (each such request fails) or that lost its quorum (each fails, or
//! waits for a leader). So with several members, each is asked for its status every
//! second on a connection of its own: one that does not answer within the probe bound, or
//! answers without knowing a leader, takes no requests until it answers with one again.
//! When no member answers, requests go to all of them (and fail with the reason). That
//! is one more connection and one status call a second per member for every client.

use std::time::Duration;

use distlock_core::Result;
use tokio::task::JoinSet;

use crate::config::EtcdConfig;
use crate::grpc::{Client, ConnectError, Options};
use crate::watches::Watches;

/// How often each member is asked for its status.
const PROBE_EVERY: Duration = Duration::from_secs(1);

/// How long a member may take to answer a status probe.
const PROBE_BOUND: Duration = Duration::from_millis(800);

/// The members of a cluster of two or more, and which of them take requests.
pub(crate) struct Members {
    members: Vec<Member>,
}

/// One member: its endpoint, a client that speaks to it alone, and whether requests go to
/// it.
struct Member {
    endpoint: String,
    probe: Client,
    in_use: bool,
}

impl Members {
    /// The members of `config`, probed with `options` (its TLS, not its credentials: a
    /// status needs none), or `None` when there is only one (it takes every request).
    pub(crate) async fn of(config: &EtcdConfig, options: &Options) -> Result<Option<Members>> {
        if config.endpoints.len() < 2 {
            return Ok(None);
        }
        let options = Options {
            require_leader: false,
            credentials: None,
            ..options.clone()
        };
        let mut members = Vec::new();
        for endpoint in &config.endpoints {
            // Makes no call without credentials: the connection is opened by the first probe.
            let probe = match Client::connect(std::slice::from_ref(endpoint), &options).await {
                Ok(probe) => probe,
                Err(ConnectError::Endpoint(err)) => return Err(err.with_backend("etcd")),
                Err(ConnectError::Refused(status)) => {
                    return Err(crate::error::etcd_error("connect")(status));
                }
            };
            members.push(Member {
                endpoint: endpoint.clone(),
                probe,
                in_use: false,
            });
        }
        Ok(Some(Members { members }))
    }

    /// Probes every member at once and chooses the endpoints requests go to first.
    pub(crate) async fn choose(&mut self) -> Vec<String> {
        let (wanted, _) = self.wanted().await;
        self.members
            .iter_mut()
            .zip(wanted)
            .filter_map(|(member, wanted)| {
                member.in_use = wanted;
                wanted.then(|| member.endpoint.clone())
            })
            .collect()
    }

    /// Whether requests should go to each member: to those that serve, or to all when
    /// none does (the second answer).
    async fn wanted(&self) -> (Vec<bool>, bool) {
        let serving = self.serving().await;
        let none_serves = !serving.contains(&true);
        let wanted = serving
            .iter()
            .map(|serving| *serving || none_serves)
            .collect();
        (wanted, none_serves)
    }

    /// Whether each member answers a status within the probe bound, knowing a leader.
    async fn serving(&self) -> Vec<bool> {
        let mut probes = JoinSet::new();
        for (index, member) in self.members.iter().enumerate() {
            let probe = member.probe.clone();
            probes.spawn(async move {
                let status = tokio::time::timeout(PROBE_BOUND, probe.status()).await;
                (index, matches!(status, Ok(Ok(s)) if s.leader != 0))
            });
        }
        let mut serving = vec![false; self.members.len()];
        while let Some(answer) = probes.join_next().await {
            if let Ok((index, answered)) = answer {
                serving[index] = answered;
            }
        }
        serving
    }

    /// Probes every member and steers `client`'s requests to those that serve (to all when
    /// none does): whether a member was taken out.
    async fn steer(&mut self, client: &Client) -> bool {
        let (wanted, none_serves) = self.wanted().await;
        let mut taken_out = false;
        for (member, wanted) in self.members.iter_mut().zip(wanted) {
            if wanted == member.in_use {
                continue;
            }
            let changed = match wanted {
                true => client.add_endpoint(&member.endpoint).await,
                false => client.remove_endpoint(&member.endpoint).await,
            };
            if changed.is_err() {
                continue;
            }
            member.in_use = wanted;
            taken_out |= !wanted;
            let endpoint = &member.endpoint;
            match (wanted, none_serves) {
                (true, false) => {
                    tracing::info!(member = %endpoint, "etcd member serves again; requests go to it")
                }
                (true, true) => {
                    tracing::warn!(member = %endpoint, "no etcd member serves; requests go to every member")
                }
                (false, _) => {
                    tracing::warn!(member = %endpoint, "etcd member does not serve (down, hung or without a leader); no requests go to it")
                }
            }
        }
        taken_out
    }
}

/// Steers the requests of a client to the members that serve, every [`PROBE_EVERY`],
/// until `client` (which gives the client's channel and its watch stream) says it was
/// dropped; the watch stream leaves a member taken out (one that hangs would hold it
/// without breaking it).
pub(crate) async fn follow(
    mut members: Members,
    client: impl Fn() -> Option<(Client, Watches)> + Send,
) {
    loop {
        tokio::time::sleep(PROBE_EVERY).await;
        let Some((client, watches)) = client() else {
            return;
        };
        if members.steer(&client).await {
            watches.reset();
        }
    }
}
