//! The event stream and the connections: one state per sample, caps, slow and silent clients.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stream_sends_one_state_per_sample_and_ends_at_shutdown() {
    let server = Server::start("t,watts\n0,10\n1,20\n", None).await;
    let host = server.host();
    let addr = server.addr;
    let reader = tokio::task::spawn_blocking(move || {
        let mut s = TcpStream::connect(addr).unwrap_or_else(|e| panic!("{e}"));
        s.set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap_or_else(|e| panic!("{e}"));
        let req = format!("GET /v1/stream HTTP/1.1\r\nHost: {host}\r\n\r\n");
        s.write_all(req.as_bytes())
            .unwrap_or_else(|e| panic!("{e}"));
        let mut seen = String::new();
        let mut buf = [0u8; 4096];
        while seen.matches("event: state").count() < 5 {
            match s.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => seen.push_str(&String::from_utf8_lossy(&buf[..n])),
            }
        }
        (seen, s)
    });
    let (seen, mut socket) = reader.await.unwrap_or_else(|e| panic!("{e}"));
    assert!(seen.contains("content-type: text/event-stream"), "{seen}");
    let seqs: Vec<u64> = seen
        .lines()
        .filter_map(|l| l.strip_prefix("id: "))
        .filter_map(|v| v.trim().parse().ok())
        .collect();
    assert!(seqs.len() >= 5, "{seen}");
    assert!(seqs.windows(2).all(|w| w[1] > w[0]), "{seqs:?}");
    let data: Vec<serde_json::Value> = seen
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter_map(|d| serde_json::from_str(d).ok())
        .collect();
    assert!(data.iter().any(|d| d["source"] == "replay"));
    // The open stream does not hold the server up.
    server.stop().await;
    let mut rest = Vec::new();
    let _ = socket.read_to_end(&mut rest);
}

/// Opens `/v1/stream` on a new connection and reads until its answer is known: the head and a
/// first state event for a 200, the whole reply otherwise. Returns the status, what was read and
/// the open connection.
fn open_stream(addr: SocketAddr, host: &str) -> (u16, String, TcpStream) {
    let mut s = TcpStream::connect(addr).unwrap_or_else(|e| panic!("{e}"));
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap_or_else(|e| panic!("{e}"));
    let req = format!("GET /v1/stream HTTP/1.1\r\nHost: {host}\r\n\r\n");
    s.write_all(req.as_bytes())
        .unwrap_or_else(|e| panic!("{e}"));
    let mut seen = String::new();
    let mut buf = [0u8; 4096];
    loop {
        if let Some((head, body)) = seen.split_once("\r\n\r\n") {
            let status: u16 = head
                .split_whitespace()
                .nth(1)
                .and_then(|c| c.parse().ok())
                .unwrap_or_else(|| panic!("no status line in {seen:?}"));
            let length = head
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length:")
                        .map(str::to_string)
                })
                .and_then(|v| v.trim().parse::<usize>().ok());
            let complete = match status {
                200 => body.contains("event: state"),
                _ => length.is_some_and(|n| body.len() >= n),
            };
            if complete {
                return (status, seen, s);
            }
        }
        match s.read(&mut buf) {
            Ok(0) | Err(_) => panic!("the stream request got no complete answer: {seen:?}"),
            Ok(n) => seen.push_str(&String::from_utf8_lossy(&buf[..n])),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stream_clients_beyond_the_cap_get_503_until_one_leaves() {
    let server = Server::start_with("t,watts\n0,10\n", None, "127.0.0.1:0", |_, config| {
        config.limits.max_streams = 2;
    })
    .await;
    let (addr, host) = (server.addr, server.host());
    tokio::task::spawn_blocking(move || {
        let (first, _, leaving) = open_stream(addr, &host);
        let (second, _, mut staying) = open_stream(addr, &host);
        assert_eq!((first, second), (200, 200));
        let (status, refused, _) = open_stream(addr, &host);
        assert_eq!(status, 503, "{refused}");
        let lower = refused.to_ascii_lowercase();
        assert!(lower.contains("retry-after: 5\r\n"), "{refused}");
        assert!(
            lower.contains("content-type: application/json"),
            "{refused}"
        );
        let body = refused.split_once("\r\n\r\n").map_or("", |(_, b)| b);
        let error: serde_json::Value =
            serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {body}"));
        assert!(
            error["error"].as_str().is_some_and(|e| e.contains('2')),
            "{body}"
        );

        // The slot is freed once the server notices the client left (at its next event).
        let _ = leaving.shutdown(std::net::Shutdown::Both);
        drop(leaving);
        let deadline = Instant::now() + Duration::from_secs(30);
        let _replacement = loop {
            let (status, text, conn) = open_stream(addr, &host);
            if status == 200 {
                break conn;
            }
            assert_eq!(status, 503, "{text}");
            assert!(
                Instant::now() < deadline,
                "a stream slot was not freed within 5 s of a client leaving"
            );
            std::thread::sleep(Duration::from_millis(100));
        };
        // The client that stayed was not disturbed.
        let mut buf = [0u8; 4096];
        let n = staying.read(&mut buf).unwrap_or_else(|e| panic!("{e}"));
        assert!(n > 0);
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    server.stop().await;
}

/// Reads from `s` until the server closes it, which must happen before `within` (`what` names
/// the case); returns what it sent. Something written by `trickle` goes out before each read.
fn wait_for_close(
    what: &str,
    s: &mut TcpStream,
    within: Duration,
    mut trickle: impl FnMut(&mut TcpStream),
) -> String {
    let start = Instant::now();
    s.set_read_timeout(Some(Duration::from_millis(50)))
        .unwrap_or_else(|e| panic!("{e}"));
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        assert!(
            start.elapsed() < within,
            "{what}: the connection was still open after {within:?}; it sent {:?}",
            String::from_utf8_lossy(&got)
        );
        trickle(s);
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            // A reset is the server closing on unread input.
            Err(_) => break,
        }
    }
    String::from_utf8_lossy(&got).to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_that_never_finish_a_request_are_closed_but_streams_stay() {
    let limit = Duration::from_millis(400);
    let server = Server::start_with("t,watts\n0,10\n", None, "127.0.0.1:0", |_, config| {
        config.limits.header_timeout = limit;
        config.limits.request_timeout = limit;
    })
    .await;
    let (addr, host) = (server.addr, server.host());
    let within = limit * 5;
    tokio::task::spawn_blocking(move || {
        let connect = || TcpStream::connect(addr).unwrap_or_else(|e| panic!("{e}"));

        // Connects and sends nothing.
        let sent = wait_for_close("silent", &mut connect(), within, |_| {});
        assert!(!sent.contains(" 200 "), "{sent}");

        // Sends half a request, then a header line now and then, never the end of the headers.
        let mut slow = connect();
        let start = format!("GET /metrics HTTP/1.1\r\nHost: {host}\r\n");
        slow.write_all(start.as_bytes())
            .unwrap_or_else(|e| panic!("{e}"));
        let mut last = Instant::now();
        let sent = wait_for_close("trickling headers", &mut slow, within, |s| {
            if last.elapsed() >= limit / 4 {
                let _ = s.write_all(b"X-Slow: 1\r\n");
                last = Instant::now();
            }
        });
        assert!(!sent.contains(" 200 "), "{sent}");

        // One whole request, answered, then an idle keep-alive connection.
        let mut idle = connect();
        let req = format!("GET /v1/low-power HTTP/1.1\r\nHost: {host}\r\n\r\n");
        idle.write_all(req.as_bytes())
            .unwrap_or_else(|e| panic!("{e}"));
        let sent = wait_for_close("idle keep-alive", &mut idle, within, |_| {});
        assert!(sent.starts_with("HTTP/1.1 200 "), "{sent}");

        // Headers of a write whose body never comes: 408 in JSON, then closed.
        let mut bodiless = connect();
        let req = format!(
            "PUT /v1/low-power HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {TOKEN}\r\n\
             Content-Type: application/json\r\nContent-Length: 17\r\n\r\n{{\"ena"
        );
        bodiless
            .write_all(req.as_bytes())
            .unwrap_or_else(|e| panic!("{e}"));
        let sent = wait_for_close("missing body", &mut bodiless, within, |_| {});
        assert!(sent.starts_with("HTTP/1.1 408 "), "{sent}");
        assert!(sent.contains("{\"error\":"), "{sent}");

        // An event stream outlives both limits several times over and keeps receiving.
        let (status, _, mut stream) = open_stream(addr, &host);
        assert_eq!(status, 200);
        stream
            .set_read_timeout(Some(Duration::from_secs(2)))
            .unwrap_or_else(|e| panic!("{e}"));
        let opened = Instant::now();
        let mut late_events = 0;
        let mut buf = [0u8; 4096];
        while opened.elapsed() < limit * 4 {
            match stream.read(&mut buf) {
                Ok(0) | Err(_) => panic!("the stream ended after {:?}", opened.elapsed()),
                Ok(n) => {
                    if opened.elapsed() > limit * 2 {
                        late_events += String::from_utf8_lossy(&buf[..n])
                            .matches("event: state")
                            .count();
                    }
                }
            }
        }
        assert!(late_events > 0, "no event after twice the limits");
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_window_reaching_before_the_engine_counts_each_second_once() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let before = wattbar_engine::unix_now();
    let server = Server::start("t,watts\n0,50\n", Some(&dir.path().join("w.db"))).await;
    wait_until_sampled(&server).await;
    // Batches every 200 ms: by now the store holds most of what the engine also keeps.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let to = wattbar_engine::unix_now();
    let alive = to - before;
    for span in [30.0, 300.0] {
        let e = server
            .get(&format!("/v1/energy?from={}&to={to}", to - span))
            .await
            .json();
        let joules = e["joules"].as_f64().unwrap_or_default();
        // 50 W for at most the engine's life: each second once, never the stored copy too.
        assert!(
            joules > 0.0 && joules <= 50.0 * alive * 1.01,
            "{span} s: {e}"
        );
        let covered = e["covered_fraction"].as_f64().unwrap_or(1.0);
        assert!(covered <= alive / span + 1e-9, "{span} s: {e}");
        let system = e["by_domain"]
            .as_array()
            .and_then(|d| d.iter().find(|p| p[0] == "system"))
            .and_then(|p| p[1].as_f64());
        if let Some(system) = system {
            assert!((system - joules).abs() <= 1e-6 * joules, "{span} s: {e}");
        }
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_client_that_reads_nothing_loses_its_slot_and_the_windows_keep_theirs() {
    let server = Server::start_with("t,watts\n0,10\n", None, "127.0.0.1:0", |_, config| {
        config.limits.max_streams = 1;
        config.limits.stream_write_timeout = Duration::from_secs(1);
    })
    .await;
    let (addr, host) = (server.addr, server.host());
    // A client that connects and never reads, with a small receive buffer so that the buffers
    // between it and the server fill within seconds.
    let socket = tokio::net::TcpSocket::new_v4().unwrap_or_else(|e| panic!("{e}"));
    socket
        .set_recv_buffer_size(2048)
        .unwrap_or_else(|e| panic!("{e}"));
    let idle = socket.connect(addr).await.unwrap_or_else(|e| panic!("{e}"));
    let request = format!("GET /v1/stream HTTP/1.1\r\nHost: {host}\r\n\r\n");
    let mut sent = 0;
    while sent < request.len() {
        idle.writable().await.unwrap_or_else(|e| panic!("{e}"));
        sent += idle.try_write(&request.as_bytes()[sent..]).unwrap_or(0);
    }
    // It reads its answer's head, then nothing more.
    let mut head = Vec::new();
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        idle.readable().await.unwrap_or_else(|e| panic!("{e}"));
        let mut byte = [0u8; 1];
        if idle.try_read(&mut byte).unwrap_or(0) == 1 {
            head.push(byte[0]);
        }
    }
    let head = String::from_utf8_lossy(&head).into_owned();
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    tokio::task::spawn_blocking(move || {
        // The idle client holds the one public slot.
        let (status, text, _) = open_stream(addr, &host);
        assert_eq!(status, 503, "{text}");
        // The app's window carries the token: a slot is kept for it.
        let mut s = TcpStream::connect(addr).unwrap_or_else(|e| panic!("{e}"));
        s.set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap_or_else(|e| panic!("{e}"));
        let req = format!(
            "GET /v1/stream HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {TOKEN}\r\n\r\n"
        );
        s.write_all(req.as_bytes())
            .unwrap_or_else(|e| panic!("{e}"));
        let mut buf = [0u8; 512];
        let n = s.read(&mut buf).unwrap_or_else(|e| panic!("{e}"));
        let head = String::from_utf8_lossy(&buf[..n]).into_owned();
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        // Once the buffers before the idle client are full, its slot is taken back within the
        // write timeout.
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let (status, text, _) = open_stream(addr, &host);
            if status == 200 {
                break;
            }
            assert_eq!(status, 503, "{text}");
            assert!(
                Instant::now() < deadline,
                "a client that reads nothing kept its slot for 60 s"
            );
            std::thread::sleep(Duration::from_millis(250));
        }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    drop(idle);
    server.stop().await;
}
