//! Wear: the share of the battery's life that running on it uses, priced apart from the grid.
//!
//! Rules:
//! - An interval counts as drawn from the battery when the snapshot that ends it says the
//!   machine runs on its battery (no adapter supplies it): its headline energy is the battery's.
//! - Its wear is that energy at `battery_price ÷ (battery_rated_cycles × design kWh)`, or with
//!   a price of its own per battery (`battery_prices`), each battery's price over its cycles,
//!   added, over the designs added ([`wattbar_core::battery::wear_per_kwh`]), in the
//!   preferences' currency. Without a price for a battery, or a design capacity in energy, the
//!   energy is counted and not priced, and why is said: never a wear of 0.
//! - The grid's cost of such an interval is 0 (the meter prices it so): the battery's joules are
//!   not the grid's; charging it is priced from the grid later.

use serde::Serialize;
use std::borrow::Cow;
use wattbar_core::battery::wear_per_kwh;
use wattbar_core::{Preferences, Snapshot, JOULES_PER_KWH};
use wattbar_ledger::store::wear::Worn;

/// The session's battery energy and wear, as published.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct WearNow {
    /// The machine runs on its battery at the latest sample.
    pub on_battery: bool,
    /// The session's energy drawn from the battery, its wear and the part not priced.
    pub session: Worn,
    /// The rate in force, per kWh drawn; `None` where wear cannot be priced now.
    pub per_kwh: Option<f64>,
    /// Why wear is not priced now; `None` while it is (or without a battery).
    pub unpriced_because: Option<Cow<'static, str>>,
}

/// The stage: owns the session's wear.
#[derive(Debug, Default)]
pub struct Wear {
    now: WearNow,
}

impl Wear {
    /// Observes one sample's headline energy (`joules`) and what the snapshot says of the
    /// supply; what it drew from the battery, for the ledger, where it drew any.
    pub fn observe(
        &mut self,
        joules: f64,
        snapshot: &Snapshot,
        prefs: &Preferences,
    ) -> Option<Worn> {
        self.now.on_battery = snapshot.battery.is_some_and(|b| b.on_battery);
        let batteries = snapshot.battery_health.as_deref().unwrap_or_default();
        // A machine without a battery (most of them) allocates nothing here.
        if batteries.is_empty() {
            self.now.per_kwh = None;
            self.now.unpriced_because = None;
            return None;
        }
        let rate: Result<f64, Cow<'static, str>> = match prefs.battery_price {
            // Said without building a message each sample: the usual case of a laptop whose
            // owner set no price.
            None if prefs.battery_prices.is_empty() => {
                Err(Cow::Borrowed("no battery_price is set"))
            }
            price => wear_per_kwh(
                price,
                prefs.battery_rated_cycles,
                &prefs.battery_prices,
                batteries,
            )
            .map_err(Cow::Owned),
        };
        if self.now.session.currency != prefs.currency.as_str() {
            self.now.session.currency = prefs.currency.as_str().to_string();
        }
        (self.now.per_kwh, self.now.unpriced_because) = match &rate {
            Ok(r) => (Some(*r), None),
            Err(why) => (None, Some(why.clone())),
        };
        if !self.now.on_battery || !joules.is_finite() || joules <= 0.0 {
            return None;
        }
        let worn = match rate {
            Ok(r) => Worn {
                currency: self.now.session.currency.clone(),
                joules,
                unpriced_joules: 0.0,
                wear: joules / JOULES_PER_KWH * r,
            },
            Err(_) => Worn {
                currency: self.now.session.currency.clone(),
                joules,
                unpriced_joules: joules,
                wear: 0.0,
            },
        };
        self.now.session.add(&worn);
        Some(worn)
    }

    /// A new session: its wear starts again from 0.
    pub fn reset(&mut self) {
        self.now.session = Worn {
            currency: self.now.session.currency.clone(),
            ..Worn::default()
        };
    }

    pub fn view(&self) -> &WearNow {
        &self.now
    }
}
