//! A session's energy and cost.
//!
//! Energy comes from hardware counters when the caller has them for the whole headline (the
//! `counted` argument of [`Session::push`]), otherwise from the [`Integrator`]'s trapezoids. The
//! integrator follows every sample either way, so a switch between the two never bridges a
//! stretch twice or not at all. Each step's energy is priced at the price in force when it was
//! drawn, so changing the price changes cost from then on and never re-prices the past.

use crate::energy::{Gap, Integrator};
use crate::prefs::Currency;
use crate::tariff::Tariffs;
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
    /// Grams of CO₂ at the configured carbon intensity; `None` when none is set.
    pub carbon_g: Option<f64>,
    pub gaps: usize,
}

#[derive(Debug, Clone)]
pub struct Session {
    started_unix: f64,
    integrator: Integrator,
    joules: Joules,
    cost: f64,
    carbon_g: Option<f64>,
}

/// What one sample added.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Added {
    pub joules: Joules,
    pub cost: f64,
    pub carbon_g: f64,
}

impl Session {
    pub fn new(started_unix: f64, gap_threshold: Duration) -> Self {
        Session {
            started_unix,
            integrator: Integrator::new(gap_threshold),
            joules: Joules(0.0),
            cost: 0.0,
            carbon_g: None,
        }
    }

    /// Adds one sample taken at monotonic `t`, when the local time was `week_seconds` (seconds
    /// since Monday 00:00). `counted` is the energy hardware counters measured since the last
    /// sample for everything the headline is made of; without it the power is integrated. The
    /// energy since the last sample is priced at the tariffs in force over that interval.
    /// The session that follows this one from `started_unix`: nothing counted yet, and the
    /// interval from this one's last sample on is its own (a reset between two samples loses
    /// nothing).
    pub fn next(&self, started_unix: f64) -> Self {
        Session {
            started_unix,
            integrator: self.integrator.continued(),
            joules: Joules(0.0),
            cost: 0.0,
            carbon_g: None,
        }
    }

    pub fn push(
        &mut self,
        t: Duration,
        watts: Option<Watts>,
        counted: Option<Joules>,
        tariffs: &Tariffs,
        week_seconds: f64,
        carbon_g_per_kwh: Option<f64>,
    ) -> Added {
        let since = self.integrator.last_time();
        let integrated = self.integrator.push(t, watts);
        let joules = match counted {
            Some(j) if j.0.is_finite() && j.0 >= 0.0 => j,
            _ => integrated,
        };
        self.joules += joules;
        if joules.0 <= 0.0 {
            return Added::default();
        }
        let seconds = since
            .map(|s| t.saturating_sub(s).as_secs_f64())
            .unwrap_or(0.0);
        let cost = tariffs.cost(week_seconds - seconds, seconds, joules);
        self.cost += cost;
        let carbon_g = carbon_g_per_kwh.map(|g| g * joules.kwh()).unwrap_or(0.0);
        if carbon_g_per_kwh.is_some() {
            *self.carbon_g.get_or_insert(0.0) += carbon_g;
        }
        Added {
            joules,
            cost,
            carbon_g,
        }
    }

    pub fn interrupt(&mut self, t: Duration, seconds: f64) {
        self.integrator.interrupt(t, seconds);
    }

    /// Intervals longer than this are gaps from now on.
    pub fn set_gap_threshold(&mut self, gap_threshold: Duration) {
        self.integrator.set_gap_threshold(gap_threshold);
    }

    /// Samples clamped to the 100 kW ceiling so far.
    pub fn clamped(&self) -> u64 {
        self.integrator.clamped()
    }

    pub fn gaps(&self) -> &[Gap] {
        self.integrator.gaps()
    }

    pub fn totals(&self, currency: &Currency) -> SessionTotals {
        let joules = self.joules;
        SessionTotals {
            started_unix: self.started_unix,
            joules,
            kwh: joules.kwh(),
            cost: self.cost,
            currency: currency.clone(),
            carbon_g: self.carbon_g,
            gaps: self.integrator.gaps().len(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tariff::Price;
    use crate::tariff::{TariffRule, TimeOfDay, Weekday};

    fn flat(p: f64) -> Tariffs {
        Tariffs::flat(Price::new(p).unwrap_or_default())
    }

    #[test]
    fn the_session_after_a_reset_between_two_samples_counts_the_rest_of_the_interval() {
        // 3600 W: samples at 0 and 1 s (3600 J), a reset at 1.5 s after a sample taken then
        // (1800 J more, the old session's), the next sample at 2 s: its 1800 J are the new
        // session's, not lost.
        let at = |s: f64| Duration::from_secs_f64(s);
        let w = Some(Watts(3600.0));
        let mut old = Session::new(0.0, Duration::from_secs(10));
        for t in [0.0, 1.0, 1.5] {
            old.push(at(t), w, None, &flat(0.0), 0.0, None);
        }
        assert_eq!(old.totals(&Currency::default()).joules, Joules(5400.0));
        let mut new = old.next(1.5);
        let added = new.push(at(2.0), w, None, &flat(0.0), 0.0, None);
        assert_eq!(added.joules, Joules(1800.0));
        let totals = new.totals(&Currency::default());
        assert_eq!((totals.joules, totals.started_unix), (Joules(1800.0), 1.5));
    }

    #[test]
    fn a_price_change_reprices_only_what_comes_after() {
        // 3600 W for 1000 s = 1 kWh at 0.20, then 1 kWh at 0.50: 0.70 in all.
        let mut s = Session::new(0.0, Duration::from_secs(10));
        let (cheap, dear) = (flat(0.20), flat(0.50));
        for t in 0..=1000 {
            s.push(
                Duration::from_secs(t),
                Some(Watts(3600.0)),
                None,
                &cheap,
                t as f64,
                None,
            );
        }
        for t in 1001..=2000 {
            s.push(
                Duration::from_secs(t),
                Some(Watts(3600.0)),
                None,
                &dear,
                t as f64,
                None,
            );
        }
        let totals = s.totals(&Currency::default());
        // The 1000→1001 step was drawn under the new price.
        assert!((totals.kwh - 2.0).abs() < 1e-9);
        assert!((totals.cost - (1.0 * 0.20 + 1.0 * 0.50)).abs() < 1e-9);
    }

    #[test]
    fn a_free_price_costs_nothing_but_energy_still_counts() {
        let mut s = Session::new(0.0, Duration::from_secs(10));
        let free = flat(0.0);
        s.push(
            Duration::from_secs(0),
            Some(Watts(100.0)),
            None,
            &free,
            0.0,
            None,
        );
        s.push(
            Duration::from_secs(1),
            Some(Watts(100.0)),
            None,
            &free,
            1.0,
            None,
        );
        let t = s.totals(&Currency::default());
        assert_eq!(t.joules, Joules(100.0));
        assert_eq!(t.cost, 0.0);
        assert_eq!(t.carbon_g, None);
    }

    #[test]
    fn a_tariff_boundary_inside_a_sample_interval_is_split() {
        // Monday: 0.30 until 17:00, 0.50 after. 3600 W from 16:59:50 to 17:00:10 = 20 Wh.
        let rules = vec![TariffRule {
            weekdays: vec![Weekday::Mon],
            from: TimeOfDay::parse("17:00").unwrap_or_else(|e| panic!("{e}")),
            to: TimeOfDay::parse("20:00").unwrap_or_else(|e| panic!("{e}")),
            price: Price::new(0.50).unwrap_or_default(),
        }];
        let tariffs = Tariffs::new(Price::new(0.30).unwrap_or_default(), rules)
            .unwrap_or_else(|e| panic!("{e}"));
        let five_pm = 17.0 * 3600.0;
        let mut s = Session::new(0.0, Duration::from_secs(30));
        s.push(
            Duration::from_secs(100),
            Some(Watts(3600.0)),
            None,
            &tariffs,
            five_pm - 10.0,
            None,
        );
        s.push(
            Duration::from_secs(120),
            Some(Watts(3600.0)),
            None,
            &tariffs,
            five_pm + 10.0,
            None,
        );
        let t = s.totals(&Currency::default());
        assert!((t.kwh - 0.02).abs() < 1e-12);
        assert!(
            (t.cost - (0.01 * 0.30 + 0.01 * 0.50)).abs() < 1e-12,
            "{}",
            t.cost
        );
    }

    #[test]
    fn carbon_intensity_gives_grams_alongside_cost() {
        // 1 kWh at 400 g/kWh = 400 g.
        let mut s = Session::new(0.0, Duration::from_secs(10));
        let t0 = flat(0.3);
        for t in 0..=1000 {
            s.push(
                Duration::from_secs(t),
                Some(Watts(3600.0)),
                None,
                &t0,
                t as f64,
                Some(400.0),
            );
        }
        let totals = s.totals(&Currency::default());
        assert!((totals.carbon_g.unwrap_or(0.0) - 400.0).abs() < 1e-9);
    }
}
