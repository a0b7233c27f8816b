//! The price and grid intensity in force now, where a feed gives them: absent, never 0, where
//! the feed has no slot now (the fallback prices then, and the fixed price is the preferences').

use super::{label, GaugeF, Text};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;
use wattbar_engine::PublishedState;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PriceLabels {
    currency: Text,
    /// The feed, as the ledger keys it: `energy-charts:DE-LU`.
    source: Text,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CarbonLabels {
    source: Text,
}

pub(super) fn prices(registry: &mut Registry, p: &PublishedState) {
    let price = Family::<PriceLabels, GaugeF>::default();
    registry.register(
        "wattbar_price_per_kwh",
        "The retail price of a kWh in force now, from the price feed's slot",
        price.clone(),
    );
    if let Some(f) = &p.prices.price {
        if let Some(now) = f.now.filter(|v| v.is_finite()) {
            let currency = f.currency.as_deref().unwrap_or(p.prefs.currency.as_str());
            price
                .get_or_create(&PriceLabels {
                    currency: label(currency),
                    source: label(&f.feed),
                })
                .set(now);
        }
    }
    let carbon = Family::<CarbonLabels, GaugeF>::default();
    registry.register(
        "wattbar_carbon_intensity_grams_per_kwh",
        "The grid's carbon intensity in force now, gCO2 per kWh, from the carbon feed's slot",
        carbon.clone(),
    );
    if let Some(f) = &p.prices.carbon {
        if let Some(now) = f.now.filter(|v| v.is_finite()) {
            carbon
                .get_or_create(&CarbonLabels {
                    source: label(&f.feed),
                })
                .set(now);
        }
    }
}
