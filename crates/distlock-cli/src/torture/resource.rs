//! The fenced resource: a service on a loopback port that accepts a write only with a
//! fencing token not below the highest it accepted (a grant may write many times, as a
//! leader does in its term; a later grant's first write shuts out every earlier grant),
//! and records each verdict in the history. Its protocol is one line per write, `<worker> <token>`, answered `accepted` or
//! `refused`. For a negative control it can ignore tokens, accepting every write, as a
//! resource that knows nothing of fencing does.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use distlock::{Error, ErrorKind, Result};
use distlock_check::history::What;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

use super::record::Recorder;

/// Starts the resource on a free loopback port, `fenced` or ignoring tokens: its address.
/// It serves until the process ends.
pub async fn start(recorder: Arc<Recorder>, fenced: bool) -> Result<SocketAddr> {
    let listener = TcpListener::bind("127.0.0.1:0").await.map_err(|e| {
        Error::new(
            ErrorKind::Backend,
            format!("cannot start the fenced resource: {e}"),
        )
    })?;
    let addr = listener
        .local_addr()
        .map_err(|e| Error::new(ErrorKind::Backend, e.to_string()))?;
    // The highest token accepted; the verdict is recorded while it is held, so the
    // history has the verdicts in the order they were made.
    let last = Arc::new(Mutex::new(0u64));
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(serve(stream, fenced, last.clone(), recorder.clone()));
        }
    });
    Ok(addr)
}

async fn serve(stream: TcpStream, fenced: bool, last: Arc<Mutex<u64>>, recorder: Arc<Recorder>) {
    let (reader, mut writer) = stream.into_split();
    let mut lines = BufReader::new(reader).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        let Some((worker, token)) = line
            .split_once(' ')
            .and_then(|(w, t)| Some((w.parse::<u32>().ok()?, t.parse::<u64>().ok()?)))
        else {
            return;
        };
        let accepted = {
            let mut last = last.lock().unwrap_or_else(|p| p.into_inner());
            let accepted = !fenced || token >= *last;
            if accepted {
                *last = token.max(*last);
            }
            recorder.record(worker, What::Write { token, accepted });
            accepted
        };
        let answer: &[u8] = if accepted {
            b"accepted\n"
        } else {
            b"refused\n"
        };
        if writer.write_all(answer).await.is_err() {
            return;
        }
    }
}

/// A worker's connection to the resource.
pub struct Writer {
    lines: tokio::io::Lines<BufReader<tokio::net::tcp::OwnedReadHalf>>,
    writer: tokio::net::tcp::OwnedWriteHalf,
}

impl Writer {
    /// Connects to the resource at `addr`.
    pub async fn connect(addr: SocketAddr) -> Result<Writer> {
        let stream = TcpStream::connect(addr).await.map_err(|e| {
            Error::new(
                ErrorKind::Backend,
                format!("cannot reach the fenced resource: {e}"),
            )
        })?;
        let (reader, writer) = stream.into_split();
        Ok(Writer {
            lines: BufReader::new(reader).lines(),
            writer,
        })
    }

    /// Writes with `token` as `worker`, and waits for the verdict (which the resource
    /// records).
    pub async fn write(&mut self, worker: u32, token: u64) -> Result<()> {
        let lost = |e: std::io::Error| {
            Error::new(ErrorKind::Backend, format!("lost the fenced resource: {e}"))
        };
        self.writer
            .write_all(format!("{worker} {token}\n").as_bytes())
            .await
            .map_err(lost)?;
        match self.lines.next_line().await.map_err(lost)? {
            Some(_) => Ok(()),
            None => Err(Error::new(ErrorKind::Backend, "the fenced resource closed")),
        }
    }
}
