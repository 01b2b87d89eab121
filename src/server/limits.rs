//! Connection-level limits of the webhook listener: a cap on open connections, TLS handshake,
//! header and idle timeouts, and HTTP/2 stream limits.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum_server::accept::Accept;
use prometheus_client::metrics::counter::Counter;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Limits on the webhook listener's connections.
#[derive(Debug, Clone)]
pub struct ConnectionSettings {
    /// Open connections at most; further ones are closed at once (and counted).
    pub max_connections: usize,
    /// Time a client gets to finish the TLS handshake.
    pub tls_handshake_timeout: Duration,
    /// Time a client gets to send a request's headers (the first request's included).
    pub header_read_timeout: Duration,
    /// Concurrent HTTP/2 streams per connection.
    pub max_concurrent_streams: u32,
    /// Largest request header block (HTTP/1.1 buffer and HTTP/2 header list), in bytes.
    pub max_header_bytes: usize,
    /// A connection that sends nothing for this long is closed (HTTP/2 has no idle timeout of
    /// its own; idle HTTP/1.1 keep-alive connections are closed by the header timeout).
    pub idle_timeout: Duration,
}

impl Default for ConnectionSettings {
    fn default() -> Self {
        ConnectionSettings {
            max_connections: 4096,
            tls_handshake_timeout: Duration::from_secs(10),
            header_read_timeout: Duration::from_secs(10),
            max_concurrent_streams: 256,
            max_header_bytes: 64 * 1024,
            idle_timeout: Duration::from_secs(60),
        }
    }
}

/// Accepts a TCP connection only while fewer than `max_connections` are open; the permit is
/// held by the stream and released when the connection closes.
#[derive(Clone)]
pub struct ConnectionLimit {
    permits: Arc<Semaphore>,
    rejected: Counter,
    idle_timeout: Duration,
}

impl ConnectionLimit {
    /// A limit of `max` connections, counting refusals in `rejected`; a connection that sends
    /// nothing for `idle_timeout` is closed (HTTP/2 has no idle timeout of its own).
    pub fn new(max: usize, rejected: Counter, idle_timeout: Duration) -> Self {
        ConnectionLimit {
            permits: Arc::new(Semaphore::new(max)),
            rejected,
            idle_timeout,
        }
    }
}

/// A TCP stream that holds a connection permit.
pub struct LimitedStream {
    inner: TcpStream,
    _permit: OwnedSemaphorePermit,
    idle_timeout: Duration,
    /// When the connection last received data.
    last_read: tokio::time::Instant,
    /// Fires no later than `idle_timeout` after `last_read`. Moved forward only when it
    /// fires, not on every read: re-arming a timer takes the runtime's timer lock.
    idle: Pin<Box<tokio::time::Sleep>>,
}

impl LimitedStream {
    /// Whether the connection has received nothing for the idle timeout; re-arms the timer
    /// for the remaining time when data came since it was set.
    fn poll_idle(&mut self, cx: &mut Context<'_>) -> bool {
        loop {
            if self.idle.as_mut().poll(cx).is_pending() {
                return false;
            }
            let deadline = self.last_read + self.idle_timeout;
            if deadline <= tokio::time::Instant::now() {
                return true;
            }
            self.idle.as_mut().reset(deadline);
        }
    }
}

impl AsyncRead for LimitedStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        match Pin::new(&mut self.inner).poll_read(cx, buf) {
            Poll::Pending if self.poll_idle(cx) => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "connection idle",
            ))),
            Poll::Ready(Ok(())) if buf.filled().len() > before => {
                self.last_read = tokio::time::Instant::now();
                Poll::Ready(Ok(()))
            }
            other => other,
        }
    }
}

impl AsyncWrite for LimitedStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

impl<S: Send + 'static> Accept<TcpStream, S> for ConnectionLimit {
    type Stream = LimitedStream;
    type Service = S;
    type Future = std::future::Ready<io::Result<(LimitedStream, S)>>;

    fn accept(&self, stream: TcpStream, service: S) -> Self::Future {
        // Answers go out as soon as they are written: with Nagle's algorithm, a response
        // written in more than one segment waits for the client's delayed ACK (up to 40 ms).
        if let Err(error) = stream.set_nodelay(true) {
            tracing::debug!(%error, "cannot set TCP_NODELAY");
        }
        match self.permits.clone().try_acquire_owned() {
            Ok(permit) => std::future::ready(Ok((
                LimitedStream {
                    inner: stream,
                    _permit: permit,
                    idle_timeout: self.idle_timeout,
                    last_read: tokio::time::Instant::now(),
                    idle: Box::pin(tokio::time::sleep(self.idle_timeout)),
                },
                service,
            ))),
            Err(_) => {
                self.rejected.inc();
                drop(stream);
                std::future::ready(Err(io::Error::other("connection limit reached")))
            }
        }
    }
}
