//! Wake-ups between processes sharing one SQLite database: each backend listens on a Linux
//! abstract Unix datagram socket and writes its name into its waiters' queue rows; whoever
//! frees a lock sends the head waiter's token to that socket. The waiter then polls at once
//! instead of at the end of its backoff. A lost wake-up costs only latency: waiters keep
//! polling with backoff all the same.

use std::sync::Arc;

use distlock_core::backend::LocalWakers;
use tokio::task::AbortHandle;

/// The socket this process's waiters are woken through.
#[derive(Debug)]
pub(super) struct WakeSocket {
    name: String,
    sender: Option<std::os::unix::net::UnixDatagram>,
    listener: Option<AbortHandle>,
}

/// Who to wake: a queued request's token and the socket its process listens on (the
/// address of the engine's [`Wake`]).
pub(super) use crate::lease_engine::Wake;

impl WakeSocket {
    /// Listens for wake-ups and hands them to `wakers`. Where no socket can be had (not
    /// Linux, or the socket call fails) the name is empty and waiters only poll.
    pub(super) fn listen(wakers: Arc<LocalWakers>) -> WakeSocket {
        let name = format!("distlock-{}", distlock_core::random_id());
        match bind(&name) {
            Ok(socket) => {
                let listener = tokio::spawn(receive(socket, wakers)).abort_handle();
                WakeSocket {
                    name,
                    sender: std::os::unix::net::UnixDatagram::unbound()
                        .and_then(|s| s.set_nonblocking(true).map(|()| s))
                        .ok(),
                    listener: Some(listener),
                }
            }
            Err(err) => {
                tracing::debug!(error = %err, "no wake-up socket; waiters will only poll");
                WakeSocket {
                    name: String::new(),
                    sender: None,
                    listener: None,
                }
            }
        }
    }

    /// The name other processes send to ("" when there is none).
    pub(super) fn name(&self) -> &str {
        &self.name
    }

    /// Wakes `wake`'s waiter: directly when it is ours, through its socket otherwise.
    pub(super) fn send(&self, wake: &Wake, wakers: &LocalWakers) {
        if wake.address == self.name {
            wakers.wake(&wake.token);
            return;
        }
        if wake.address.is_empty() {
            return;
        }
        if let Some(sender) = &self.sender
            && let Err(err) = send_to(sender, &wake.address, &wake.token)
        {
            tracing::trace!(error = %err, "wake-up not delivered; the waiter will poll");
        }
    }
}

impl Drop for WakeSocket {
    fn drop(&mut self) {
        if let Some(listener) = self.listener.take() {
            listener.abort();
        }
    }
}

async fn receive(socket: tokio::net::UnixDatagram, wakers: Arc<LocalWakers>) {
    let mut buf = [0u8; 256];
    loop {
        match socket.recv(&mut buf).await {
            Ok(n) => {
                if let Ok(token) = std::str::from_utf8(&buf[..n]) {
                    wakers.wake(token);
                }
            }
            Err(err) => {
                tracing::debug!(error = %err, "wake-up socket failed; waiters will only poll");
                return;
            }
        }
    }
}

#[cfg(target_os = "linux")]
fn bind(name: &str) -> std::io::Result<tokio::net::UnixDatagram> {
    use std::os::linux::net::SocketAddrExt;
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes())?;
    let socket = std::os::unix::net::UnixDatagram::bind_addr(&addr)?;
    socket.set_nonblocking(true)?;
    tokio::net::UnixDatagram::from_std(socket)
}

#[cfg(not(target_os = "linux"))]
fn bind(_name: &str) -> std::io::Result<tokio::net::UnixDatagram> {
    Err(std::io::Error::new(
        std::io::ErrorKind::Unsupported,
        "abstract sockets need Linux",
    ))
}

#[cfg(target_os = "linux")]
fn send_to(
    sender: &std::os::unix::net::UnixDatagram,
    name: &str,
    token: &str,
) -> std::io::Result<()> {
    use std::os::linux::net::SocketAddrExt;
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes())?;
    sender.send_to_addr(token.as_bytes(), &addr).map(|_| ())
}

#[cfg(not(target_os = "linux"))]
fn send_to(
    _sender: &std::os::unix::net::UnixDatagram,
    _name: &str,
    _token: &str,
) -> std::io::Result<()> {
    Ok(())
}
