//! A knob's value as the sweep names it: a number with its unit (`95W`, `1410MHz`), read back
//! exactly as written.

/// A number as a knob names it with its unit: `95W`, `71.25W`, `1410MHz` (three decimals at
/// most, none trailing).
pub(super) fn named(number: f64, unit: &str) -> String {
    let text = format!("{number:.3}");
    format!("{}{unit}", text.trim_end_matches('0').trim_end_matches('.'))
}

/// The positive, finite number a knob's value names in `unit`.
pub(super) fn number_named(value: &str, unit: &str) -> Option<f64> {
    value
        .strip_suffix(unit)
        .and_then(|n| n.parse().ok())
        .filter(|n: &f64| n.is_finite() && *n > 0.0)
}
