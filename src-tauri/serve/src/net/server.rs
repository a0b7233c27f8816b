//! The one accept loop behind the API and the inference proxy.
//!
//! Rules:
//! - Connections are served by hyper's HTTP/1 directly, with a header-read timeout, so a client
//!   that never sends a whole request is closed rather than held.
//! - Shutdown is graceful: when `shutdown` completes, the listener is closed, `closing` runs (the
//!   API ends its event streams there), requests in flight finish, and [`serve`] returns once
//!   every connection has closed.
//! - Where asked, each connection's send buffer has a fixed size: what a client leaves unread
//!   then fills it soon, and a writer waiting on it notices (the API's event streams).
//! - A failed accept never spins the loop: a connection that went away before it was accepted is
//!   nothing; any other error (out of file descriptors) is logged and waited out.

use hyper::body::{Body, Incoming};
use hyper::service::Service;
use hyper::{Request, Response};
use hyper_util::rt::{TokioIo, TokioTimer};
use std::error::Error as StdError;
use std::future::Future;
use std::time::Duration;
use tokio::net::TcpListener;

type BoxError = Box<dyn StdError + Send + Sync>;

/// How long a failed accept (other than a vanished client) is waited out.
const ACCEPT_RETRY: Duration = Duration::from_secs(1);

/// Serves `service` on `listener` until `shutdown` completes; see the module rules.
/// `send_buffer_bytes`: each connection's send buffer, where not the system's own.
pub async fn serve<S, B>(
    listener: TcpListener,
    header_timeout: Duration,
    send_buffer_bytes: Option<usize>,
    service: S,
    shutdown: impl Future<Output = ()> + Send,
    closing: impl FnOnce() + Send,
) -> std::io::Result<()>
where
    S: Service<Request<Incoming>, Response = Response<B>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Into<BoxError>,
    B: Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<BoxError>,
{
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(header_timeout);
    let connections = hyper_util::server::graceful::GracefulShutdown::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    accept_failed(e).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        // Small responses, events and streamed tokens go out at once rather than waiting for
        // more to send.
        let _ = stream.set_nodelay(true);
        if let Some(bytes) = send_buffer_bytes {
            let _ = socket2::SockRef::from(&stream).set_send_buffer_size(bytes);
        }
        let connection =
            connections.watch(http.serve_connection(TokioIo::new(stream), service.clone()));
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!("connection ended: {e}");
            }
        });
    }
    drop(listener);
    closing();
    connections.shutdown().await;
    Ok(())
}

async fn accept_failed(e: std::io::Error) {
    use std::io::ErrorKind;
    if matches!(
        e.kind(),
        ErrorKind::ConnectionAborted | ErrorKind::ConnectionReset | ErrorKind::ConnectionRefused
    ) {
        return;
    }
    tracing::warn!("accepting a connection failed: {e}");
    tokio::time::sleep(ACCEPT_RETRY).await;
}
