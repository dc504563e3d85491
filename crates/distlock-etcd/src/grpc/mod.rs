//! distlock's own etcd v3 client: the calls the backend makes, over one balanced gRPC channel
//! to the cluster's members, with credentials and etcd's leader requirement on every call.
//!
//! The protocol code (`etcdserverpb.rs`) is generated from `proto/etcd.proto` and checked in,
//! so building distlock needs no protoc (`tests/generated_code.rs` checks that it is what
//! the proto generates).
//!
//! Every call carries `hasleader: true` when the client requires a leader (a member without
//! one refuses it, where it would otherwise wait for an election), and the auth token when
//! the URL has credentials. A token etcd no longer knows (it expires after five idle
//! minutes, or the member restarted) is asked for again once, and the call made again.

pub(crate) mod ops;

#[allow(clippy::all, dead_code, missing_docs)]
#[rustfmt::skip]
#[path = "etcdserverpb.rs"]
pub(crate) mod pb;

use std::sync::{Arc, RwLock};
use std::time::Duration;

use distlock_core::{Error, Result};
use tokio::sync::mpsc;
use tonic::metadata::AsciiMetadataValue;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::channel::Change;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint};
use tonic::{Status, Streaming};

use pb::auth_client::AuthClient;
use pb::kv_client::KvClient;
use pb::lease_client::LeaseClient;
use pb::maintenance_client::MaintenanceClient;
use pb::watch_client::WatchClient;

/// What a call answers: etcd's message, or its status (a transport failure included).
pub(crate) type Answer<T> = std::result::Result<T, Status>;

/// How a client reaches the members.
#[derive(Clone, Default)]
pub(crate) struct Options {
    /// Whether calls carry `hasleader: true`.
    pub(crate) require_leader: bool,
    /// The PEM of the certificate authority the members' certificates chain to (TLS).
    pub(crate) tls_ca: Option<Vec<u8>>,
    /// `user` and `password`, exchanged for the token every call carries.
    pub(crate) credentials: Option<(String, String)>,
}

/// How long opening a connection to one member may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// The HTTP/2 pings that tell a silent connection from a quiet one. etcd refuses pings
/// more often than every 5 s (`--grpc-keepalive-min-time`) and closes a connection that
/// sends them; the session's keep-alive stream tells its health sooner anyway.
const PING_EVERY: Duration = Duration::from_secs(10);
const PING_TIMEOUT: Duration = Duration::from_secs(5);

/// The largest answer taken (etcd's default limit of a request is 1.5 MiB; a range of many
/// keys, as `status` reads, is larger).
const MAX_ANSWER: usize = 256 << 20;

/// The header etcd reads the auth token from.
const TOKEN_HEADER: &str = "token";

/// The client of a cluster; cheap to clone (clones share the channel and the token).
#[derive(Clone)]
pub(crate) struct Client {
    channel: Channel,
    /// Adds and removes members of the balanced channel.
    members: mpsc::Sender<Change<String, Endpoint>>,
    stamp: Stamp,
    options: Arc<Options>,
    /// Held while the token is asked for again, so concurrent calls ask once.
    refreshing: Arc<tokio::sync::Mutex<()>>,
}

/// What every call carries: the leader requirement and the current auth token.
#[derive(Clone)]
struct Stamp {
    require_leader: bool,
    token: Arc<RwLock<Option<AsciiMetadataValue>>>,
}

impl tonic::service::Interceptor for Stamp {
    fn call(&mut self, mut request: tonic::Request<()>) -> Answer<tonic::Request<()>> {
        let token = self.token.read().unwrap_or_else(|p| p.into_inner()).clone();
        if let Some(token) = token {
            request.metadata_mut().insert(TOKEN_HEADER, token);
        }
        if self.require_leader {
            request
                .metadata_mut()
                .insert("hasleader", AsciiMetadataValue::from_static("true"));
        }
        Ok(request)
    }
}

/// The channel a call goes through.
type Stub = InterceptedService<Channel, Stamp>;

impl Client {
    /// A client of the members at `endpoints` (`http://host:port` or `https://…`): no
    /// connection is opened before the first call, except to authenticate when `options`
    /// has credentials (whose refusal is the error).
    pub(crate) async fn connect(
        endpoints: &[String],
        options: &Options,
    ) -> std::result::Result<Client, ConnectError> {
        let (channel, members) = Channel::balance_channel(64);
        let client = Client {
            channel,
            members,
            stamp: Stamp {
                require_leader: options.require_leader,
                token: Arc::default(),
            },
            options: Arc::new(options.clone()),
            refreshing: Arc::default(),
        };
        for endpoint in endpoints {
            client
                .add_endpoint(endpoint)
                .await
                .map_err(ConnectError::Endpoint)?;
        }
        if client.options.credentials.is_some() {
            client.authenticate().await.map_err(ConnectError::Refused)?;
        }
        Ok(client)
    }

    /// The endpoint of `url` with this client's connection settings.
    fn endpoint(&self, url: &str) -> Result<Endpoint> {
        let bad = |why: String| Error::invalid(format!("bad etcd endpoint {url}: {why}"));
        let mut endpoint = Endpoint::from_shared(url.to_owned())
            .map_err(|e| bad(e.to_string()))?
            .connect_timeout(CONNECT_TIMEOUT)
            // Pings on an idle connection too, so a member that went silent is found before
            // a call is routed to it (a client always has its session's keep-alive stream
            // open, so etcd, which refuses pings without a stream, takes them).
            .keep_alive_while_idle(true)
            .http2_keep_alive_interval(PING_EVERY)
            .keep_alive_timeout(PING_TIMEOUT);
        if let Some(pem) = &self.options.tls_ca {
            let tls = ClientTlsConfig::new().ca_certificate(Certificate::from_pem(pem));
            endpoint = endpoint.tls_config(tls).map_err(|e| bad(e.to_string()))?;
        }
        Ok(endpoint)
    }

    /// Sends requests to the member at `url` too.
    pub(crate) async fn add_endpoint(&self, url: &str) -> Result<()> {
        let endpoint = self.endpoint(url)?;
        self.members
            .send(Change::Insert(url.to_owned(), endpoint))
            .await
            .map_err(|_| Error::invalid("the etcd client's channel is closed"))
    }

    /// Sends no more requests to the member at `url`.
    pub(crate) async fn remove_endpoint(&self, url: &str) -> Result<()> {
        self.members
            .send(Change::Remove(url.to_owned()))
            .await
            .map_err(|_| Error::invalid("the etcd client's channel is closed"))
    }

    fn stub(&self) -> Stub {
        InterceptedService::new(self.channel.clone(), self.stamp.clone())
    }

    /// The auth token calls carry now (`None` without credentials).
    pub(crate) fn token(&self) -> Option<AsciiMetadataValue> {
        self.stamp
            .token
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Exchanges the credentials for a token, which every later call carries.
    async fn authenticate(&self) -> Answer<()> {
        let Some((name, password)) = self.options.credentials.clone() else {
            return Ok(());
        };
        // Without the token: etcd refuses any call that carries one it no longer knows.
        let tokenless = Stamp {
            require_leader: self.stamp.require_leader,
            token: Arc::default(),
        };
        let stub = InterceptedService::new(self.channel.clone(), tokenless);
        let answer = AuthClient::new(stub)
            .authenticate(pb::AuthenticateRequest { name, password })
            .await?
            .into_inner();
        let token = AsciiMetadataValue::try_from(answer.token)
            .map_err(|_| Status::internal("etcd gave an auth token that is not ASCII"))?;
        *self.stamp.token.write().unwrap_or_else(|p| p.into_inner()) = Some(token);
        Ok(())
    }

    /// Asks for a new token unless another call did since `stale`, the token etcd refused
    /// as unknown (expired, or issued before the member restarted), was current.
    pub(crate) async fn renew_token(&self, stale: &AsciiMetadataValue) -> Answer<()> {
        let _refreshing = self.refreshing.lock().await;
        match self.token().as_ref() == Some(stale) {
            true => self.authenticate().await,
            false => Ok(()),
        }
    }

    /// Makes `call`, and once more after a new token when etcd refused the one it carried
    /// as unknown.
    async fn call<T, F, Fut>(&self, call: F) -> Answer<T>
    where
        F: Fn(Stub) -> Fut,
        Fut: Future<Output = Answer<T>>,
    {
        let carried = self.token();
        match (call(self.stub()).await, carried) {
            (Err(status), Some(carried)) if token_refused(&status) => {
                self.renew_token(&carried).await?;
                call(self.stub()).await
            }
            (answer, _) => answer,
        }
    }

    /// Reads a key or a range.
    pub(crate) async fn range(&self, request: pb::RangeRequest) -> Answer<pb::RangeResponse> {
        self.call(|stub| {
            let request = request.clone();
            async move {
                let mut kv = KvClient::new(stub).max_decoding_message_size(MAX_ANSWER);
                Ok(kv.range(request).await?.into_inner())
            }
        })
        .await
    }

    /// Writes a key.
    pub(crate) async fn put(&self, request: pb::PutRequest) -> Answer<pb::PutResponse> {
        self.call(|stub| {
            let request = request.clone();
            async move { Ok(KvClient::new(stub).put(request).await?.into_inner()) }
        })
        .await
    }

    /// Runs a transaction.
    pub(crate) async fn txn(&self, request: pb::TxnRequest) -> Answer<pb::TxnResponse> {
        self.call(|stub| {
            let request = request.clone();
            async move {
                let mut kv = KvClient::new(stub).max_decoding_message_size(MAX_ANSWER);
                Ok(kv.txn(request).await?.into_inner())
            }
        })
        .await
    }

    /// Grants a lease of `ttl` seconds.
    pub(crate) async fn lease_grant(&self, ttl: i64) -> Answer<pb::LeaseGrantResponse> {
        self.call(|stub| async move {
            let request = pb::LeaseGrantRequest { ttl, id: 0 };
            Ok(LeaseClient::new(stub)
                .lease_grant(request)
                .await?
                .into_inner())
        })
        .await
    }

    /// What is left of lease `id`, in seconds (-1 once it has expired).
    pub(crate) async fn lease_time_to_live(&self, id: i64) -> Answer<pb::LeaseTimeToLiveResponse> {
        self.call(|stub| async move {
            let request = pb::LeaseTimeToLiveRequest { id, keys: false };
            Ok(LeaseClient::new(stub)
                .lease_time_to_live(request)
                .await?
                .into_inner())
        })
        .await
    }

    /// Revokes lease `id`, deleting the keys on it.
    pub(crate) async fn lease_revoke(&self, id: i64) -> Answer<()> {
        self.call(|stub| async move {
            let request = pb::LeaseRevokeRequest { id };
            LeaseClient::new(stub).lease_revoke(request).await.map(drop)
        })
        .await
    }

    /// Opens a keep-alive stream for lease `id`, its first keep-alive sent: the sending half
    /// (a keep-alive per message) and the answers.
    pub(crate) async fn lease_keep_alive(
        &self,
        id: i64,
    ) -> Answer<(
        mpsc::UnboundedSender<pb::LeaseKeepAliveRequest>,
        Streaming<pb::LeaseKeepAliveResponse>,
    )> {
        self.call(|stub| async move {
            let (sender, requests) = mpsc::unbounded_channel();
            // etcd answers the stream's opening with its first message: send one first.
            let _ = sender.send(pb::LeaseKeepAliveRequest { id });
            let requests = tokio_stream::wrappers::UnboundedReceiverStream::new(requests);
            let answers = LeaseClient::new(stub).lease_keep_alive(requests).await?;
            Ok((sender, answers.into_inner()))
        })
        .await
    }

    /// Opens a watch stream with `first` as its first request: the sending half and the
    /// answers.
    pub(crate) async fn watch(
        &self,
        first: pb::WatchRequest,
    ) -> Answer<(
        mpsc::UnboundedSender<pb::WatchRequest>,
        Streaming<pb::WatchResponse>,
    )> {
        self.call(|stub| {
            let first = first.clone();
            async move {
                let (sender, requests) = mpsc::unbounded_channel();
                let _ = sender.send(first);
                let requests = tokio_stream::wrappers::UnboundedReceiverStream::new(requests);
                let mut watch = WatchClient::new(stub).max_decoding_message_size(MAX_ANSWER);
                let answers = watch.watch(requests).await?;
                Ok((sender, answers.into_inner()))
            }
        })
        .await
    }

    /// The member's status (its leader, 0 for none).
    pub(crate) async fn status(&self) -> Answer<pb::StatusResponse> {
        self.call(|stub| async move {
            let request = pb::StatusRequest {};
            Ok(MaintenanceClient::new(stub)
                .status(request)
                .await?
                .into_inner())
        })
        .await
    }
}

/// Whether etcd refused a call for the auth token it carried (not for the credentials).
fn token_refused(status: &Status) -> bool {
    status.message().contains(TOKEN_REFUSED)
}

/// What etcd says of a token it does not know (a refused call's status, or the reason it
/// cancels a watch with).
pub(crate) const TOKEN_REFUSED: &str = "invalid auth token";

/// Why a client could not be made.
#[derive(Debug)]
pub(crate) enum ConnectError {
    /// An endpoint that is no URI, or TLS settings that do not apply.
    Endpoint(Error),
    /// etcd refused (or did not answer) the authentication.
    Refused(Status),
}
