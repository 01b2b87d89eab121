//! The webhook listener's connections: accepted, taken through the connection limit and TLS,
//! and served by hyper, each in one task together with its HTTP/2 streams; and the graceful
//! shutdown that stops them.
//!
//! hyper runs each HTTP/2 stream through an executor. Spawned as tasks of their own, the
//! streams of one connection moved between the async workers, and each frame read or answer
//! written woke a task on the other worker: over one connection carrying 16 streams, as the
//! kube-apiserver calls a webhook, that cost a sixth to a third of the server's CPU per review
//! (docs/benchmarks.md, "Measured alternatives"). Here the streams are polled by their
//! connection's task, as an HTTP/1.1 connection's requests are; evaluations that need more
//! than a worker's turn still go to the evaluation threads.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum_server::accept::Accept;
use axum_server::tls_rustls::RustlsAcceptor;
use futures_util::stream::{FuturesUnordered, StreamExt};
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, watch};
use tokio::time::Instant;

use super::limits::{ConnectionLimit, ConnectionSettings};

/// The webhook listener's acceptor: the connection limit, then the TLS handshake.
pub(super) type TlsAcceptor = RustlsAcceptor<ConnectionLimit>;

/// A stream's future, as hyper hands it to the executor.
type StreamFuture = Pin<Box<dyn Future<Output = ()> + Send>>;

/// How many rounds of polling the connection and its streams one wake-up runs while they make
/// progress, before the task yields to the others on its worker.
const ROUNDS_PER_WAKE: usize = 32;

/// The executor hyper is given for one connection: the streams it starts are queued for the
/// connection's own task ([`WithStreams`]) instead of spawned.
#[derive(Clone, Default)]
struct ConnectionStreams {
    started: Arc<Mutex<Vec<StreamFuture>>>,
}

impl<F> hyper::rt::Executor<F> for ConnectionStreams
where
    F: Future<Output = ()> + Send + 'static,
{
    fn execute(&self, stream: F) {
        self.started
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(Box::pin(stream));
    }
}

impl ConnectionStreams {
    fn take_started(&self) -> Vec<StreamFuture> {
        std::mem::take(&mut *self.started.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

/// A connection and the streams its executor was handed, polled together: done when the
/// connection is done and its last stream has finished.
struct WithStreams<C: Future> {
    connection: Pin<Box<C>>,
    connection_done: Option<C::Output>,
    executor: ConnectionStreams,
    streams: FuturesUnordered<StreamFuture>,
}

impl<C: Future> WithStreams<C> {
    fn new(connection: C, executor: ConnectionStreams) -> Self {
        WithStreams {
            connection: Box::pin(connection),
            connection_done: None,
            executor,
            streams: FuturesUnordered::new(),
        }
    }
}

impl<C: Future> Unpin for WithStreams<C> {}

impl<C: Future> Future for WithStreams<C> {
    type Output = C::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<C::Output> {
        let this = &mut *self;
        // A stream that answers wakes the connection to write the answer, and the connection
        // that reads a frame wakes its stream: both are polled again in this turn while either
        // moves, not left to the next one, which a wake may give to another worker.
        for _ in 0..ROUNDS_PER_WAKE {
            let mut moved = false;
            if this.connection_done.is_none()
                && let Poll::Ready(done) = this.connection.as_mut().poll(cx)
            {
                this.connection_done = Some(done);
                moved = true;
            }
            let started = this.executor.take_started();
            moved |= !started.is_empty();
            this.streams.extend(started);
            while let Poll::Ready(Some(())) = this.streams.poll_next_unpin(cx) {
                moved = true;
            }
            if !moved {
                break;
            }
        }
        if this.streams.is_empty()
            && let Some(done) = this.connection_done.take()
        {
            return Poll::Ready(done);
        }
        Poll::Pending
    }
}

/// Whether a connection has dispatched its first request, shared by the clones of its service.
#[derive(Default)]
struct FirstRequest {
    seen: AtomicBool,
    notify: Notify,
}

impl FirstRequest {
    fn record(&self) {
        if !self.seen.load(Ordering::Relaxed) && !self.seen.swap(true, Ordering::AcqRel) {
            self.notify.notify_one();
        }
    }
}

/// The shutdown of the webhook listener, and its count of open connections.
#[derive(Clone)]
pub(super) struct ListenerHandle {
    shared: Arc<ListenerShared>,
}

struct ListenerShared {
    /// `Some(deadline)` once a graceful shutdown began: stop accepting, close connections once
    /// their requests are answered, and close the rest at the deadline.
    shutdown: watch::Sender<Option<Instant>>,
    open: AtomicUsize,
    all_closed: Notify,
}

impl ListenerHandle {
    pub(super) fn new() -> Self {
        ListenerHandle {
            shared: Arc::new(ListenerShared {
                shutdown: watch::channel(None).0,
                open: AtomicUsize::new(0),
                all_closed: Notify::new(),
            }),
        }
    }

    /// Stops accepting, closes idle connections (HTTP/2 ones with GOAWAY) and each busy one
    /// once its requests are answered; connections still open after `grace` are closed.
    pub(super) fn graceful_shutdown(&self, grace: Duration) {
        let deadline = Instant::now() + grace;
        self.shared.shutdown.send_if_modified(|shutdown| {
            let first = shutdown.is_none();
            if first {
                *shutdown = Some(deadline);
            }
            first
        });
    }

    /// Open connections, those still in their TLS handshake included.
    pub(super) fn connection_count(&self) -> usize {
        self.shared.open.load(Ordering::Acquire)
    }

    /// The deadline of the graceful shutdown, once it has begun.
    async fn shutdown_begun(receiver: &mut watch::Receiver<Option<Instant>>) -> Instant {
        let begun = receiver
            .wait_for(Option::is_some)
            .await
            .map(|deadline| (*deadline).unwrap_or_else(Instant::now));
        match begun {
            Ok(deadline) => deadline,
            // The handle is gone: nothing can begin a shutdown any more.
            Err(_) => std::future::pending().await,
        }
    }

    async fn all_closed(&self) {
        loop {
            let notified = self.shared.all_closed.notified();
            if self.connection_count() == 0 {
                return;
            }
            notified.await;
        }
    }
}

/// Counts a connection open for as long as it lives.
struct OpenConnection(Arc<ListenerShared>);

impl OpenConnection {
    fn new(shared: &Arc<ListenerShared>) -> Self {
        shared.open.fetch_add(1, Ordering::AcqRel);
        OpenConnection(Arc::clone(shared))
    }
}

impl Drop for OpenConnection {
    fn drop(&mut self) {
        if self.0.open.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.0.all_closed.notify_waiters();
        }
    }
}

/// hyper's HTTP/1.1 and HTTP/2 settings for one connection, whose streams `executor` runs.
fn http_builder(
    executor: ConnectionStreams,
    limits: &ConnectionSettings,
) -> auto::Builder<ConnectionStreams> {
    let mut builder = auto::Builder::new(executor);
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(Some(limits.header_read_timeout))
        .max_buf_size(limits.max_header_bytes.max(8192));
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_concurrent_streams(limits.max_concurrent_streams)
        .max_header_list_size(u32::try_from(limits.max_header_bytes).unwrap_or(u32::MAX));
    builder
}

/// Serves `router` on `listener` until a graceful shutdown through `handle` has closed every
/// connection. `acceptor` takes each TCP connection through the connection limit and TLS; a
/// connection that has not dispatched its first request within the header timeout is closed.
pub(super) async fn serve(
    listener: TcpListener,
    acceptor: TlsAcceptor,
    router: Router,
    limits: ConnectionSettings,
    handle: ListenerHandle,
) -> io::Result<()> {
    let mut shutdown = handle.shared.shutdown.subscribe();
    loop {
        let accepted = tokio::select! {
            biased;
            _ = ListenerHandle::shutdown_begun(&mut shutdown) => break,
            accepted = listener.accept() => accepted,
        };
        let tcp = match accepted {
            Ok((tcp, _)) => tcp,
            Err(error) => {
                tracing::debug!(%error, "accepting a connection failed");
                // Not a hot loop while the listener fails (out of file descriptors).
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let open = OpenConnection::new(&handle.shared);
        tokio::spawn(serve_connection(
            tcp,
            acceptor.clone(),
            router.clone(),
            limits.clone(),
            handle.shared.shutdown.subscribe(),
            open,
        ));
    }
    // Closed at once: further clients are refused rather than left waiting in the backlog.
    drop(listener);
    handle.all_closed().await;
    Ok(())
}

/// One connection's life, from the TLS handshake to its close.
async fn serve_connection(
    tcp: TcpStream,
    acceptor: TlsAcceptor,
    router: Router,
    limits: ConnectionSettings,
    mut shutdown: watch::Receiver<Option<Instant>>,
    _open: OpenConnection,
) {
    // A connection still in its handshake keeps nothing open past the shutdown.
    let accepted = tokio::select! {
        biased;
        _ = ListenerHandle::shutdown_begun(&mut shutdown) => return,
        accepted = acceptor.accept(tcp, router) => accepted,
    };
    let Ok((stream, router)) = accepted else {
        return;
    };
    let first_request = Arc::new(FirstRequest::default());
    let recorder = Arc::clone(&first_request);
    let service = tower::ServiceExt::map_request(router, move |request| {
        recorder.record();
        request
    });
    let executor = ConnectionStreams::default();
    let builder = http_builder(executor.clone(), &limits);
    let connection = builder
        .serve_connection_with_upgrades(TokioIo::new(stream), TowerToHyperService::new(service));
    let mut connection = WithStreams::new(connection, executor);

    // The first request is awaited no longer than a request's headers: this also bounds
    // hyper's protocol detection, which has no timeout of its own.
    let first_deadline = Instant::now() + limits.header_read_timeout;
    let begun = tokio::select! {
        biased;
        begun = ListenerHandle::shutdown_begun(&mut shutdown) => Some(begun),
        () = first_request.notify.notified() => None,
        () = tokio::time::sleep_until(first_deadline) => return,
        _ = &mut connection => return,
    };
    let close_at = match begun {
        Some(close_at) => close_at,
        None => tokio::select! {
            biased;
            close_at = ListenerHandle::shutdown_begun(&mut shutdown) => close_at,
            _ = &mut connection => return,
        },
    };
    connection.connection.as_mut().graceful_shutdown();
    tokio::select! {
        biased;
        () = tokio::time::sleep_until(close_at) => {}
        _ = &mut connection => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hyper::rt::Executor;
    use tokio::sync::oneshot;

    /// A connection that starts `streams` through `executor`, then finishes when `closed`
    /// fires.
    async fn connection_starting(
        executor: ConnectionStreams,
        streams: Vec<StreamFuture>,
        closed: oneshot::Receiver<()>,
    ) -> &'static str {
        for stream in streams {
            executor.execute(stream);
        }
        let _ = closed.await;
        "closed"
    }

    #[tokio::test]
    async fn streams_run_in_the_connection_task_which_ends_after_its_last_stream() {
        let executor = ConnectionStreams::default();
        let (answered, answers) = std::sync::mpsc::channel();
        let (release, released) = oneshot::channel::<()>();
        let (close, closed) = oneshot::channel();
        let quick_answer = answered.clone();
        let quick: StreamFuture = Box::pin(async move {
            // No task but the test's own: the stream was not spawned.
            let tasks = tokio::runtime::Handle::current()
                .metrics()
                .num_alive_tasks();
            quick_answer.send(("quick", tasks)).unwrap();
        });
        let slow: StreamFuture = Box::pin(async move {
            let _ = released.await;
            answered.send(("slow", 0)).unwrap();
        });
        let mut connection = WithStreams::new(
            connection_starting(executor.clone(), vec![quick, slow], closed),
            executor,
        );
        let pending = |connection: &mut WithStreams<_>| {
            let waker = std::task::Waker::noop();
            Pin::new(connection)
                .poll(&mut Context::from_waker(waker))
                .is_pending()
        };
        assert!(pending(&mut connection));
        assert_eq!(answers.try_recv(), Ok(("quick", 0)));

        close.send(()).unwrap();
        assert!(pending(&mut connection), "the slow stream still runs");
        release.send(()).unwrap();
        assert_eq!(connection.await, "closed");
        assert_eq!(answers.try_recv(), Ok(("slow", 0)));
    }

    #[tokio::test]
    async fn the_shutdown_deadline_reaches_every_connection_and_the_count_returns_to_zero() {
        let handle = ListenerHandle::new();
        let mut before = handle.shared.shutdown.subscribe();
        let open = [
            OpenConnection::new(&handle.shared),
            OpenConnection::new(&handle.shared),
        ];
        assert_eq!(handle.connection_count(), 2);
        handle.graceful_shutdown(Duration::from_secs(30));
        let deadline = ListenerHandle::shutdown_begun(&mut before).await;
        // A later call does not move the deadline; a receiver made after it sees it too.
        handle.graceful_shutdown(Duration::ZERO);
        let mut after = handle.shared.shutdown.subscribe();
        assert_eq!(ListenerHandle::shutdown_begun(&mut after).await, deadline);
        assert!(deadline > Instant::now() + Duration::from_secs(20));

        let all_closed = handle.all_closed();
        drop(open);
        all_closed.await;
        assert_eq!(handle.connection_count(), 0);
    }
}
