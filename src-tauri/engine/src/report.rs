//! The ledger's report: power over the period, energy and cost per local day (with the
//! battery's share and its wear beside the grid's cost), and energy per
//! token per model, as figures for [`wattbar_report`] to draw; the engine draws nothing.
//! `wattbar-cli report` and the API's `/v1/report.svg` (the dashboard's "Report") draw the same
//! one.
//!
//! Rules:
//! - Power is the stored headline and each stored domain, one line each (a domain is part of the
//!   headline, so they overlap and are never stacked), by minute up to two days and by hour
//!   beyond; a stretch with nothing stored is a gap, never 0 W.
//! - Days are the local calendar days the period touches, each once, whatever their length (a
//!   daylight-saving day has 23 or 25 hours). Their energy and cost are the ledger's own rows, in
//!   the preferences' currency; a day with no row has no figure, never 0 kWh.
//! - Models are those with records in the period.

use std::collections::BTreeMap;
use wattbar_core::inference::ModelStats;
use wattbar_core::Scope;
use wattbar_ledger::store::{Step, Store, StoreError};
use wattbar_report::{Day, Line, ModelEnergy, Report};

/// Periods up to this long are drawn by minute, longer ones by hour.
const BY_MINUTE_UP_TO: f64 = 2.0 * 86_400.0;

/// The report of `from`–`to` in the preferences' currency and this machine's local time.
pub fn local(
    store: &Store,
    prefs: &wattbar_core::Preferences,
    from: f64,
    to: f64,
) -> Result<Report, StoreError> {
    use chrono::Offset;
    from_store(
        store,
        from,
        to,
        prefs.currency.as_str(),
        prefs.score_ceiling,
        chrono::Local::now().offset().fix(),
    )
}

/// The report of `from`–`to` (Unix seconds) from `store`.
pub fn from_store(
    store: &Store,
    from: f64,
    to: f64,
    currency: &str,
    score_ceiling: f64,
    offset: chrono::FixedOffset,
) -> Result<Report, StoreError> {
    let step = if to - from <= BY_MINUTE_UP_TO {
        Step::Minute
    } else {
        Step::Hour
    };
    let width = step.seconds() as f64;
    // One line per scope: the wall and the sensors' sum are different quantities.
    let mut totals: BTreeMap<Option<Scope>, (Line, Option<f64>)> = BTreeMap::new();
    for p in store.history(from, to, step)? {
        let (total, last) = totals.entry(p.scope).or_insert_with(|| {
            let name = match p.scope {
                Some(Scope::Wall) => "total (at the wall)",
                Some(Scope::System) => "total (whole machine)",
                Some(Scope::Components) => "total (sensors' parts only)",
                None => "total (scope not recorded)",
            };
            let line = Line {
                name: name.into(),
                points: Vec::new(),
            };
            (line, None)
        });
        if last.is_some_and(|l| p.t - l > 1.5 * width) {
            total.points.push((p.t - width, None));
        }
        // The bucket's mean, drawn at its middle.
        total.points.push((p.t + width / 2.0, p.mean_watts));
        *last = Some(p.t);
    }
    let mut power: Vec<Line> = totals.into_values().map(|(line, _)| line).collect();
    if power.is_empty() {
        power.push(Line {
            name: "total".into(),
            points: Vec::new(),
        });
    }
    let mut by_domain: BTreeMap<String, Line> = BTreeMap::new();
    let mut last_seen: BTreeMap<String, f64> = BTreeMap::new();
    for p in store.domain_history(from, to, step, &[])? {
        let line = by_domain.entry(p.domain.clone()).or_insert_with(|| Line {
            name: p.domain.clone(),
            points: Vec::new(),
        });
        if last_seen
            .get(&p.domain)
            .is_some_and(|l| p.t - l > 1.5 * width)
        {
            line.points.push((p.t - width, None));
        }
        line.points.push((p.t + width / 2.0, p.mean_watts));
        last_seen.insert(p.domain, p.t);
    }
    power.extend(by_domain.into_values());
    // Days in the headline's last scope; energy of other scopes is said apart, never added.
    let scope = store.last_scope()?;
    let mut elsewhere = 0.0;
    let mut days: Vec<Day> = Vec::new();
    // The battery's share of the days shown, and what drawing it wore (its grid cost is 0).
    let mut worn = wattbar_ledger::store::wear::Worn {
        currency: currency.to_string(),
        ..Default::default()
    };
    for day in local_dates(from, to) {
        let label = day.format("%Y-%m-%d").to_string();
        for w in store.wear_on(&label)? {
            if w.currency == currency {
                worn.add(&w);
            }
        }
        let total = store.recorded_day(&label, currency, scope)?;
        elsewhere += total
            .as_ref()
            .map_or(0.0, |t| t.other_scopes.iter().map(|o| o.kwh).sum::<f64>());
        days.push(Day {
            label,
            kwh: total.as_ref().map(|t| t.kwh),
            cost: total.map(|t| t.cost),
        });
    }
    // Each model's energy per scope: one of another scope than the days' is named with it
    // ("llama3 (wall)", "unrecorded" before scopes were kept), never added to it.
    let mut by_model: BTreeMap<(String, Option<Scope>), ModelStats> = BTreeMap::new();
    for r in store
        .inference(from, usize::MAX)?
        .iter()
        .filter(|r| r.start <= to)
    {
        let name = if r.scope == scope {
            r.model.clone()
        } else {
            let other = Scope::shown(r.scope);
            format!("{} ({other})", r.model)
        };
        by_model
            .entry(ModelStats::key(r))
            .or_insert_with(|| ModelStats::new(&name, r.scope))
            .add(r, score_ceiling);
    }
    let models = by_model
        .into_values()
        .filter_map(|m| {
            Some(ModelEnergy {
                joules_per_token: m.joules_per_token?,
                requests: m.requests,
                model: m.model,
            })
        })
        .collect();
    let kwh: f64 = days.iter().filter_map(|d| d.kwh).sum();
    let cost: f64 = days.iter().filter_map(|d| d.cost).sum();
    let energy = if days.iter().any(|d| d.kwh.is_some()) {
        let within = scope.map_or(String::new(), |s| format!(" ({s})"));
        let apart = if elsewhere > 0.0 {
            format!("; {elsewhere:.3} kWh more measured in another scope, not added")
        } else {
            String::new()
        };
        let battery = if worn.joules > 0.0 {
            format!(
                "; on battery {:.3} kWh, {}",
                worn.joules / wattbar_core::JOULES_PER_KWH,
                worn.wear_text(|amount, currency| format!("{amount:.2} {currency}"))
            )
        } else {
            String::new()
        };
        format!("{kwh:.3} kWh{within} · {cost:.2} {currency} over the days shown{battery}{apart}")
    } else {
        "no energy recorded on the days shown".to_string()
    };
    let fmt = |t: f64| {
        chrono::DateTime::from_timestamp(t as i64, 0)
            .map(|d| {
                d.with_timezone(&offset)
                    .format("%a %d %b %Y %H:%M")
                    .to_string()
            })
            .unwrap_or_default()
    };
    Ok(Report {
        title: "Wattbar: energy report".into(),
        subtitle: format!("{} – {} (UTC{offset}) · {energy}", fmt(from), fmt(to)),
        offset,
        power,
        spans: Vec::new(),
        marks: Vec::new(),
        days,
        currency: currency.to_string(),
        models,
    })
}

/// The local calendar days from `from`'s to `to`'s, both included (the keys of the ledger's days).
pub fn local_dates(from: f64, to: f64) -> Vec<chrono::NaiveDate> {
    use chrono::TimeZone;
    let date = |t: f64| {
        chrono::Local
            .timestamp_opt(t.floor() as i64, 0)
            .single()
            .map(|d| d.date_naive())
    };
    let (Some(first), Some(last)) = (date(from), date(to)) else {
        return Vec::new();
    };
    first.iter_days().take_while(|d| *d <= last).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use wattbar_ledger::store::Row;

    /// A day from midnight, one sample a minute: 50 W, and 150 W from 09:00 to 17:00.
    /// 16 h × 50 W + 8 h × 150 W = 0.8 + 1.2 = 2.0 kWh, 0.60 EUR at 0.30 EUR/kWh. Minutes
    /// listed in `missing` are not stored.
    fn day(store: &mut Store, session: i64, midnight: f64, missing: std::ops::Range<f64>) {
        let mut rows = Vec::new();
        for m in 0..1440 {
            let t = midnight + f64::from(m) * 60.0;
            if missing.contains(&f64::from(m)) {
                continue;
            }
            let watts = if (540..1020).contains(&m) {
                150.0
            } else {
                50.0
            };
            rows.push(Row {
                t: t + 30.0,
                watts: Some(watts),
                joules: watts * 60.0,
                cost: watts * 60.0 / 3.6e6 * 0.30,
                by_domain: vec![("system".into(), watts * 60.0)],
                seconds: 60.0,
                start: None,
                currency: "EUR".into(),
                scope: Some(Scope::System),
                quality: None,
                method: None,
                answered: None,
                slots: Vec::new(),
            });
        }
        store
            .write_batch(session, &rows, 0.0, 0.0)
            .unwrap_or_else(|e| panic!("{e}"));
    }

    /// An empty ledger in a temporary folder with a session from local midnight on Monday
    /// 24 November 2025, and that midnight.
    fn ledger_from_monday() -> (tempfile::TempDir, Store, i64, f64) {
        use chrono::TimeZone;
        let monday = chrono::Local
            .with_ymd_and_hms(2025, 11, 24, 0, 0, 0)
            .single()
            .map(|d| d.timestamp() as f64)
            .unwrap_or_else(|| panic!("no local midnight"));
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let (mut store, _) = Store::open(&dir.path().join("wattbar.sqlite"), monday)
            .unwrap_or_else(|e| panic!("{e}"));
        let session = store
            .start_session(monday, "EUR")
            .unwrap_or_else(|e| panic!("{e}"));
        (dir, store, session, monday)
    }

    #[test]
    fn a_week_reports_each_days_energy_and_cost_and_a_gap_as_a_gap() {
        // The ledger's days are local days: the week starts at local midnight.
        let (_dir, mut store, session, monday) = ledger_from_monday();
        for d in 0..7 {
            // Wednesday lost 12:00–15:00.
            let missing = if d == 2 { 720.0..900.0 } else { 0.0..0.0 };
            day(
                &mut store,
                session,
                monday + f64::from(d) * 86_400.0,
                missing,
            );
        }
        let offset = chrono::FixedOffset::east_opt(0).unwrap_or_else(|| panic!());
        let r = from_store(
            &store,
            monday,
            monday + 7.0 * 86_400.0 - 1.0,
            "EUR",
            5.0,
            offset,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let kwh: Vec<Option<f64>> = r
            .days
            .iter()
            .map(|d| d.kwh.map(|k| (k * 1000.0).round() / 1000.0))
            .collect();
        // Wednesday: 3 h of 150 W missing from 09:00–17:00 = 0.45 kWh less.
        assert_eq!(kwh, [2.0, 2.0, 1.55, 2.0, 2.0, 2.0, 2.0].map(Some).to_vec());
        assert_eq!(r.days[0].label, "2025-11-24");
        assert!((r.days[0].cost.unwrap_or_default() - 0.60).abs() < 1e-9);
        // A week is drawn by hour: 7 × 24 buckets less Wednesday's 3, and one gap in their place.
        let points = &r.power[0].points;
        assert_eq!(points.iter().filter(|p| p.1.is_some()).count(), 7 * 24 - 3);
        assert_eq!(points.iter().filter(|p| p.1.is_none()).count(), 1);
        assert!(points
            .iter()
            .filter_map(|p| p.1)
            .all(|w| w == 50.0 || w == 150.0));
        let svg = wattbar_report::svg(&r, r.default_size()).unwrap_or_else(|e| panic!("{e}"));
        assert!(
            svg.contains("2.000 kWh · 0.60 EUR"),
            "{}",
            svg.lines()
                .filter(|l| l.contains("kWh"))
                .collect::<Vec<_>>()
                .join("\n")
        );
        assert!(svg.contains("1.550 kWh · 0.46 EUR"));
    }

    #[test]
    fn days_before_the_ledger_began_have_no_figure_not_zero_kwh() {
        let (_dir, mut store, session, monday) = ledger_from_monday();
        day(&mut store, session, monday, 0.0..0.0);
        // From Saturday noon to Monday evening: Saturday and Sunday have nothing stored.
        let offset = chrono::FixedOffset::east_opt(0).unwrap_or_else(|| panic!());
        let r = from_store(
            &store,
            monday - 36.0 * 3600.0,
            monday + 18.0 * 3600.0,
            "EUR",
            5.0,
            offset,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let days: Vec<(&str, Option<f64>)> =
            r.days.iter().map(|d| (d.label.as_str(), d.kwh)).collect();
        assert_eq!(days.len(), 3, "{days:?}");
        assert_eq!(days[0], ("2025-11-22", None));
        assert_eq!(days[1], ("2025-11-23", None));
        assert_eq!(days[2].0, "2025-11-24");
        assert!((days[2].1.unwrap_or_default() - 2.0).abs() < 1e-9);
        assert!(
            r.subtitle.contains("2.000 kWh (system) · 0.60 EUR"),
            "{}",
            r.subtitle
        );
        let svg = wattbar_report::svg(&r, r.default_size()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(svg.matches("no data").count(), 2);
        assert!(!svg.contains("0.000 kWh"));
        // A period with nothing recorded at all says so, not "0.000 kWh".
        let before = from_store(
            &store,
            monday - 36.0 * 3600.0,
            monday - 12.0 * 3600.0,
            "EUR",
            5.0,
            offset,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert!(before.days.iter().all(|d| d.kwh.is_none()));
        assert!(
            before
                .subtitle
                .ends_with("no energy recorded on the days shown"),
            "{}",
            before.subtitle
        );
    }
}
