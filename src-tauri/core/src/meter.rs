//! Energy per domain and device: hardware counters first, power integration otherwise.
//!
//! Only the readings the chain chose count ([`Snapshot::owners`]): one per (domain, device),
//! from the domain's most trusted source, so a domain is never metered twice. Each owned
//! (domain, device, source) has its own accumulator. A reading that carries an energy counter is
//! metered by counter deltas ([`CounterIntegrator`]: sources report counters already unwrapped
//! and validated, so a decrease is a reset that adds nothing); one with only watts is metered by
//! the trapezoid rule with the gap policy ([`Integrator`]). A reading that switches from one kind
//! to the other, or stops being owned, starts a new baseline.
//!
//! An interval longer than the gap threshold (a suspend, a stalled source) adds nothing, counters
//! included: what a counter says happened while the machine slept is not trusted.
//!
//! Non-goals: choosing the owners (the chain does), and pricing (the session does).

use crate::chain::{Part, Snapshot};
use crate::counter::CounterIntegrator;
use crate::energy::{Integrator, DEFAULT_GAP_THRESHOLD};
use crate::reading::Domain;
use crate::units::Joules;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Duration;

/// How an interval's energy was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Method {
    /// Deltas of hardware energy counters.
    Counter,
    /// The trapezoid rule over power samples.
    Trapezoid,
}

impl Method {
    pub fn as_str(self) -> &'static str {
        match self {
            Method::Counter => "counter",
            Method::Trapezoid => "trapezoid",
        }
    }
}

enum Acc {
    Counter(CounterIntegrator, Duration),
    Power(Integrator),
}

/// What one sample added.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Metered {
    pub by_domain: BTreeMap<Domain, Joules>,
    /// Per owned part: the energy it added and how it was found.
    pub by_part: BTreeMap<Part, (Joules, Method)>,
}

pub struct Meter {
    accs: BTreeMap<Part, Acc>,
    gap_threshold: Duration,
}

impl Default for Meter {
    fn default() -> Self {
        Meter::new(DEFAULT_GAP_THRESHOLD)
    }
}

impl Meter {
    pub fn new(gap_threshold: Duration) -> Self {
        Meter {
            accs: BTreeMap::new(),
            gap_threshold,
        }
    }

    /// Intervals longer than this add nothing from then on.
    pub fn set_gap_threshold(&mut self, gap_threshold: Duration) {
        if gap_threshold != self.gap_threshold {
            self.gap_threshold = gap_threshold;
            self.accs.clear();
        }
    }

    /// Nothing is metered across this point (a suspend or a reset): every baseline starts anew.
    pub fn interrupt(&mut self) {
        self.accs.clear();
    }

    /// Meters the owned readings of one snapshot taken at monotonic `t`.
    pub fn push(&mut self, t: Duration, snapshot: &Snapshot) -> Metered {
        let mut out = Metered::default();
        self.accs.retain(|part, _| snapshot.owners.contains(part));
        for part in &snapshot.owners {
            let Some(r) = snapshot.reading(part) else {
                continue;
            };
            let gap = self.gap_threshold;
            let (joules, method) = match (r.energy_counter, r.watts) {
                (Some(counter), _) => {
                    let acc = self
                        .accs
                        .entry(part.clone())
                        .or_insert_with(|| Acc::Counter(CounterIntegrator::new(), t));
                    let fresh = match acc {
                        Acc::Counter(_, last) => t.saturating_sub(*last) > gap,
                        Acc::Power(_) => true,
                    };
                    if fresh {
                        *acc = Acc::Counter(CounterIntegrator::new(), t);
                    }
                    match acc {
                        // A fresh baseline measures no interval yet: the part is left out of
                        // `by_part`, so the headline falls back to its trapezoid this once.
                        Acc::Counter(c, last) if !c.started() => {
                            *last = t;
                            c.push(t, counter);
                            continue;
                        }
                        Acc::Counter(c, last) => {
                            *last = t;
                            (c.push(t, counter), Method::Counter)
                        }
                        Acc::Power(_) => continue,
                    }
                }
                (None, Some(watts)) => {
                    let acc = self
                        .accs
                        .entry(part.clone())
                        .or_insert_with(|| Acc::Power(Integrator::new(gap)));
                    if !matches!(acc, Acc::Power(_)) {
                        *acc = Acc::Power(Integrator::new(gap));
                    }
                    match acc {
                        Acc::Power(i) => (i.push(t, Some(watts)), Method::Trapezoid),
                        Acc::Counter(..) => continue,
                    }
                }
                (None, None) => continue,
            };
            if joules.0 > 0.0 {
                *out.by_domain.entry(r.domain).or_default() += joules;
            }
            out.by_part.insert(part.clone(), (joules, method));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reading::{Quality, Reading, Stamp};
    use crate::units::Watts;

    fn at(s: u64) -> Stamp {
        Stamp::new(Duration::from_secs(s), s as f64)
    }

    fn push(m: &mut Meter, s: u64, readings: Vec<Reading>) -> Metered {
        m.push(Duration::from_secs(s), &Snapshot::of(at(s), readings))
    }

    fn counted(domain: Domain, device: &str, joules: f64, watts: f64, s: u64) -> Reading {
        Reading {
            energy_counter: Some(Joules(joules)),
            ..Reading::power(domain, Watts(watts), "nvml", Quality::Measured, at(s))
                .with_device(device)
        }
    }

    fn power(domain: Domain, source: &str, quality: Quality, w: f64, s: u64) -> Reading {
        Reading::power(domain, Watts(w), source, quality, at(s))
    }

    #[test]
    fn a_counter_beats_integrated_power_in_the_same_reading() {
        // Zeus's idle window: the counter says 187 J where integrating the spot power says 327 J.
        let mut m = Meter::default();
        push(&mut m, 0, vec![counted(Domain::Gpu, "0", 1000.0, 60.0, 0)]);
        let added = push(&mut m, 5, vec![counted(Domain::Gpu, "0", 1187.0, 70.8, 5)]);
        assert_eq!(added.by_domain.get(&Domain::Gpu), Some(&Joules(187.0)));
        let part = Part {
            domain: Domain::Gpu,
            device: Some("0".into()),
            source: "nvml".into(),
        };
        assert_eq!(
            added.by_part.get(&part),
            Some(&(Joules(187.0), Method::Counter))
        );
    }

    #[test]
    fn devices_add_up_within_a_domain_and_watts_integrate_without_a_counter() {
        let mut m = Meter::default();
        let cpu = |w: f64, s: u64| power(Domain::Cpu, "rapl", Quality::Measured, w, s);
        push(
            &mut m,
            0,
            vec![
                counted(Domain::Gpu, "0", 0.0, 0.0, 0),
                counted(Domain::Gpu, "1", 0.0, 0.0, 0),
                cpu(10.0, 0),
            ],
        );
        let added = push(
            &mut m,
            1,
            vec![
                counted(Domain::Gpu, "0", 300.0, 300.0, 1),
                counted(Domain::Gpu, "1", 250.0, 250.0, 1),
                cpu(20.0, 1),
            ],
        );
        assert_eq!(added.by_domain.get(&Domain::Gpu), Some(&Joules(550.0)));
        assert_eq!(added.by_domain.get(&Domain::Cpu), Some(&Joules(15.0)));
    }

    #[test]
    fn a_domain_is_metered_from_its_owner_only_never_twice() {
        // RAPL measures the CPU at 20 W; the /proc/stat estimate says 12 W. 10 s at 20 W = 200 J,
        // not 200 + 120.
        let mut m = Meter::default();
        let both = |s: u64| {
            vec![
                power(Domain::Cpu, "rapl", Quality::Measured, 20.0, s),
                power(Domain::Cpu, "cpu-proxy", Quality::Estimated, 12.0, s),
            ]
        };
        let mut cpu = Joules(0.0);
        for s in 0..=10 {
            let added = push(&mut m, s, both(s));
            cpu += added
                .by_domain
                .get(&Domain::Cpu)
                .copied()
                .unwrap_or_default();
        }
        assert_eq!(cpu, Joules(200.0));
    }

    #[test]
    fn a_driver_reload_resets_the_baseline_and_adds_nothing() {
        let mut m = Meter::default();
        push(&mut m, 0, vec![counted(Domain::Gpu, "0", 50_000.0, 0.0, 0)]);
        let added = push(&mut m, 1, vec![counted(Domain::Gpu, "0", 20.0, 0.0, 1)]);
        assert!(added.by_domain.is_empty());
        let added = push(&mut m, 2, vec![counted(Domain::Gpu, "0", 120.0, 0.0, 2)]);
        assert_eq!(added.by_domain.get(&Domain::Gpu), Some(&Joules(100.0)));
    }

    #[test]
    fn a_counter_across_a_gap_adds_nothing() {
        // 100 W; the machine sleeps an hour and the counter kept counting (360 kJ): not metered.
        let mut m = Meter::new(Duration::from_secs(10));
        push(&mut m, 0, vec![counted(Domain::Gpu, "0", 0.0, 100.0, 0)]);
        push(&mut m, 1, vec![counted(Domain::Gpu, "0", 100.0, 100.0, 1)]);
        let across = push(
            &mut m,
            3601,
            vec![counted(Domain::Gpu, "0", 360_100.0, 100.0, 3601)],
        );
        assert!(across.by_domain.is_empty(), "{across:?}");
        let after = push(
            &mut m,
            3602,
            vec![counted(Domain::Gpu, "0", 360_200.0, 100.0, 3602)],
        );
        assert_eq!(after.by_domain.get(&Domain::Gpu), Some(&Joules(100.0)));
    }
}
