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
//! - At most [`MAX_CONNECTIONS`] connections are held at once; one more is closed as it is
//!   accepted (said once per burst). What connections take is held by the allocator after they
//!   close, so the bound on what they hold at once is the bound on what they cost: 10,000 idle
//!   connections would otherwise keep tens of MB resident for good.

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

/// The most connections held at once: a local API's dashboards, CLIs and model clients use tens.
pub const MAX_CONNECTIONS: usize = 1024;

/// What one server holds to.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// How long a request's head may take to come.
    pub header_timeout: Duration,
    /// Each connection's send buffer, where not the system's own.
    pub send_buffer_bytes: Option<usize>,
    /// The most connections held at once.
    pub most_connections: usize,
}

impl Limits {
    /// `header_timeout`, the system's send buffers and [`MAX_CONNECTIONS`].
    pub fn new(header_timeout: Duration) -> Limits {
        Limits {
            header_timeout,
            send_buffer_bytes: None,
            most_connections: MAX_CONNECTIONS,
        }
    }
}

/// Serves `service` on `listener` under `limits` until `shutdown` completes; see the module
/// rules.
pub async fn serve<S, B>(
    listener: TcpListener,
    limits: Limits,
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
        .header_read_timeout(limits.header_timeout);
    let connections = hyper_util::server::graceful::GracefulShutdown::new();
    let most = limits.most_connections;
    let room = std::sync::Arc::new(tokio::sync::Semaphore::new(most));
    let mut said_full = false;
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
        let Ok(held) = std::sync::Arc::clone(&room).try_acquire_owned() else {
            if !std::mem::replace(&mut said_full, true) {
                tracing::warn!("{most} connections are open: more are closed as they come");
            }
            drop(stream);
            continue;
        };
        said_full = false;
        // Small responses, events and streamed tokens go out at once rather than waiting for
        // more to send.
        let _ = stream.set_nodelay(true);
        if let Some(bytes) = limits.send_buffer_bytes {
            let _ = socket2::SockRef::from(&stream).set_send_buffer_size(bytes);
        }
        let connection =
            connections.watch(http.serve_connection(TokioIo::new(stream), service.clone()));
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!("connection ended: {e}");
            }
            drop(held);
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

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A hello-world service.
    async fn hello(
        _: Request<Incoming>,
    ) -> Result<Response<http_body_util::Full<bytes::Bytes>>, std::convert::Infallible> {
        Ok(Response::new(http_body_util::Full::new(
            bytes::Bytes::from("hello"),
        )))
    }

    #[tokio::test]
    async fn past_the_most_connections_one_more_is_closed_and_room_comes_back_when_they_go() {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let addr = listener.local_addr().unwrap_or_else(|e| panic!("{e}"));
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        // A cap of 8 here: the rule is the same at 1,024, which would need more files than a
        // test process may open.
        const MOST: usize = 8;
        let server = tokio::spawn(serve(
            listener,
            Limits {
                most_connections: MOST,
                ..Limits::new(Duration::from_secs(30))
            },
            hyper::service::service_fn(hello),
            async {
                let _ = stopped.await;
            },
            || {},
        ));
        // Each holds its connection with half a request, as a slow client does.
        let mut held = Vec::new();
        for _ in 0..MOST {
            let mut c = tokio::net::TcpStream::connect(addr)
                .await
                .unwrap_or_else(|e| panic!("{e}"));
            c.write_all(b"GET / HTTP/1.1\r\n")
                .await
                .unwrap_or_else(|e| panic!("{e}"));
            held.push(c);
        }
        let ask = || async {
            let mut c = tokio::net::TcpStream::connect(addr).await.ok()?;
            c.write_all(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                .await
                .ok()?;
            let mut answer = String::new();
            tokio::time::timeout(Duration::from_secs(5), c.read_to_string(&mut answer))
                .await
                .ok()?
                .ok()?;
            Some(answer)
        };
        // One more is closed at once: no answer, and no wait for one.
        let refused = ask().await.unwrap_or_default();
        assert!(!refused.contains("hello"), "{refused:?}");
        // When they go, a request is answered again.
        drop(held);
        let mut answered = None;
        for _ in 0..100 {
            answered = ask().await.filter(|a| a.contains("hello"));
            if answered.is_some() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(answered.is_some(), "no room came back");
        let _ = stop.send(());
        let _ = server.await;
    }
}
