//! How numbers read in the tray.

use wattbar_engine::Published;

/// The tray title: `14.2 W`, or `— W` when nothing can be read (absent is not zero).
pub fn title(p: &Published) -> String {
    match p
        .snapshot
        .as_ref()
        .and_then(|s| s.headline_watts())
        .filter(|w| w.is_plausible())
    {
        Some(w) if w.0 >= 100.0 => format!("{:.0} W", w.0),
        Some(w) => format!("{:.1} W", w.0),
        None => "— W".to_string(),
    }
}

/// The first menu line: watts with quality and source.
pub fn now_line(p: &Published) -> String {
    match p.snapshot.as_ref().and_then(|s| s.headline.as_ref()) {
        Some(h) if h.watts.is_some() => format!("{} · {} · {}", title(p), h.quality, h.source),
        _ => "No power reading".to_string(),
    }
}

/// The second menu line: session energy and cost.
pub fn session_line(p: &Published) -> String {
    format!(
        "Session {} · {}",
        kwh(p.session.kwh),
        money(p.session.cost, p.session.currency.as_str())
    )
}

pub fn kwh(kwh: f64) -> String {
    if kwh < 0.01 {
        format!("{:.2} Wh", kwh * 1000.0)
    } else {
        format!("{kwh:.3} kWh")
    }
}

pub fn money(amount: f64, currency: &str) -> String {
    if amount < 0.01 {
        format!("{amount:.4} {currency}")
    } else {
        format!("{amount:.2} {currency}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;
    use wattbar_core::{Currency, Domain, Quality, Reading, Session, Snapshot, Stamp, Watts};

    fn published(watts: Option<f64>) -> Published {
        let at = Stamp::new(Duration::from_secs(1), 1.0);
        let headline =
            watts.map(|w| Reading::power(Domain::System, Watts(w), "smc", Quality::Measured, at));
        Published {
            seq: 1,
            snapshot: Some(Snapshot {
                at,
                headline,
                breakdown: Vec::new(),
                unavailable: Vec::new(),
                battery: None,
            }),
            session: Session::new(0.0, Duration::from_secs(10)).totals(&Currency::default()),
            low_power: wattbar_core::LowPowerState::off(),
            advice: wattbar_core::policy::advice(
                &Default::default(),
                &wattbar_core::LowPowerState::off(),
                None,
            ),
            low_power_event: None,
            low_power_seq: 0,
            prefs: Default::default(),
            price_per_kwh: 0.3,
            interval_ms: 1000,
            totals: None,
            lifetime_by_domain: Vec::new(),
            sources: Vec::new(),
            notice: None,
            alerts: Vec::new(),
            alert_seq: 0,
        }
    }

    #[test]
    fn the_title_shows_watts_to_a_tenth_below_100_w() {
        assert_eq!(title(&published(Some(14.24))), "14.2 W");
        assert_eq!(title(&published(Some(312.6))), "313 W");
    }

    #[test]
    fn no_reading_is_a_dash_never_zero() {
        assert_eq!(title(&published(None)), "— W");
        assert_eq!(title(&published(Some(f64::NAN))), "— W");
        assert_eq!(now_line(&published(None)), "No power reading");
    }

    #[test]
    fn menu_lines_name_quality_and_source() {
        assert_eq!(now_line(&published(Some(14.2))), "14.2 W · measured · smc");
        assert_eq!(
            session_line(&published(Some(1.0))),
            "Session 0.00 Wh · 0.0000 EUR"
        );
        assert_eq!(kwh(0.05), "0.050 kWh");
        assert_eq!(money(1.234, "USD"), "1.23 USD");
    }
}
