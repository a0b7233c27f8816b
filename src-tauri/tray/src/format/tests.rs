//! How the tray's lines read, on states made by hand.

use super::*;
use std::time::Duration;
use wattbar_core::{Currency, Domain, Quality, Reading, Session, Snapshot, Stamp, Watts};
use wattbar_engine::published;

fn published(watts: Option<f64>) -> PublishedState {
    with_quality(watts, Quality::Measured)
}

/// A published state with this headline, for tests.
pub(crate) fn with_quality(watts: Option<f64>, quality: Quality) -> PublishedState {
    let at = Stamp::new(Duration::from_secs(1), 1.0);
    let headline = watts.map(|w| Reading::power(Domain::System, Watts(w), "smc", quality, at));
    let headline_parts = headline.iter().map(wattbar_core::Part::of).collect();
    PublishedState {
        seq: 1,
        snapshot: Some(Snapshot {
            at,
            headline,
            breakdown: Vec::new(),
            unavailable: Vec::new(),
            stalled: Vec::new(),
            battery: None,
            battery_health: None,
            owners: Vec::new(),
            headline_parts,
            answer_period_seconds: None,
        }),
        prefs: Default::default(),
        pace: published::Pace {
            interval_ms: 1000,
            period_ms: 1000,
            awake_because: None,
        },
        energy: published::Energy {
            part_totals: Vec::new(),
            session: Session::new(0.0, Duration::from_secs(10)).totals(&Currency::default()),
            method: None,
            price_per_kwh: 0.3,
            calibration: Default::default(),
            history: Default::default(),
        },
        kept: published::LedgerView {
            totals: None,
            committed: Default::default(),
            unwritten_joules: 0.0,
            unwritten_records: Some(0),
            notice: None,
            alerts: Vec::new(),
            alert_seq: 0,
        },
        sources: published::Sources {
            ids: Vec::new(),
            reads: Vec::new().into(),
        },
        low_power: published::LowPowerNow {
            state: wattbar_core::LowPowerState::off(),
            advice: wattbar_core::policy::advice(
                &Default::default(),
                &wattbar_core::LowPowerState::off(),
                &Default::default(),
            ),
            event: None,
            seq: 0,
            events: Vec::new().into(),
            os_mode: None,
            threshold_w: None,
            rest_w: None,
        },
        wear: Default::default(),
        inference: published::InferenceNow {
            view: Default::default(),
            inflight: 0,
            models_in_flight: Vec::new().into(),
            resident: Vec::new().into(),
            servers: Default::default(),
            intervals: Default::default(),
            records: Default::default(),
            profiles: Vec::new().into(),
            keys: Vec::new().into(),
        },
        programs: Default::default(),
        prices: Default::default(),
    }
}

#[test]
fn the_tooltip_says_what_the_user_must_know() {
    let mut p = published(Some(14.2));
    let tip = |p: &PublishedState| tooltip(p, &now_line(p), &session_line(p));
    assert!(!tip(&p).contains('⚠'));
    p.kept.notice = Some("The preferences file could not be read".into());
    assert!(tip(&p).ends_with("\n⚠ The preferences file could not be read"));
}

#[test]
fn the_title_shows_watts_to_a_tenth_below_100_w() {
    assert_eq!(title(&published(Some(14.24))), "14.2 W");
    assert_eq!(title(&published(Some(312.6))), "313 W");
}

#[test]
fn estimates_and_guesses_are_marked_and_not_shown_to_a_tenth() {
    assert_eq!(
        title(&with_quality(Some(14.2), Quality::Estimated)),
        "≈14 W"
    );
    assert_eq!(
        title(&with_quality(Some(13.6), Quality::Heuristic)),
        "~14 W"
    );
}

#[test]
fn the_threshold_hides_the_title_at_or_below_it_and_cost_can_follow() {
    let mut p = published(Some(9.0));
    std::sync::Arc::make_mut(&mut p.prefs).title_above_w = Some(10.0);
    assert_eq!(title(&p), "");
    let mut p = published(Some(10.5));
    std::sync::Arc::make_mut(&mut p.prefs).title_above_w = Some(10.0);
    std::sync::Arc::make_mut(&mut p.prefs).cost_in_menu_bar = true;
    assert_eq!(title(&p), "10.5 W · 0.0000 EUR");
    // Nothing read is still shown: a missing reading is news, not a low draw.
    let mut p = published(None);
    std::sync::Arc::make_mut(&mut p.prefs).title_above_w = Some(10.0);
    assert_eq!(title(&p), "— W");
}

#[test]
fn no_reading_is_a_dash_never_zero() {
    assert_eq!(title(&published(None)), "— W");
    assert_eq!(title(&published(Some(f64::NAN))), "— W");
    assert_eq!(now_line(&published(None)), "No power reading");
}

#[test]
fn a_headline_summed_from_the_cpu_says_it_is_the_cpu_package_only() {
    let mut p = with_quality(Some(4.4), Quality::Estimated);
    if let Some(s) = p.snapshot.as_mut() {
        let at = s.at;
        let cpu = Reading::power(Domain::Cpu, Watts(4.4), "cpu-proxy", Quality::Estimated, at);
        s.headline_parts = vec![wattbar_core::Part::of(&cpu)];
        s.breakdown = vec![cpu];
    }
    let line = now_line(&p);
    assert!(line.ends_with(" · CPU package only"), "{line}");
    assert!(tooltip(&p, &line, &session_line(&p)).contains("CPU package only"));
}

#[test]
fn the_session_line_gives_the_battery_s_share_and_its_wear() {
    let mut p = with_quality(Some(20.0), Quality::Measured);
    assert_eq!(session_line(&p), "Session 0.00 Wh · 0.0000 EUR");
    // 0.031 kWh drawn from the battery at 2.857 a kWh: 0.0886, shown to the cent.
    let worn = &mut p.wear.session;
    worn.currency = "EUR".into();
    worn.joules = 0.031 * 3_600_000.0;
    worn.wear = 0.031 * 200.0 / 70.0;
    assert_eq!(
        session_line(&p),
        "Session 0.00 Wh · 0.0000 EUR · on battery 0.031 kWh, wear 0.09 EUR"
    );
    p.wear.session.unpriced_joules = 1.0;
    assert!(session_line(&p).ends_with("on battery 0.031 kWh, wear not priced"));
}

#[test]
fn menu_lines_name_quality_and_source() {
    assert_eq!(
        now_line(&published(Some(14.2))),
        "14.2 W · measured · smc · whole machine"
    );
    assert_eq!(
        session_line(&published(Some(1.0))),
        "Session 0.00 Wh · 0.0000 EUR"
    );
    assert_eq!(today_line(&published(Some(1.0))), "Today —");
    assert_eq!(kwh(0.05), "0.050 kWh");
    assert_eq!(money(1.234, "USD"), "1.23 USD");
}

#[test]
fn today_is_one_figure_across_the_scopes_it_was_measured_in() {
    use wattbar_engine::ledger::LedgerTotals;
    use wattbar_engine::store::Total;
    let part = |kwh: f64, cost: f64, scope| Total {
        joules: kwh * 3.6e6,
        kwh,
        cost,
        currency: "EUR".into(),
        scope: Some(scope),
        ..Total::default()
    };
    // 0.30 kWh at the wall since the plug came, 0.12 kWh of sensors before it.
    let mut today = part(0.30, 0.09, wattbar_core::Scope::Wall);
    today
        .other_scopes
        .push(part(0.12, 0.036, wattbar_core::Scope::System));
    let mut p = published(Some(1.0));
    p.kept.totals = Some(LedgerTotals {
        today,
        ..LedgerTotals::default()
    });
    assert_eq!(today_line(&p), "Today 0.420 kWh (mixed scopes) · 0.13 EUR");
}

#[test]
fn the_today_line_gives_the_days_battery_share_and_its_wear_in_the_menus_currency() {
    use wattbar_engine::store::wear::Worn;
    let mut p = published(Some(1.0));
    p.kept.totals = Some(wattbar_engine::ledger::LedgerTotals::default());
    assert_eq!(today_line(&p), "Today 0.00 Wh · 0.0000 EUR");
    // 0.010 kWh from a 70 Wh battery at 200 EUR for 1,000 cycles: 0.0286 EUR, to the cent;
    // the same day's figure in another currency (an earlier preference) is not this one.
    let worn = |currency: &str, kwh: f64| Worn {
        currency: currency.into(),
        joules: kwh * 3.6e6,
        unpriced_joules: 0.0,
        wear: kwh * 200.0 / 70.0,
    };
    let mut committed = (*p.kept.committed).clone();
    committed.wear_today = vec![worn("USD", 0.5), worn("EUR", 0.010)];
    p.kept.committed = std::sync::Arc::new(committed);
    assert_eq!(
        today_line(&p),
        "Today 0.00 Wh · 0.0000 EUR · on battery 0.010 kWh, wear 0.03 EUR"
    );
}

fn with_top(figure: Option<(&str, Option<f64>, Quality, &[&str])>) -> PublishedState {
    use wattbar_engine::programs::{ProgramFigure, ProgramsView};
    let mut p = published(Some(50.0));
    p.programs = std::sync::Arc::new(ProgramsView {
        at: Some(1.0),
        programs: figure
            .map(|(name, watts, quality, serving)| ProgramFigure {
                program: name.into(),
                watts,
                gpu_watts: watts.map(|_| 0.0),
                joules: 0.0,
                today_joules: 0.0,
                quality: Some(quality),
                serving: serving.iter().map(|s| s.to_string()).collect(),
            })
            .into_iter()
            .collect(),
        ..ProgramsView::default()
    });
    p
}

#[test]
fn the_top_line_names_the_program_its_models_and_its_watts_with_their_quality() {
    let line = |f| top_line(&with_top(f));
    assert_eq!(
        line(Some(("ollama", Some(38.2), Quality::Measured, &["llama3"]))),
        "Top: ollama (llama3) 38 W"
    );
    assert_eq!(
        line(Some(("firefox", Some(4.04), Quality::Estimated, &[]))),
        "Top: firefox ≈4.0 W"
    );
    // A window with no measured power: its watts are unknown, never 0.0 W.
    assert_eq!(
        line(Some(("firefox", None, Quality::Estimated, &[]))),
        "Top: firefox not measured"
    );
    assert_eq!(line(None), "Top: —");
    let mut none = with_top(None);
    std::sync::Arc::make_mut(&mut none.programs).unavailable = Some("no /proc".into());
    assert_eq!(top_line(&none), "Top: not measured (no /proc)");
}

/// The kWh a menu line shows: "Session 1.50 Wh · …" → 0.0015.
fn shown_kwh(line: &str) -> f64 {
    let words: Vec<&str> = line.split_whitespace().collect();
    let (n, unit) = (words[1].parse::<f64>().unwrap_or(f64::NAN), words[2]);
    match unit {
        "Wh" => n / 1000.0,
        "kWh" => n,
        other => panic!("{other} in {line}"),
    }
}

#[test]
fn the_menus_session_never_shows_more_than_today_across_batches() {
    // A real engine on a replayed 3600 W (1 Wh a second), batches every 400 ms: over 3 s
    // the menu's lines are read at each published state, between batches and at them.
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let trace = dir.path().join("trace.csv");
    std::fs::write(&trace, "t,watts\n0,3600\n").unwrap_or_else(|e| panic!("{e}"));
    let chain = wattbar_engine::build_chain(&wattbar_engine::ChainOptions {
        replay: Some(trace),
        ..Default::default()
    })
    .unwrap_or_else(|e| panic!("{e}"));
    let prefs = wattbar_core::Preferences {
        interval_ms: 100,
        ..Default::default()
    };
    let mut config =
        wattbar_engine::EngineConfig::new(prefs).with_store(dir.path().join("wattbar.db"));
    config.batch_interval = Duration::from_millis(400);
    let engine = wattbar_engine::spawn(chain, config).unwrap_or_else(|e| panic!("{e}"));
    let (mut checked, mut seen) = (0, 0);
    let until = std::time::Instant::now() + Duration::from_secs(3);
    while std::time::Instant::now() < until {
        let p = engine.current();
        if p.seq != seen && p.kept.totals.is_some() {
            seen = p.seq;
            let (session, today) = (session_line(&p), today_line(&p));
            assert!(
                shown_kwh(&session) <= shown_kwh(&today),
                "{session} | {today}"
            );
            checked += 1;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    engine.stop();
    // Most states fall between two batches; a few dozen were read.
    assert!(checked >= 10, "{checked} states");
}
