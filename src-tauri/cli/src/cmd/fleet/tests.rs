use super::api::Target;
use super::view::*;
use super::*;
use wattbar_core::Scope;

fn up(host: &str, watts: f64, kwh: f64) -> HostRow {
    HostRow {
        watts: Some(watts),
        scope: Some(Scope::System),
        age_seconds: Some(1.0),
        today_kwh: Some(kwh),
        ..HostRow::pending(host)
    }
    .judged(Duration::from_secs(10))
}

#[test]
fn a_host_without_a_port_is_asked_on_the_api_port() {
    let t = Target::parse("gpu-box").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(t.shown, "gpu-box:9471");
    assert_eq!(t.uri.to_string(), "http://gpu-box:9471/v1/summary");
    let t = Target::parse("http://10.0.0.7:8080/").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(t.shown, "10.0.0.7:8080");
    assert_eq!(t.uri.to_string(), "http://10.0.0.7:8080/v1/summary");
    let t = Target::parse("[fd00::2]:9471").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(t.uri.to_string(), "http://[fd00::2]:9471/v1/summary");
}

#[test]
fn what_is_no_host_is_refused_with_its_reason() {
    let https = Target::parse("https://a:9471")
        .err()
        .unwrap_or_else(|| panic!("taken"))
        .to_string();
    assert!(https.contains("https is not supported"), "{https}");
    for bad in ["", "a/b", "http://a:9471/v1", "a:notaport", "a b"] {
        assert!(Target::parse(bad).is_err(), "{bad:?} was taken");
    }
    // A user and password are refused, and the refusal does not repeat the password.
    let said = Target::parse("http://admin:hunter2@gpu-box:9471")
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(
        said.contains("gpu-box:9471") && !said.contains("hunter2"),
        "{said}"
    );
    let said = prometheus::Server::new("http://admin:hunter2@prom:9090", Duration::from_secs(1))
        .err()
        .map(|e| format!("{e:#}"))
        .unwrap_or_default();
    assert!(
        said.contains("password") && !said.contains("hunter2"),
        "{said}"
    );
}

#[tokio::test]
async fn an_error_page_reaches_the_view_without_its_escape_sequences() {
    // A host answering 500 with a body that would clear the terminal and retitle its window.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let addr = listener.local_addr().unwrap_or_else(|e| panic!("{e}"));
    tokio::spawn(async move {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        while let Ok((mut s, _)) = listener.accept().await {
            let mut buf = [0u8; 1024];
            let _ = s.read(&mut buf).await;
            let body = "\x1b[2J\x1b]0;owned\x07down for maintenance\r\n";
            let head = format!(
                "HTTP/1.1 500 Internal Server Error\r\ncontent-length: {}\r\n\
                 connection: close\r\n\r\n",
                body.len()
            );
            let _ = s.write_all(head.as_bytes()).await;
            let _ = s.write_all(body.as_bytes()).await;
        }
    });
    let http = http::Http::new(Duration::from_secs(5));
    let uri: hyper::Uri = format!("http://{addr}/v1/summary")
        .parse()
        .unwrap_or_else(|e| panic!("{e}"));
    let said = http
        .get(&uri)
        .await
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(
        said.contains("500") && said.contains("down for maintenance"),
        "{said:?}"
    );
    assert!(!said.chars().any(char::is_control), "{said:?}");
}

#[test]
fn the_total_sums_only_healthy_hosts_and_says_how_many_of_how_many() {
    // 60 W + 200 W up; a down host and a stale one (an old sample of 500 W) are not summed.
    let stale = HostRow {
        age_seconds: Some(45.0),
        ..up("c:9471", 500.0, 9.0)
    }
    .judged(Duration::from_secs(10));
    assert_eq!(stale.health, Health::Stale);
    let down = up("d:9471", 80.0, 1.0).down("connection refused".to_string());
    assert_eq!(down.watts, None, "a down host keeps no figure");
    let view = FleetView::new(
        vec![
            up("a:9471", 60.0, 0.5),
            down,
            stale,
            up("b:9471", 200.0, 1.25),
        ],
        0.0,
    );
    assert_eq!(view.total_watts, Some(260.0));
    assert_eq!(view.total_today_kwh, Some(1.75));
    assert_eq!((view.hosts_up, view.hosts_total), (2, 4));
    let order: Vec<&str> = view.hosts.iter().map(|h| h.host.as_str()).collect();
    assert_eq!(order, ["c:9471", "b:9471", "a:9471", "d:9471"]);
    let table = show::table(&view);
    assert!(table.contains("2 of 4 hosts up"), "{table}");
    assert!(table.contains("down: connection refused"), "{table}");
    assert!(
        table.contains("stale: its last sample is 45 s old"),
        "{table}"
    );
}

#[test]
fn no_healthy_host_is_an_unknown_total_not_zero() {
    let view = FleetView::new(
        vec![HostRow::pending("a:9471").down("no answer within 5 s".to_string())],
        0.0,
    );
    assert_eq!(view.total_watts, None);
    assert_eq!(view.hosts_up, 0);
    let json = serde_json::to_value(&view).unwrap_or_else(|e| panic!("{e}"));
    assert!(json["total_watts"].is_null(), "{json}");
    assert!(show::table(&view).contains("0 of 1 hosts up"));
}

#[test]
fn a_host_without_a_headline_is_stale_with_its_reason() {
    let row = HostRow {
        age_seconds: Some(0.5),
        reason: Some("rapl: permission denied".to_string()),
        ..HostRow::pending("a:9471")
    }
    .judged(Duration::from_secs(10));
    assert_eq!(row.health, Health::Stale);
    assert_eq!(row.reason.as_deref(), Some("rapl: permission denied"));
}

#[test]
fn a_larger_fleet_is_refreshed_less_often() {
    assert!(paced_interval(3) < paced_interval(40));
    assert!(paced_interval(40) < paced_interval(128));
}

#[test]
fn a_hostfile_skips_blank_lines_and_comments() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let path = dir.path().join("hosts");
    std::fs::write(&path, "# the model boxes\na:9471\n\n  b  # the big one\n")
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        read_hostfile(&path).unwrap_or_else(|e| panic!("{e}")),
        ["a:9471", "b"]
    );
    // A file with no end is refused at the limit of a file given on the command line.
    let endless = read_hostfile(std::path::Path::new("/dev/zero"))
        .err()
        .map(|e| format!("{e:#}"));
    assert!(
        endless
            .as_deref()
            .is_some_and(|e| e.contains("67108864 bytes it may hold")),
        "{endless:?}"
    );
}

#[test]
fn a_host_that_samples_slowly_is_stale_only_after_three_of_its_periods() {
    let at = |age: f64| {
        HostRow {
            age_seconds: Some(age),
            period_seconds: Some(10.0),
            ..up("slow:9471", 40.0, 0.1)
        }
        .judged(Duration::from_secs(10))
        .health
    };
    // Sampling every 10 s, a 12 s old sample is the latest there is; 31 s is three missed.
    assert_eq!(at(12.0), Health::Up);
    assert_eq!(at(31.0), Health::Stale);
}

/// A summary as a host's `/v1/summary` gives it: `watts` now, named `host`.
fn said(host: &str, watts: f64) -> wattbar_serve::summary::Summary {
    serde_json::from_value(serde_json::json!({
        "host": host, "at": 1.0, "age_seconds": 1.0, "period_seconds": 1.0, "watts": watts,
        "scope": "system", "covers": [], "quality": "measured", "source": "rapl",
        "unavailable": null, "today": {"kwh": 1.0, "cost": 0.3, "currency": "EUR"},
        "low_power": false, "top_program": {"name": "ollama\u{1b}]0;pwned\u{7}", "watts": 50.0}
    }))
    .unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn a_hostile_summary_reaches_neither_the_terminal_nor_the_total() {
    let stale = Duration::from_secs(10);
    // A name that would colour the operator's terminal and set its title.
    let evil = super::api::row_of(
        "a:9471",
        said("\u{1b}[31mEVIL\u{1b}[0m\u{1b}]0;x\u{7}", 100.0),
    )
    .judged(stale);
    assert_eq!(evil.name.as_deref(), Some("[31mEVIL[0m]0;x"));
    assert_eq!(evil.top_program.as_deref(), Some("ollama]0;pwned"));
    assert_eq!(evil.health, Health::Up);
    // −5,000 W and 1e308 W: no machine draws them; down, with what they said.
    let negative = super::api::row_of("b:9471", said("b", -5_000.0)).judged(stale);
    let absurd = super::api::row_of("c:9471", said("c", 1e308)).judged(stale);
    for row in [&negative, &absurd] {
        assert_eq!(row.health, Health::Down, "{row:?}");
        assert!(
            row.reason
                .as_deref()
                .is_some_and(|r| r.contains("no machine draws")),
            "{row:?}"
        );
    }
    // Before: a total of −4,900 W with "2 of 2 hosts up", or a 309-digit one.
    let view = FleetView::new(vec![evil, negative, absurd], 2.0);
    assert_eq!(view.total_watts, Some(100.0));
    assert_eq!((view.hosts_up, view.hosts_total), (1, 3));
}

mod properties {
    use super::*;
    use proptest::prelude::*;
    use serde_json::{json, Value};

    fn number() -> impl Strategy<Value = Value> {
        prop_oneof![
            Just(json!(1e308)),
            Just(json!(-1e308)),
            Just(json!(-5000.0)),
            Just(json!(0.0)),
            Just(json!(100_000.5)),
            (-1e6..1e6f64).prop_map(|x| json!(x)),
            Just(Value::Null),
        ]
    }

    fn text() -> impl Strategy<Value = Value> {
        prop_oneof![
            "\\PC{0,20}".prop_map(Value::String),
            "[\u{0}-\u{1f}\u{7f}\u{9b}a-z]{0,20}".prop_map(Value::String),
            Just(Value::Null),
        ]
    }

    fn summary() -> impl Strategy<Value = Value> {
        (
            text(),
            number(),
            number(),
            number(),
            text(),
            text(),
            (number(), number(), text()),
            (text(), number()),
            any::<bool>(),
        )
            .prop_map(
                |(host, at, age, watts, source, why, today, top, low_power)| {
                    json!({
                        "host": host, "at": at, "age_seconds": age, "period_seconds": 1.0,
                        "watts": watts, "scope": "system", "covers": [], "quality": "measured",
                        "source": source, "unavailable": why,
                        "today": {"kwh": today.0, "cost": today.1, "currency": today.2},
                        "low_power": low_power, "top_program": {"name": top.0, "watts": top.1}
                    })
                },
            )
    }

    fn printable(s: &Option<String>) -> bool {
        s.as_deref()
            .is_none_or(|s| !s.chars().any(char::is_control))
    }

    proptest! {

        /// Whatever a host says: no control character reaches the terminal, and no watts a
        /// machine cannot draw reach the total.
        #[test]
        fn what_a_host_says_is_shown_only_as_far_as_it_can_be_believed(v in summary()) {
            let Ok(s) = serde_json::from_value::<wattbar_serve::summary::Summary>(v) else {
                return Ok(());
            };
            let row = super::super::api::row_of("h:9471", s).judged(Duration::from_secs(10));
            prop_assert!(printable(&row.name) && printable(&row.source));
            prop_assert!(printable(&row.reason) && printable(&row.top_program));
            prop_assert!(printable(&row.currency));
            if let Some(w) = row.watts {
                prop_assert!((0.0..=wattbar_core::MAX_POWER_WATTS).contains(&w), "{w}");
            }
            let view = FleetView::new(vec![row], 2.0);
            if let Some(total) = view.total_watts {
                prop_assert!((0.0..=wattbar_core::MAX_POWER_WATTS).contains(&total));
            }
        }
    }
}
