//! Each battery's health as the latest sample saw it: absent, never 0, where the gauge does not
//! report a figure (a cycle count of 0, a design capacity of 0, a charge with no voltage).

use super::{label, CounterF, GaugeF, Text};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::{Registry, Unit};
use wattbar_engine::PublishedState;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CurrencyLabels {
    currency: Text,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BatteryLabels {
    /// `BAT0`, or the gauge's name on macOS.
    battery: Text,
}

pub(super) fn battery(registry: &mut Registry, p: &PublishedState) {
    let wear = Family::<CurrencyLabels, CounterF>::default();
    registry.register(
        "wattbar_battery_wear_cost",
        "What drawing from the battery wore over the store's life, priced at battery_price over \
         the rated cycles and the design capacity, as the store committed it; never goes back",
        wear.clone(),
    );
    for w in &p.kept.committed.wear {
        if w.wear.is_finite() && w.wear > 0.0 {
            wear.get_or_create(&CurrencyLabels {
                currency: label(&w.currency),
            })
            .inc_by(w.wear);
        }
    }
    let ratio = Family::<BatteryLabels, GaugeF>::default();
    registry.register(
        "wattbar_battery_health_ratio",
        "What the battery holds when full over what it was designed to hold",
        ratio.clone(),
    );
    let cycles = Family::<BatteryLabels, Gauge<i64>>::default();
    registry.register(
        "wattbar_battery_cycles",
        "Charge cycles the battery's gauge has counted",
        cycles.clone(),
    );
    let full = Family::<BatteryLabels, GaugeF>::default();
    registry.register_with_unit(
        "wattbar_battery_full",
        "Energy the battery holds when full now",
        Unit::Joules,
        full.clone(),
    );
    let Some(batteries) = p
        .snapshot
        .as_ref()
        .and_then(|s| s.battery_health.as_deref())
    else {
        return;
    };
    for h in batteries {
        let labels = BatteryLabels {
            battery: label(&h.battery),
        };
        if let Some(r) = h.ratio.filter(|r| r.is_finite()) {
            ratio.get_or_create(&labels).set(r);
        }
        if let Some(c) = h.cycles.count() {
            cycles.get_or_create(&labels).set(i64::from(c));
        }
        if let Some(j) = h.full.filter(|j| j.0.is_finite()) {
            full.get_or_create(&labels).set(j.0);
        }
    }
}
