//! The menu's price line, from the price feed's view: where the next day's cheapest two hours
//! lie and what they cost on average, in local time.

use wattbar_engine::Published;

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
pub fn cheapest_line(p: &Published) -> String {
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
                now_mean: 0.25,
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
        assert_eq!(per_kwh(0.2841, "SEK"), "0.284 SEK/kWh");
        assert_eq!(per_kwh(0.1234, "GBP"), "12.3 p/kWh");
    }
}
