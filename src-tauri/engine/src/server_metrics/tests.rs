//! The stage against a stand-in llama-server on loopback, whose counters move after each answer
//! as a server in steady use.

use super::*;
use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::{AtomicU64, Ordering};
use wattbar_core::programs::process_gpu::ProcessGpuWindow;
use wattbar_core::{Coverage, Domain, Quality, Scope};

/// A stand-in `llama-server --metrics` whose prompt and predicted tokens move by 40 and 150
/// after each answer; its port.
fn stand_in() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("{e}"));
    let port = listener
        .local_addr()
        .unwrap_or_else(|e| panic!("{e}"))
        .port();
    let answers = AtomicU64::new(0);
    std::thread::spawn(move || {
        for mut stream in listener.incoming().map_while(Result::ok) {
            let mut reader = BufReader::new(&mut stream);
            let mut line = String::new();
            while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
                line.clear();
            }
            let n = answers.fetch_add(1, Ordering::SeqCst);
            let body = format!(
                "# TYPE llamacpp:prompt_tokens_total counter\nllamacpp:prompt_tokens_total {}\n\
                 # TYPE llamacpp:tokens_predicted_total counter\n\
                 llamacpp:tokens_predicted_total {}\n\
                 # TYPE llamacpp:requests_processing gauge\nllamacpp:requests_processing 0\n",
                40 * n,
                150 * n
            );
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\ncontent-type: text/plain; version=0.0.4\r\n\
                 content-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    port
}

/// One-second intervals at the wall from `t0`: 300 W, 200 W of it the GPU's.
fn at_the_wall(t0: f64, seconds: usize) -> Vec<Interval> {
    (0..seconds)
        .map(|k| {
            let t = t0 + k as f64;
            Interval {
                start: t - t0,
                end: t - t0 + 1.0,
                unix_start: t,
                unix_end: t + 1.0,
                joules: Some(300.0),
                by_domain: vec![("gpu".into(), 200.0)],
                quality: Some(Quality::Measured),
                source: Some("wall-meter".into()),
                method: Some(wattbar_core::meter::Method::Counter),
                answered: None,
                coverage: Some(Coverage::of_domain(Domain::Wall, None)),
            }
        })
        .collect()
}

/// The windows made once the stage has closed one, asking every half second.
fn first_windows(
    stage: &mut ServerMetrics,
    intervals: &[Interval],
    gpu: &[ProcessGpuWindow],
) -> Vec<ServerWindow> {
    // An idle draw of 20 W on the GPU alone: were it netted, the server's windows would say so.
    let idle = Baseline {
        watts: 20.0,
        spread_watts: None,
        samples: 30,
        from: 0.0,
        to: 30.0,
        method: "test".into(),
        coverage: Some(Coverage {
            scope: Scope::Components,
            covers: vec!["gpu:0".into()],
        }),
    };
    let started = std::time::Instant::now();
    loop {
        let at = Stamp::new(started.elapsed(), crate::unix_now());
        let made = stage.observe(
            at,
            intervals.iter(),
            Some(&idle),
            &ProxySeen::default(),
            gpu,
        );
        if !made.is_empty() {
            return made;
        }
        assert!(started.elapsed() < Duration::from_secs(30), "no window");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The stage following the server on `port`, asked every half second.
fn follow(port: u16) -> ServerMetrics {
    let config = ServerMetricsConfig {
        url: format!("http://127.0.0.1:{port}"),
        token: None,
        kind: None,
    };
    let unix: Arc<dyn Fn() -> f64 + Send + Sync> = Arc::new(crate::unix_now);
    ServerMetrics::new(&[config], &[], Duration::from_millis(500), unix)
}

/// A plug reads 300 W at the wall, 200 W of it the GPU's, and the process listening on the
/// server's port had 3 parts of the GPU's use to another process's 1: each window is the
/// server's 150 W over its span (0.75 × 200 W), covering GPU 0 alone, with no net figure. The
/// same server with its process unknown is given the wall's 300 W.
#[test]
fn a_server_whose_process_draws_on_a_gpu_is_given_its_share_of_the_gpus_energy() {
    let t0 = crate::unix_now() - 10.0;
    let intervals = at_the_wall(t0, 120);
    let me = std::process::id();
    let gpu = [ProcessGpuWindow {
        from: t0,
        to: t0 + 120.0,
        by_pid: [(me, 3000.0), (me + 1, 1000.0)]
            .into_iter()
            .map(|(pid, j)| (pid, [("gpu:0".to_string(), j)].into_iter().collect()))
            .collect(),
        all_joules: 4000.0,
        ancestors: Default::default(),
    }];
    let port = stand_in();
    let mut stage = follow(port);
    stage.follow_listening(&[Listener {
        program: "llama-server".into(),
        process: (me, 1),
        at: SocketAddr::from(([127, 0, 0, 1], port)),
    }]);
    let w = &first_windows(&mut stage, &intervals, &gpu)[0];
    let span = w.to - w.from;
    let joules = w.energy_joules.unwrap_or(f64::NAN);
    assert!((joules - 150.0 * span).abs() < 1e-6 * joules, "{w:?}");
    // 150 tokens an answer, and the window spans one answer or more.
    let tokens = w.completion_tokens.unwrap_or(0.0);
    assert!(tokens > 0.0 && tokens % 150.0 == 0.0, "{w:?}");
    assert_eq!(
        (w.scope, w.covers.clone()),
        (Some(Scope::Components), vec!["gpu:0".to_string()])
    );
    assert_eq!(w.net_energy_joules, None);
    assert_eq!(
        w.gpu_processes,
        Some(1),
        "priced by its own process's share"
    );

    let mut unknown = follow(stand_in());
    let w = &first_windows(&mut unknown, &intervals, &gpu)[0];
    let joules = w.energy_joules.unwrap_or(f64::NAN);
    assert!(
        (joules - 300.0 * (w.to - w.from)).abs() < 1e-6 * joules,
        "{w:?}"
    );
    assert_eq!(w.scope, Some(Scope::Wall));
    assert_eq!(w.gpu_processes, None, "priced by the headline");
}

/// A busy machine stamps its sample, then the scrape comes back: a window ending after the
/// newest interval would have energy for only part of its span. While the intervals end before
/// every scrape, no window closes; once they reach it, the window has all its energy: the
/// wall's 300 W over its span, covered whole.
#[test]
fn a_scrape_answered_after_the_newest_interval_waits_for_the_sample_that_reaches_it() {
    let t0 = crate::unix_now() - 10.0;
    // Ending now: every scrape from here on is answered after it.
    let ended = at_the_wall(t0, 10);
    let mut stage = follow(stand_in());
    let started = std::time::Instant::now();
    while started.elapsed() < Duration::from_secs(3) {
        let at = Stamp::new(started.elapsed(), crate::unix_now());
        let made = stage.observe(at, ended.iter(), None, &ProxySeen::default(), &[]);
        assert!(made.is_empty(), "a window past the intervals: {made:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
    let w = &first_windows(&mut stage, &at_the_wall(t0, 120), &[])[0];
    assert_eq!(w.covered, Some(1.0), "{w:?}");
    let joules = w.energy_joules.unwrap_or(f64::NAN);
    assert!(
        (joules - 300.0 * (w.to - w.from)).abs() < 1e-6 * joules,
        "{w:?}"
    );
}
