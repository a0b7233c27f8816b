use super::*;

fn offset(hours: i32) -> chrono::FixedOffset {
    chrono::FixedOffset::east_opt(hours * 3600).unwrap_or_else(|| panic!("offset"))
}

fn report() -> Report {
    // 1_700_000_000 is 2023-11-14 22:13:20 UTC: 23:13:20 at UTC+1.
    let t0 = 1_700_000_000.0;
    Report {
        title: "Wattbar: sleep 2".into(),
        subtitle: "200.0 J in 2.000 s".into(),
        offset: offset(1),
        power: vec![
            Line {
                name: "total".into(),
                points: (0..=20)
                    .map(|i| (t0 + f64::from(i) * 0.1, Some(100.0)))
                    .collect(),
            },
            Line {
                name: "cpu".into(),
                points: (0..=20)
                    .map(|i| (t0 + f64::from(i) * 0.1, (i != 10).then_some(40.0)))
                    .collect(),
            },
        ],
        spans: vec![Span {
            name: "load".into(),
            from: t0 + 0.5,
            to: t0 + 1.5,
        }],
        marks: vec![Mark {
            t: t0 + 1.0,
            name: "checkpoint".into(),
        }],
        days: vec![Day {
            label: "2023-11-14".into(),
            kwh: Some(1.25),
            cost: Some(0.45),
        }],
        currency: "EUR".into(),
        models: vec![ModelEnergy {
            model: "llama3.2:1b".into(),
            joules_per_token: 0.8,
            requests: 12,
        }],
    }
}

#[test]
fn the_svg_has_titles_units_legends_and_local_times() {
    let r = report();
    let svg = svg(&r, r.default_size()).unwrap_or_else(|e| panic!("{e}"));
    for text in [
        "Wattbar: sleep 2",
        "power (W)",
        "local time (UTC+01:00)",
        "total",
        "cpu",
        "load",
        "checkpoint",
        "energy (kWh)",
        "2023-11-14",
        "1.250 kWh · 0.45 EUR",
        "llama3.2:1b",
        "0.80 J/token · 12 requests",
    ] {
        assert!(svg.contains(text), "the SVG lacks {text:?}");
    }
    // Ticks are in local time: the chart spans 23:13:20–23:13:22 at UTC+1, never 22:13 UTC.
    assert!(svg.contains("23:13:2"), "no local tick");
    assert!(!svg.contains("22:13:2"), "a UTC tick");
}

#[test]
fn a_missing_reading_splits_the_line_instead_of_dropping_to_zero() {
    let points = vec![
        (0.0, Some(40.0)),
        (1.0, Some(40.0)),
        (2.0, None),
        (3.0, Some(40.0)),
    ];
    let s = draw_segments(&points);
    assert_eq!(s, vec![vec![(0.0, 40.0), (1.0, 40.0)], vec![(3.0, 40.0)]]);
}

#[test]
fn the_png_is_a_png_of_the_size_asked() {
    let r = report();
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let path = dir.path().join("report.png");
    png(&r, (1400, 900), &path).unwrap_or_else(|e| panic!("{e}"));
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
    // IHDR: width and height, big-endian, at bytes 16–24.
    let width = u32::from_be_bytes([bytes[16], bytes[17], bytes[18], bytes[19]]);
    let height = u32::from_be_bytes([bytes[20], bytes[21], bytes[22], bytes[23]]);
    assert_eq!((width, height), (1400, 900));
}

#[test]
fn a_report_smaller_than_1200_by_600_is_refused() {
    let r = report();
    assert!(matches!(
        svg(&r, (800, 600)),
        Err(Error::TooSmall(800, 600))
    ));
}

#[test]
fn a_period_with_no_power_says_so() {
    let mut r = report();
    r.power.clear();
    r.spans.clear();
    let svg = svg(&r, (1400, 700)).unwrap_or_else(|e| panic!("{e}"));
    assert!(svg.contains("no power was measured"));
}

fn draw_segments(points: &[(f64, Option<f64>)]) -> Vec<Vec<(f64, f64)>> {
    draw::segments(points)
}

#[test]
fn time_ticks_fall_on_round_local_times() {
    let plus_one = offset(1);
    // A week from 2023-11-14 22:13:20 UTC: ticks at local midnights, a day apart.
    let t0 = 1_700_000_000.0;
    let week = draw::local_ticks(&plus_one, t0, t0 + 7.0 * 86_400.0);
    assert_eq!(week.len(), 7);
    assert!(
        week.iter().all(|t| ((t + 3600.0) % 86_400.0).abs() < 1e-6),
        "{week:?}"
    );
    assert!(week.windows(2).all(|w| w[1] - w[0] == 86_400.0));
    // Two seconds: every 0.2 s, on tenths.
    let short = draw::local_ticks(&plus_one, t0 + 0.05, t0 + 2.05);
    assert_eq!(short.len(), 10);
    assert!((short[0] - (t0 + 0.2)).abs() < 1e-6, "{short:?}");
    // An hour and a half: every 10 minutes, on the minute.
    let hours = draw::local_ticks(&plus_one, t0, t0 + 5400.0);
    assert!(hours.iter().all(|t| (t % 600.0).abs() < 1e-6) && hours.len() <= 10);
}

#[test]
fn a_thousand_marks_are_named_only_where_there_is_room() {
    let mut r = report();
    let t0 = 1_700_000_000.0;
    // One mark every 2 ms over the two seconds drawn, as a training loop marking each step.
    r.marks = (0..1000)
        .map(|k| Mark {
            t: t0 + f64::from(k) * 0.002,
            name: format!("step {k}"),
        })
        .collect();
    let svg = svg(&r, r.default_size()).unwrap_or_else(|e| panic!("{e}"));
    let named = svg.lines().filter(|l| l.starts_with("step ")).count();
    // A name at most every 4 % of the time axis: some 25 over the chart, never a thousand.
    assert!((10..=27).contains(&named), "{named} marks named");
    assert!(svg.lines().any(|l| l == "step 0"));
    // Each unnamed mark is one plain line, not a dashed one of dozens of pieces.
    assert!(svg.len() < 1_000_000, "{} bytes", svg.len());
}

#[test]
fn names_with_markup_or_control_characters_leave_the_svg_well_formed() {
    let mut r = report();
    r.title = "Wattbar: echo <a & \"b\">".into();
    r.models[0].model = "nul\0esc\u{1b}[31m</text><script>".into();
    r.marks[0].name = "bell\u{7}".into();
    let svg = svg(&r, r.default_size()).unwrap_or_else(|e| panic!("{e}"));
    let mut reader = quick_xml::Reader::from_str(&svg);
    loop {
        match reader.read_event() {
            Ok(quick_xml::events::Event::Eof) => break,
            Ok(_) => {}
            Err(e) => panic!("not well-formed at {}: {e}", reader.buffer_position()),
        }
    }
    assert!(!svg.contains('\0') && !svg.contains('\u{1b}'));
    assert!(!svg.contains("<script>"));
}

/// Every start tag's text content, for a document that must be well-formed.
fn texts(svg: &str) -> Vec<String> {
    let mut reader = quick_xml::Reader::from_str(svg);
    let mut out = Vec::new();
    loop {
        match reader.read_event() {
            Ok(quick_xml::events::Event::Eof) => break,
            Ok(quick_xml::events::Event::Text(t)) => {
                out.push(t.into_inner().trim().to_string());
            }
            Ok(_) => {}
            Err(e) => panic!("not well-formed at {}: {e}", reader.buffer_position()),
        }
    }
    out
}

#[test]
fn the_pareto_chart_names_each_run_and_marks_the_front() {
    let point = |label: &str, j: f64, a: f64, efficient: bool| ParetoPoint {
        label: label.into(),
        x: j,
        x_bound: None,
        y: a,
        low: (a - 0.1).max(0.0),
        high: (a + 0.1).min(1.0),
        efficient,
    };
    let chart = Pareto {
        title: "GSM8K, number: accuracy against energy".into(),
        x_desc: "energy per query (J)".into(),
        y_desc: "accuracy".into(),
        groups: vec![ParetoGroup {
            name: "this machine".into(),
            points: vec![
                point("small", 10.0, 0.1, true),
                point("big", 60.0, 0.7, true),
                point("wasteful", 80.0, 0.5, false),
            ],
        }],
    };
    let svg = pareto_svg(&chart).unwrap_or_else(|e| panic!("{e}"));
    let texts = texts(&svg);
    for want in ["small", "big", "wasteful", "this machine: efficient front"] {
        assert!(texts.iter().any(|t| t == want), "{want} not in {texts:?}");
    }
    // With no run on a front, none is drawn or named.
    let mut none = chart.clone();
    for q in &mut none.groups[0].points {
        q.efficient = false;
    }
    let svg = pareto_svg(&none).unwrap_or_else(|e| panic!("{e}"));
    assert!(!svg.contains("efficient front"));
}
