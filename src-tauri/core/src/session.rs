//! A session's energy and cost.
//!
//! Energy comes from hardware counters when the caller has them for the whole headline (the
//! `counted` argument of [`Session::push`]), otherwise from the [`Integrator`]'s trapezoids. The
//! integrator follows every sample either way, so a switch between the two never bridges a
//! stretch twice or not at all. Each step's energy is priced at the price in force when it was
//! drawn, so changing the price changes cost from then on and never re-prices the past.
//!
//! Scopes are kept apart: energy measured at the wall and energy the sensors summed are
//! different quantities, so each [`Scope`] has its own tally, the headline's scope is the one
//! shown, and the others are listed beside it ([`SessionTotals::other_scopes`]). The interval
//! across a change of scope is counted in neither: its two ends measure different things. Each
//! change is kept with its time, so the session can say when the figure began to mean another
//! thing.
//!
//! The session is the one owner of the headline's scope: the ledger records the changes it
//! reports ([`Added::scope_change`]), and totals are read in the scope it holds. A session that
//! follows an earlier run starts from that run's last scope ([`Session::after`]), so a restart
//! in another scope is a change like any other.

use crate::energy::{Gap, Integrator};
use crate::prefs::Currency;
use crate::pricing::{Pricing, SlotPart};
use crate::reading::Stamp;
use crate::scope::Scope;
use crate::units::{Joules, Watts};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// The changes of scope a session keeps, newest last; older ones are dropped first.
pub const SCOPE_CHANGES_KEPT: usize = 32;

/// What the UI, tray and CLI show for the running session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionTotals {
    /// Wall-clock start, seconds since the Unix epoch.
    pub started_unix: f64,
    /// Energy, cost and carbon in `scope`, the headline's.
    pub joules: Joules,
    pub kwh: f64,
    pub cost: f64,
    pub currency: Currency,
    /// Of `kwh`, what a price feed had no slot for, priced by the fallback (the fixed price and
    /// its rules): 0 without a feed.
    #[serde(default)]
    pub fallback_kwh: f64,
    /// Grams of CO₂ at the configured carbon intensity; `None` when none is set.
    pub carbon_g: Option<f64>,
    pub gaps: usize,
    /// What the figures above cover; `None` before the first headline.
    #[serde(default)]
    pub scope: Option<Scope>,
    /// What this session measured in other scopes (before a plug was added, while it was
    /// unplugged): never added to the figures above.
    #[serde(default)]
    pub other_scopes: Vec<ScopeTally>,
    /// Each change of scope in this session, oldest first (at most [`SCOPE_CHANGES_KEPT`]).
    #[serde(default)]
    pub scope_changes: Vec<ScopeChange>,
}

/// Energy and cost measured in one scope.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ScopeTally {
    pub scope: Scope,
    pub joules: Joules,
    pub kwh: f64,
    pub cost: f64,
    /// Of `kwh`, what a price feed had no slot for: priced by the fallback (the tariffs).
    #[serde(default)]
    pub fallback_kwh: f64,
    pub carbon_g: Option<f64>,
}

/// The headline's scope changed from `from` to `to` at `unix` (wall-clock seconds).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ScopeChange {
    pub unix: f64,
    pub from: Scope,
    pub to: Scope,
}

#[derive(Debug, Clone)]
pub struct Session {
    started_unix: f64,
    integrator: Integrator,
    /// The headline's scope at the last sample that had one.
    scope: Option<Scope>,
    /// One tally per scope seen, in the order first seen.
    tallies: Vec<ScopeTally>,
    changes: Vec<ScopeChange>,
}

/// What one sample added.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Added {
    pub joules: Joules,
    pub cost: f64,
    pub carbon_g: f64,
    /// The headline's scope changed at this sample: the interval before it counted nowhere.
    pub scope_change: Option<ScopeChange>,
    /// Its energy and cost per price slot, where a price feed is set.
    pub slots: Vec<SlotPart>,
}

impl Session {
    pub fn new(started_unix: f64, gap_threshold: Duration) -> Self {
        Session {
            started_unix,
            integrator: Integrator::new(gap_threshold),
            scope: None,
            tallies: Vec::new(),
            changes: Vec::new(),
        }
    }

    /// This session, following a run whose headline last covered `scope`: a first sample of
    /// another scope is a change.
    pub fn after(mut self, scope: Option<Scope>) -> Self {
        self.scope = scope;
        self
    }

    /// What the headline covers: the scope of the last sample that had one (or the earlier
    /// run's, before any).
    pub fn scope(&self) -> Option<Scope> {
        self.scope
    }

    /// The session that follows this one from `started_unix`: nothing counted yet, and the
    /// interval from this one's last sample on is its own (a reset between two samples loses
    /// nothing).
    pub fn next(&self, started_unix: f64) -> Self {
        Session {
            started_unix,
            integrator: self.integrator.continued(),
            scope: self.scope,
            tallies: Vec::new(),
            changes: Vec::new(),
        }
    }

    /// Adds one sample taken `at`, when the local time was `week_seconds` (seconds since Monday
    /// 00:00), of a headline of `watts` covering `scope`. `counted` is the energy hardware
    /// counters measured since the last sample for everything the headline is made of; without
    /// it the power is integrated. The energy since the last sample is priced as `pricing` has
    /// it over that interval (the feed's slots, else the tariffs).
    pub fn push(
        &mut self,
        at: Stamp,
        watts: Option<Watts>,
        scope: Option<Scope>,
        counted: Option<Joules>,
        pricing: &Pricing,
        week_seconds: f64,
    ) -> Added {
        let t = at.monotonic;
        let since = self.integrator.last_time();
        let integrated = self.integrator.push(t, watts);
        let change = match (self.scope, scope) {
            (Some(from), Some(to)) if from != to => {
                let change = ScopeChange {
                    unix: at.unix_seconds,
                    from,
                    to,
                };
                self.changes.push(change);
                if self.changes.len() > SCOPE_CHANGES_KEPT {
                    self.changes.remove(0);
                }
                Some(change)
            }
            _ => None,
        };
        if scope.is_some() {
            self.scope = scope;
        }
        let joules = match counted {
            Some(j) if j.0.is_finite() && j.0 >= 0.0 => j,
            _ => integrated,
        };
        let Some(scope) = self.scope.filter(|_| change.is_none() && joules.0 > 0.0) else {
            return Added {
                scope_change: change,
                ..Added::default()
            };
        };
        let seconds = since
            .map(|s| t.saturating_sub(s).as_secs_f64())
            .unwrap_or(0.0);
        let priced = pricing.price(
            at.unix_seconds - seconds,
            week_seconds - seconds,
            seconds,
            joules,
        );
        let tally = self.tally(scope);
        tally.joules += joules;
        tally.kwh = tally.joules.kwh();
        tally.cost += priced.cost;
        tally.fallback_kwh += Joules(priced.fallback_joules).kwh();
        if let Some(g) = priced.carbon_g {
            *tally.carbon_g.get_or_insert(0.0) += g;
        }
        Added {
            joules,
            cost: priced.cost,
            carbon_g: priced.carbon_g.unwrap_or(0.0),
            scope_change: None,
            slots: priced.parts,
        }
    }

    fn tally(&mut self, scope: Scope) -> &mut ScopeTally {
        let i = match self.tallies.iter().position(|t| t.scope == scope) {
            Some(i) => i,
            None => {
                self.tallies.push(ScopeTally {
                    scope,
                    joules: Joules(0.0),
                    kwh: 0.0,
                    cost: 0.0,
                    fallback_kwh: 0.0,
                    carbon_g: None,
                });
                self.tallies.len() - 1
            }
        };
        &mut self.tallies[i]
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
        let shown = self
            .tallies
            .iter()
            .find(|t| Some(t.scope) == self.scope)
            .copied();
        SessionTotals {
            started_unix: self.started_unix,
            joules: shown.map_or(Joules(0.0), |t| t.joules),
            kwh: shown.map_or(0.0, |t| t.kwh),
            cost: shown.map_or(0.0, |t| t.cost),
            fallback_kwh: shown.map_or(0.0, |t| t.fallback_kwh),
            currency: currency.clone(),
            carbon_g: shown.and_then(|t| t.carbon_g),
            gaps: self.integrator.gap_count(),
            scope: self.scope,
            other_scopes: self
                .tallies
                .iter()
                .filter(|t| Some(t.scope) != self.scope)
                .copied()
                .collect(),
            scope_changes: self.changes.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tariff::{Price, Tariffs};
    use crate::tariff::{TariffRule, TimeOfDay, Weekday};

    const WHOLE: Option<Scope> = Some(Scope::System);

    fn at(s: f64) -> Stamp {
        Stamp::new(Duration::from_secs_f64(s), 1_700_000_000.0 + s)
    }

    fn flat(p: f64) -> Pricing {
        Pricing::fixed(Tariffs::flat(Price::new(p).unwrap_or_default()), None)
    }

    #[test]
    fn the_session_after_a_reset_between_two_samples_counts_the_rest_of_the_interval() {
        // 3600 W: samples at 0 and 1 s (3600 J), a reset at 1.5 s after a sample taken then
        // (1800 J more, the old session's), the next sample at 2 s: its 1800 J are the new
        // session's, not lost.
        let w = Some(Watts(3600.0));
        let mut old = Session::new(0.0, Duration::from_secs(10));
        for t in [0.0, 1.0, 1.5] {
            old.push(at(t), w, WHOLE, None, &flat(0.0), 0.0);
        }
        assert_eq!(old.totals(&Currency::default()).joules, Joules(5400.0));
        let mut new = old.next(1.5);
        let added = new.push(at(2.0), w, WHOLE, None, &flat(0.0), 0.0);
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
                at(t as f64),
                Some(Watts(3600.0)),
                WHOLE,
                None,
                &cheap,
                t as f64,
            );
        }
        for t in 1001..=2000 {
            s.push(
                at(t as f64),
                Some(Watts(3600.0)),
                WHOLE,
                None,
                &dear,
                t as f64,
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
        s.push(at(0.0), Some(Watts(100.0)), WHOLE, None, &free, 0.0);
        s.push(at(1.0), Some(Watts(100.0)), WHOLE, None, &free, 1.0);
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
            .map(|t| Pricing::fixed(t, None))
            .unwrap_or_else(|e| panic!("{e}"));
        let five_pm = 17.0 * 3600.0;
        let mut s = Session::new(0.0, Duration::from_secs(30));
        s.push(
            at(100.0),
            Some(Watts(3600.0)),
            WHOLE,
            None,
            &tariffs,
            five_pm - 10.0,
        );
        s.push(
            at(120.0),
            Some(Watts(3600.0)),
            WHOLE,
            None,
            &tariffs,
            five_pm + 10.0,
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
        let t0 = Pricing::fixed(
            Tariffs::flat(Price::new(0.3).unwrap_or_default()),
            Some(400.0),
        );
        for t in 0..=1000 {
            s.push(
                at(t as f64),
                Some(Watts(3600.0)),
                WHOLE,
                None,
                &t0,
                t as f64,
            );
        }
        let totals = s.totals(&Currency::default());
        assert!((totals.carbon_g.unwrap_or(0.0) - 400.0).abs() < 1e-9);
    }

    #[test]
    fn energy_at_the_wall_and_of_the_sensors_is_never_added_and_each_change_is_kept() {
        // 60 W of CPU package for 10 s (600 J), a plug reads 100 W from 10 s to 20 s (the
        // interval across the change counts nowhere, then 9 s × 100 W = 900 J), unplugged at
        // 20 s: the sensors again for 5 s (the first interval lost, 4 × 60 = 240 J more).
        let cpu = Some(Scope::Components);
        let wall = Some(Scope::Wall);
        let mut s = Session::new(0.0, Duration::from_secs(10));
        let tariff = flat(0.5);
        let mut push =
            |t: f64, w: f64, scope| s.push(at(t), Some(Watts(w)), scope, None, &tariff, t);
        for t in 0..=10 {
            push(f64::from(t), 60.0, cpu);
        }
        let change = push(11.0, 100.0, wall);
        assert_eq!(
            change.scope_change,
            Some(ScopeChange {
                unix: 1_700_000_011.0,
                from: Scope::Components,
                to: Scope::Wall
            })
        );
        assert_eq!(change.joules, Joules(0.0));
        for t in 12..=20 {
            push(f64::from(t), 100.0, wall);
        }
        // A sample without a headline changes nothing.
        s.push(at(20.5), None, None, None, &tariff, 20.5);
        let at_wall = s.totals(&Currency::default());
        assert_eq!(at_wall.scope, Some(Scope::Wall));
        assert_eq!(at_wall.joules, Joules(900.0));
        assert_eq!(at_wall.other_scopes.len(), 1);
        assert_eq!(at_wall.other_scopes[0].scope, Scope::Components);
        assert_eq!(at_wall.other_scopes[0].joules, Joules(600.0));
        let mut push =
            |t: f64, w: f64, scope| s.push(at(t), Some(Watts(w)), scope, None, &tariff, t);
        for t in 21..=25 {
            push(f64::from(t), 60.0, cpu);
        }
        let back = s.totals(&Currency::default());
        assert_eq!(back.scope, Some(Scope::Components));
        assert_eq!(back.joules, Joules(840.0));
        // 840 J at 0.5 a kWh, to the cent's ten-thousandth.
        assert!((back.cost - 840.0 / 3.6e6 * 0.5).abs() < 1e-12);
        assert_eq!(back.other_scopes[0].joules, Joules(900.0));
        let changes: Vec<(f64, Scope, Scope)> = back
            .scope_changes
            .iter()
            .map(|c| (c.unix - 1_700_000_000.0, c.from, c.to))
            .collect();
        assert_eq!(
            changes,
            [
                (11.0, Scope::Components, Scope::Wall),
                (21.0, Scope::Wall, Scope::Components)
            ]
        );
    }

    #[test]
    fn a_run_that_starts_in_another_scope_than_the_last_ended_reports_the_change() {
        // The last run ended at the wall; this one starts on the sensors: the first sample is a
        // change (the ledger records it), the next ones count (2 s × 60 W = 120 J).
        let tariff = flat(0.5);
        let mut s = Session::new(0.0, Duration::from_secs(10)).after(Some(Scope::Wall));
        assert_eq!(s.scope(), Some(Scope::Wall));
        let cpu = Some(Scope::Components);
        let first = s.push(at(0.0), Some(Watts(60.0)), cpu, None, &tariff, 0.0);
        assert_eq!(
            first.scope_change.map(|c| (c.from, c.to)),
            Some((Scope::Wall, Scope::Components))
        );
        for t in 1..=2 {
            let added = s.push(at(f64::from(t)), Some(Watts(60.0)), cpu, None, &tariff, 0.0);
            assert_eq!(added.scope_change, None);
        }
        let totals = s.totals(&Currency::default());
        assert_eq!((totals.scope, totals.joules), (cpu, Joules(120.0)));
        // The same scope as the last run's: no change.
        let mut same = Session::new(0.0, Duration::from_secs(10)).after(cpu);
        let first = same.push(at(0.0), Some(Watts(60.0)), cpu, None, &tariff, 0.0);
        assert_eq!(first.scope_change, None);
    }
}
