//! The command connection of a client: one multiplexed, reconnecting connection to a single
//! server, or a cluster connection that follows the slots (MOVED, ASK, failover).

use std::path::Path;
use std::time::Duration;

use distlock_core::{Error, Result, Url, redact_url};
use redis::aio::{ConnectionLike, ConnectionManager};
use redis::cluster::ClusterClientBuilder;
use redis::cluster_async::ClusterConnection;
use redis::{Cmd, Pipeline, RedisFuture, Value};

use crate::error::{connect_error, redis_error};

/// Where a client's commands go.
#[derive(Clone)]
pub(crate) enum Conn {
    /// One server (or a primary).
    Single(ConnectionManager),
    /// A Redis Cluster: each command goes to the node serving its key's slot.
    Cluster(ClusterConnection),
}

impl ConnectionLike for Conn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Conn::Single(conn) => conn.req_packed_command(cmd),
            Conn::Cluster(conn) => conn.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Conn::Single(conn) => conn.req_packed_commands(pipeline, offset, count),
            Conn::Cluster(conn) => conn.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Conn::Single(conn) => conn.get_db(),
            Conn::Cluster(conn) => conn.get_db(),
        }
    }
}

/// A connection to one server that holds keys, for a SCAN: the client's own to a single
/// server, or one made to a cluster's primary.
pub(crate) enum ServerConn {
    /// The client's connection to its one server.
    Pooled(Conn),
    /// A connection to one primary of a cluster.
    Node(redis::aio::MultiplexedConnection),
}

impl ConnectionLike for ServerConn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            ServerConn::Pooled(conn) => conn.req_packed_command(cmd),
            ServerConn::Node(conn) => conn.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            ServerConn::Pooled(conn) => conn.req_packed_commands(pipeline, offset, count),
            ServerConn::Node(conn) => conn.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            ServerConn::Pooled(conn) => conn.get_db(),
            ServerConn::Node(conn) => conn.get_db(),
        }
    }
}

/// The certificate authority of `tls_ca`, read for a TLS connection.
fn certificates(tls_ca: &Path) -> Result<redis::TlsCertificates> {
    let root_cert = std::fs::read(tls_ca).map_err(|e| {
        Error::invalid(format!("cannot read tls_ca {}: {e}", tls_ca.display()))
            .with_backend("redis")
    })?;
    Ok(redis::TlsCertificates {
        client_tls: None,
        root_cert: Some(root_cert),
    })
}

fn bad_url(url: &Url) -> impl Fn(redis::RedisError) -> Error + '_ {
    move |e| {
        Error::invalid(format!("bad redis URL `{}`: {e}", redact_url(url.as_str())))
            .with_backend("redis")
    }
}

/// A client of the one server `url` names, trusting `tls_ca` for TLS if given.
pub(crate) fn single_client(url: &Url, tls_ca: Option<&Path>) -> Result<redis::Client> {
    if url.scheme() == "rediss" {
        // Any process-wide choice made earlier stands; otherwise use ring.
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
    match tls_ca {
        Some(path) => {
            redis::Client::build_with_tls(url.as_str(), certificates(path)?).map_err(bad_url(url))
        }
        None => redis::Client::open(url.as_str()).map_err(bad_url(url)),
    }
}

/// Checks that the server answers (a wrong password or an unreachable server fails here at
/// once, where a reconnecting connection would keep trying); whether it is a cluster node.
pub(crate) async fn probe(client: &redis::Client, connect_timeout: Duration) -> Result<bool> {
    let config = redis::AsyncConnectionConfig::new().set_connection_timeout(Some(connect_timeout));
    let mut probe = client
        .get_multiplexed_async_connection_with_config(&config)
        .await
        .map_err(connect_error)?;
    let info: String = redis::cmd("INFO")
        .arg("cluster")
        .query_async(&mut probe)
        .await
        .map_err(connect_error)?;
    Ok(info.lines().any(|line| line.trim() == "cluster_enabled:1"))
}

/// A cluster connection learning the layout from `seeds`.
pub(crate) async fn cluster(
    seeds: &[Url],
    tls_ca: Option<&Path>,
    connect_timeout: Duration,
) -> Result<Conn> {
    let urls: Vec<&str> = seeds.iter().map(Url::as_str).collect();
    // Bounded like a single server's connection: a command whose node is gone fails
    // within seconds (the guard goes at risk), never after minutes of retries.
    let mut builder = ClusterClientBuilder::new(urls)
        .connection_timeout(connect_timeout)
        .response_timeout(Duration::from_millis(500))
        .overall_response_timeout(Some(Duration::from_secs(2)))
        .retries(5)
        .min_retry_wait(10)
        .max_retry_wait(500)
        .retry_wait_formula(10, 2);
    if let Some(path) = tls_ca {
        builder = builder.certs(certificates(path)?);
    }
    let client = builder.build().map_err(bad_url(&seeds[0]))?;
    let mut conn = client.get_async_connection().await.map_err(connect_error)?;
    let _: String = redis::cmd("PING")
        .query_async(&mut conn)
        .await
        .map_err(connect_error)?;
    Ok(Conn::Cluster(conn))
}

/// What a sharded listener lost.
pub(crate) enum Ended {
    /// A channel's subscription (the server ends it when the channel's slot moves to
    /// another node, as well as when asked).
    Channel(String),
    /// Its connection to a node (which may be gone for good, its slots served elsewhere).
    Connection,
}

/// A cluster connection for sharded pub/sub, learning the layout from `seeds`: it speaks
/// RESP3, subscribes each channel on the node serving its slot (again after a reconnect
/// to that node), hands every message (a channel's name and payload) to `heard`, and
/// what it lost to `ended`.
pub(crate) async fn sharded_listener(
    seeds: &[Url],
    tls_ca: Option<&Path>,
    connect_timeout: Duration,
    heard: impl Fn(&str, &str) + Send + Sync + 'static,
    ended: impl Fn(Ended) + Send + Sync + 'static,
) -> Result<ClusterConnection> {
    let urls: Vec<&str> = seeds.iter().map(Url::as_str).collect();
    let mut builder = ClusterClientBuilder::new(urls)
        .use_protocol(redis::ProtocolVersion::RESP3)
        .push_sender(move |push: redis::PushInfo| {
            if push.kind == redis::PushKind::Disconnection {
                ended(Ended::Connection);
            } else if push.kind == redis::PushKind::SUnsubscribe {
                if let Some(Ok(channel)) = push.data.first().map(redis::from_redis_value_ref) {
                    ended(Ended::Channel(channel));
                }
            } else if let Some(message) = redis::Msg::from_push_info(push)
                && let Ok(payload) = message.get_payload::<String>()
            {
                heard(message.get_channel_name(), &payload);
            }
            Ok::<(), std::convert::Infallible>(())
        })
        .connection_timeout(connect_timeout)
        .response_timeout(Duration::from_millis(500))
        .overall_response_timeout(Some(Duration::from_secs(2)));
    if let Some(path) = tls_ca {
        builder = builder.certs(certificates(path)?);
    }
    let client = builder.build().map_err(bad_url(&seeds[0]))?;
    client.get_async_connection().await.map_err(connect_error)
}

/// Whether a cluster's servers have sharded pub/sub (Redis 7.0 and later), as Redisson's
/// clients decide it: `PUBSUB SHARDNUMSUB` answers, where an older server refuses it as
/// an unknown subcommand. Any other failure is an error, not an answer.
pub(crate) async fn has_sharded_pubsub(conn: &mut Conn) -> Result<bool> {
    let asked = redis::cmd("PUBSUB")
        .arg("SHARDNUMSUB")
        .query_async::<Value>(conn)
        .await;
    match asked {
        Ok(_) => Ok(true),
        Err(err) if err.code() == Some("ERR") => Ok(false),
        Err(err) => Err(connect_error(err)),
    }
}

/// The addresses (`host:port`) of a cluster's primaries, from `CLUSTER NODES`.
pub(crate) async fn primaries(conn: &mut Conn) -> Result<Vec<String>> {
    let nodes: String = redis::cmd("CLUSTER")
        .arg("NODES")
        .query_async(conn)
        .await
        .map_err(redis_error("inspect"))?;
    Ok(nodes
        .lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let flags = fields.get(2)?;
            let primary = flags.split(',').any(|f| f == "master")
                && !flags.split(',').any(|f| f == "fail" || f == "noaddr");
            let address = fields.get(1)?.split('@').next()?;
            primary.then(|| address.to_owned())
        })
        .collect())
}
