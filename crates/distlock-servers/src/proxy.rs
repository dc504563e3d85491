//! A TCP proxy tests put between a client and its server, to delay traffic, swallow it, or
//! cut the client off, on command.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex as StdMutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::AbortHandle;

/// What the proxy does with traffic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProxyMode {
    /// Forward everything at once.
    Pass,
    /// Forward everything after this delay.
    Delay(Duration),
    /// Keep connections open but forward nothing: requests go unanswered.
    BlackHole,
    /// Close every connection and refuse new ones.
    Cut,
}

/// A fault-injecting TCP proxy on a free loopback port, forwarding to `target`. It runs on
/// the runtime it was started on and stops when dropped.
///
/// # Examples
///
/// ```no_run
/// # #[tokio::main]
/// # async fn main() {
/// use distlock_servers::{FaultProxy, ProxyMode};
/// let redis = distlock_servers::redis_server().unwrap();
/// let proxy = FaultProxy::start(redis.addr()).await.unwrap();
/// let url = format!("redis://{}/0", proxy.addr());
/// proxy.set(ProxyMode::Cut);
/// # }
/// ```
#[derive(Debug)]
pub struct FaultProxy {
    addr: SocketAddr,
    mode: Arc<watch::Sender<ProxyMode>>,
    /// Where new connections go.
    target: Arc<StdMutex<SocketAddr>>,
    /// The task accepting connections.
    accept: AbortHandle,
    /// The tasks copying each connection's two directions.
    connections: Arc<StdMutex<Vec<AbortHandle>>>,
}

impl FaultProxy {
    /// Starts forwarding to `target`.
    ///
    /// # Examples
    ///
    /// See [`FaultProxy`].
    pub async fn start(target: SocketAddr) -> std::io::Result<FaultProxy> {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        let (mode, _) = watch::channel(ProxyMode::Pass);
        let mode = Arc::new(mode);
        let target = Arc::new(StdMutex::new(target));
        let connections = Arc::new(StdMutex::new(Vec::<AbortHandle>::new()));
        let accept = {
            let (mode, target, connections) = (mode.clone(), target.clone(), connections.clone());
            tokio::spawn(async move {
                while let Ok((client, _)) = listener.accept().await {
                    if *mode.borrow() == ProxyMode::Cut {
                        continue;
                    }
                    let to = *target.lock().unwrap_or_else(|p| p.into_inner());
                    let Ok(server) = TcpStream::connect(to).await else {
                        continue;
                    };
                    let _ = client.set_nodelay(true);
                    let _ = server.set_nodelay(true);
                    let mut handles = connections.lock().unwrap_or_else(|p| p.into_inner());
                    // Redirected while it connected: its connections are to be closed.
                    if *target.lock().unwrap_or_else(|p| p.into_inner()) != to {
                        continue;
                    }
                    let (client_read, client_write) = client.into_split();
                    let (server_read, server_write) = server.into_split();
                    handles.retain(|handle| !handle.is_finished());
                    for (from, to) in [(client_read, server_write), (server_read, client_write)] {
                        let rx = mode.subscribe();
                        handles.push(tokio::spawn(pump(from, to, rx)).abort_handle());
                    }
                }
            })
        };
        Ok(FaultProxy {
            addr,
            mode,
            target,
            accept: accept.abort_handle(),
            connections,
        })
    }

    /// Where clients connect.
    ///
    /// # Examples
    ///
    /// See [`FaultProxy`].
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Switches what the proxy does, for current and new connections.
    ///
    /// # Examples
    ///
    /// See [`FaultProxy`].
    pub fn set(&self, mode: ProxyMode) {
        self.mode.send_replace(mode);
    }
}

impl FaultProxy {
    /// Sends new connections to `target` from now on, and closes those open (a client
    /// told by a failover where its server went reconnects so).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # #[tokio::main]
    /// # async fn main() {
    /// use distlock_servers::FaultProxy;
    /// let (old, new) = (distlock_servers::redis_server().unwrap(), distlock_servers::redis_server().unwrap());
    /// let proxy = FaultProxy::start(old.addr()).await.unwrap();
    /// proxy.redirect(new.addr());
    /// # }
    /// ```
    pub fn redirect(&self, target: SocketAddr) {
        *self.target.lock().unwrap_or_else(|p| p.into_inner()) = target;
        self.close_connections();
    }

    fn close_connections(&self) {
        let mut connections = self.connections.lock().unwrap_or_else(|p| p.into_inner());
        for task in connections.drain(..) {
            task.abort();
        }
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.accept.abort();
        self.close_connections();
    }
}

/// Copies one direction of a connection, obeying the mode; ends (closing both halves) on
/// `Cut`, end of stream, or an error.
async fn pump(
    mut from: OwnedReadHalf,
    mut to: OwnedWriteHalf,
    mut mode: watch::Receiver<ProxyMode>,
) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let read = tokio::select! {
            read = from.read(&mut buf) => read,
            changed = mode.wait_for(|m| *m == ProxyMode::Cut) => {
                let _ = changed;
                return;
            }
        };
        let n = match read {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        let current = *mode.borrow();
        match current {
            ProxyMode::Pass => {}
            ProxyMode::Delay(delay) => tokio::time::sleep(delay).await,
            ProxyMode::BlackHole => continue,
            ProxyMode::Cut => return,
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}
