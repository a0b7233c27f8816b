//! The menu's battery line: each battery's health and cycles, from the latest sample. No line
//! without a battery; a figure the gauge does not report is said so, never shown as 0 or 100 %.

use wattbar_core::battery::Health;
use wattbar_engine::PublishedState;

fn one(h: &Health) -> String {
    let health = match h.percent() {
        Some(p) => format!("{p:.0} % health"),
        None => "health not reported".to_string(),
    };
    let cycles = match h.cycles.count() {
        Some(1) => "1 cycle".to_string(),
        Some(c) => format!("{c} cycles"),
        None => "cycles not reported".to_string(),
    };
    format!("{health} · {cycles}")
}

/// "Battery 87 % health · 194 cycles"; with two batteries each is named ("Battery BAT0 …,
/// BAT1 …"); "" without a battery (the line is not shown).
pub fn battery_line(p: &PublishedState) -> String {
    let batteries = p
        .snapshot
        .as_ref()
        .and_then(|s| s.battery_health.as_deref())
        .unwrap_or_default();
    match batteries {
        [] => String::new(),
        [h] => format!("Battery {}", one(h)),
        many => {
            let each: Vec<String> = many
                .iter()
                .map(|h| format!("{} {}", h.battery, one(h)))
                .collect();
            format!("Battery {}", each.join(", "))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use wattbar_core::battery::{Cycles, EnergyFrom, Raw};

    fn with(batteries: Vec<Health>) -> PublishedState {
        let mut p = crate::format::tests::with_quality(Some(10.0), wattbar_core::Quality::Measured);
        if let Some(s) = p.snapshot.as_mut() {
            s.battery_health = Some(Arc::from(batteries));
        }
        p
    }

    fn mac(full_mah: f64, design_mah: f64, cycles: Option<i64>) -> Health {
        Health::from_raw(
            "bq40z651",
            Raw::Charge {
                design_ah: Some(design_mah / 1e3),
                full_ah: Some(full_mah / 1e3),
                from: EnergyFrom::ChargeAtNominalCellVoltage { cells: 3 },
            },
            Cycles::from_count(cycles),
        )
    }

    #[test]
    fn the_line_gives_health_and_cycles_and_is_empty_without_a_battery() {
        let p = crate::format::tests::with_quality(Some(10.0), wattbar_core::Quality::Measured);
        assert_eq!(battery_line(&p), "");
        // 5287 ÷ 6075 mAh = 87.03 %.
        let p = with(vec![mac(5287.0, 6075.0, Some(194))]);
        assert_eq!(battery_line(&p), "Battery 87 % health · 194 cycles");
    }

    #[test]
    fn unreported_figures_are_said_never_zero() {
        let p = with(vec![mac(5287.0, 0.0, Some(0))]);
        assert_eq!(
            battery_line(&p),
            "Battery health not reported · cycles not reported"
        );
    }

    #[test]
    fn two_batteries_are_named() {
        let mut a = mac(4000.0, 5000.0, Some(1));
        a.battery = "BAT0".into();
        let mut b = mac(5000.0, 5000.0, Some(30));
        b.battery = "BAT1".into();
        assert_eq!(
            battery_line(&with(vec![a, b])),
            "Battery BAT0 80 % health · 1 cycle, BAT1 100 % health · 30 cycles"
        );
    }
}
