//! A session's energy and cost.
//!
//! Energy comes from the [`Integrator`]; each step's energy is priced at the price in force when
//! it was drawn, so changing the price changes cost from then on and never re-prices the past.

use crate::energy::{Gap, Integrator};
use crate::prefs::{Currency, Price};
use crate::units::{Joules, Watts};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// What the UI, tray and CLI show for the running session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionTotals {
    /// Wall-clock start, seconds since the Unix epoch.
    pub started_unix: f64,
    pub joules: Joules,
    pub kwh: f64,
    pub cost: f64,
    pub currency: Currency,
    pub gaps: usize,
}

#[derive(Debug, Clone)]
pub struct Session {
    started_unix: f64,
    integrator: Integrator,
    cost: f64,
}

impl Session {
    pub fn new(started_unix: f64, gap_threshold: Duration) -> Self {
        Session {
            started_unix,
            integrator: Integrator::new(gap_threshold),
            cost: 0.0,
        }
    }

    /// Adds one sample; returns the energy it added.
    pub fn push(&mut self, t: Duration, watts: Option<Watts>, price: Price) -> Joules {
        let added = self.integrator.push(t, watts);
        self.cost += added.kwh() * price.per_kwh();
        added
    }

    pub fn interrupt(&mut self, t: Duration, seconds: f64) {
        self.integrator.interrupt(t, seconds);
    }

    pub fn gaps(&self) -> &[Gap] {
        self.integrator.gaps()
    }

    pub fn totals(&self, currency: &Currency) -> SessionTotals {
        let joules = self.integrator.total();
        SessionTotals {
            started_unix: self.started_unix,
            joules,
            kwh: joules.kwh(),
            cost: self.cost,
            currency: currency.clone(),
            gaps: self.integrator.gaps().len(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_price_change_reprices_only_what_comes_after() {
        // 3600 W for 1000 s = 1 kWh at 0.20, then 1 kWh at 0.50: 0.70 in all.
        let mut s = Session::new(0.0, Duration::from_secs(10));
        let cheap = Price::new(0.20).unwrap_or_default();
        let dear = Price::new(0.50).unwrap_or_default();
        for t in 0..=1000 {
            s.push(Duration::from_secs(t), Some(Watts(3600.0)), cheap);
        }
        for t in 1001..=2000 {
            s.push(Duration::from_secs(t), Some(Watts(3600.0)), dear);
        }
        let totals = s.totals(&Currency::default());
        // The 1000→1001 step was drawn under the new price.
        assert!((totals.kwh - 2.0).abs() < 1e-9);
        assert!((totals.cost - (1.0 * 0.20 + 1.0 * 0.50)).abs() < 1e-9);
    }

    #[test]
    fn a_free_price_costs_nothing_but_energy_still_counts() {
        let mut s = Session::new(0.0, Duration::from_secs(10));
        let free = Price::new(0.0).unwrap_or_default();
        s.push(Duration::from_secs(0), Some(Watts(100.0)), free);
        s.push(Duration::from_secs(1), Some(Watts(100.0)), free);
        let t = s.totals(&Currency::default());
        assert_eq!(t.joules, Joules(100.0));
        assert_eq!(t.cost, 0.0);
    }
}
