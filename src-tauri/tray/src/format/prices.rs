//! The menu's price line, from the price feed's view: where the next day's cheapest two hours
//! lie and what they cost on average, in local time.

use wattbar_engine::PublishedState;

/// A price per kWh as people read it: cents or pence where the currency has them.
pub fn per_kwh(value: f64, currency: &str) -> String {
    let minor = match currency {
        "EUR" => Some("ct"),
        "GBP" => Some("p"),
        "USD" => Some("¢"),
        _ => None,
    };
    match minor {
        Some(m) => format!("{:.1} {m}/kWh", value * 100.0),
        None => format!("{value:.3} {currency}/kWh"),
    }
}

fn clock(unix: f64) -> String {
    use chrono::TimeZone;
    chrono::Local
        .timestamp_opt(unix.round() as i64, 0)
        .single()
        .map(|t| t.format("%H:%M").to_string())
        .unwrap_or_else(|| "—".into())
}

/// "Cheapest 2 h in the next 24 h: 13:00–15:00, 6.1 ct/kWh"; "" without a price feed (the line
/// is not shown).
pub fn cheapest_line(p: &PublishedState) -> String {
    let Some(feed) = &p.prices.price else {
        return String::new();
    };
    let currency = feed
        .currency
        .clone()
        .unwrap_or_else(|| p.prefs.currency.to_string());
    match (&feed.cheapest_2h, &feed.error) {
        (Some(w), _) => format!(
            "Cheapest 2 h in the next 24 h: {}–{}, {}",
            clock(w.start),
            clock(w.end),
            per_kwh(w.mean, &currency)
        ),
        (None, Some(_)) => "Cheapest 2 h: not known, the price feed gives nothing".into(),
        (None, None) => "Cheapest 2 h: not known yet".into(),
    }
}

/// Whether the price in force is above the `price_notify_above` limit, given whether it was
/// (`was_above`), and what to say when it just crossed it either way. A price not known (no
/// slot, no feed) keeps what was.
pub fn price_alert(was_above: bool, p: &PublishedState) -> (bool, Option<String>) {
    let (Some(limit), Some(feed)) = (p.prefs.price_notify_above, &p.prices.price) else {
        return (false, None);
    };
    let Some(now) = feed.now else {
        return (was_above, None);
    };
    let currency = feed
        .currency
        .clone()
        .unwrap_or_else(|| p.prefs.currency.to_string());
    let t = p.snapshot.as_ref().map(|s| s.at.unix_seconds);
    let until = t
        .and_then(|t| feed.slots.iter().find(|s| s.start <= t && t < s.end))
        .map(|s| format!(" until {}", clock(s.end)))
        .unwrap_or_default();
    let above = now > limit;
    let said = match (was_above, above) {
        (false, true) => Some(format!(
            "The price of a kWh is {} now{until}, above your {}",
            per_kwh(now, &currency),
            per_kwh(limit, &currency)
        )),
        (true, false) => Some(format!(
            "The price of a kWh is back to {}, at or below your {}",
            per_kwh(now, &currency),
            per_kwh(limit, &currency)
        )),
        _ => None,
    };
    (above, said)
}

#[cfg(test)]
mod tests {
    use super::*;
    use wattbar_core::slots::{Quantity, Window};
    use wattbar_engine::stages::prices::{FeedView, PricesView};

    #[test]
    fn the_line_names_the_window_and_its_mean_and_is_empty_without_a_feed() {
        let mut p = crate::format::tests::with_quality(Some(10.0), wattbar_core::Quality::Measured);
        assert_eq!(cheapest_line(&p), "");
        // 13:00–15:00 local at a mean of 0.061 EUR per kWh.
        let start = {
            use chrono::TimeZone;
            chrono::Local
                .with_ymd_and_hms(2026, 12, 2, 13, 0, 0)
                .single()
                .map(|t| t.timestamp() as f64)
                .unwrap_or_else(|| panic!("no such local time"))
        };
        let view = FeedView {
            feed: "energy-charts:DE-LU".into(),
            quantity: Quantity::PricePerKwh,
            currency: Some("EUR".into()),
            now: Some(0.25),
            slots: Vec::new(),
            cheapest_2h: Some(Window {
                start,
                end: start + 7200.0,
                mean: 0.061,
                now_mean: Some(0.25),
                saving_fraction: Some(0.756),
            }),
            fetched_unix: Some(start - 3600.0),
            error: None,
        };
        p.prices = std::sync::Arc::new(PricesView {
            price: Some(view.clone()),
            carbon: None,
        });
        assert_eq!(
            cheapest_line(&p),
            "Cheapest 2 h in the next 24 h: 13:00–15:00, 6.1 ct/kWh"
        );
        p.prices = std::sync::Arc::new(PricesView {
            price: Some(FeedView {
                cheapest_2h: None,
                error: Some("connection refused".into()),
                ..view
            }),
            carbon: None,
        });
        assert_eq!(
            cheapest_line(&p),
            "Cheapest 2 h: not known, the price feed gives nothing"
        );
        // Above 0.20 per kWh: 0.25 now is news once, then again when it falls to 0.15.
        p.prefs = std::sync::Arc::new(wattbar_core::Preferences {
            price_notify_above: Some(0.20),
            ..Default::default()
        });
        let with_now = |p: &mut PublishedState, now: Option<f64>| {
            let mut v = p.prices.price.clone().unwrap_or_else(|| panic!("no feed"));
            v.now = now;
            v.error = None;
            p.prices = std::sync::Arc::new(PricesView {
                price: Some(v),
                carbon: None,
            });
        };
        with_now(&mut p, Some(0.25));
        let (above, said) = price_alert(false, &p);
        assert!(above);
        assert_eq!(
            said.as_deref(),
            Some("The price of a kWh is 25.0 ct/kWh now, above your 20.0 ct/kWh")
        );
        assert_eq!(price_alert(true, &p), (true, None), "once per crossing");
        with_now(&mut p, None);
        assert_eq!(
            price_alert(true, &p),
            (true, None),
            "not known keeps what was"
        );
        with_now(&mut p, Some(0.15));
        let (above, said) = price_alert(true, &p);
        assert!(!above);
        assert_eq!(
            said.as_deref(),
            Some("The price of a kWh is back to 15.0 ct/kWh, at or below your 20.0 ct/kWh")
        );
        assert_eq!(per_kwh(0.2841, "SEK"), "0.284 SEK/kWh");
        assert_eq!(per_kwh(0.1234, "GBP"), "12.3 p/kWh");
    }
}
