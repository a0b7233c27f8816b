//! Energy per domain and device: hardware counters first, power integration otherwise.
//!
//! Each (domain, device, source) has its own accumulator. A reading that carries an energy
//! counter is metered by counter deltas ([`CounterIntegrator`]: sources report counters already
//! unwrapped, so a decrease is a reset that adds nothing); one with only watts is metered by the
//! trapezoid rule with the gap policy ([`Integrator`]). A reading that switches from one kind to
//! the other starts a new baseline.
//!
//! Non-goals: choosing the headline (the chain does), and pricing (the session does).

use crate::counter::CounterIntegrator;
use crate::energy::{Integrator, DEFAULT_GAP_THRESHOLD};
use crate::reading::{Domain, Reading};
use crate::units::Joules;
use std::collections::BTreeMap;
use std::time::Duration;

enum Acc {
    Counter(CounterIntegrator),
    Power(Integrator),
}

type Key = (Domain, Option<String>, String);

#[derive(Default)]
pub struct Meter {
    accs: BTreeMap<Key, Acc>,
}

impl Meter {
    pub fn new() -> Self {
        Meter::default()
    }

    /// Meters one sample's readings taken at monotonic `t`; returns the energy added per domain.
    pub fn push(&mut self, t: Duration, readings: &[Reading]) -> BTreeMap<Domain, Joules> {
        let mut added: BTreeMap<Domain, Joules> = BTreeMap::new();
        for r in readings {
            let key = (r.domain, r.device.clone(), r.source.clone());
            let joules = match (r.energy_counter, r.watts) {
                (Some(counter), _) => {
                    let acc = self
                        .accs
                        .entry(key)
                        .and_modify(|a| {
                            if !matches!(a, Acc::Counter(_)) {
                                *a = Acc::Counter(CounterIntegrator::new());
                            }
                        })
                        .or_insert_with(|| Acc::Counter(CounterIntegrator::new()));
                    match acc {
                        Acc::Counter(c) => c.push(t, counter, None),
                        Acc::Power(_) => Joules(0.0),
                    }
                }
                (None, Some(watts)) => {
                    let acc = self
                        .accs
                        .entry(key)
                        .and_modify(|a| {
                            if !matches!(a, Acc::Power(_)) {
                                *a = Acc::Power(Integrator::new(DEFAULT_GAP_THRESHOLD));
                            }
                        })
                        .or_insert_with(|| Acc::Power(Integrator::new(DEFAULT_GAP_THRESHOLD)));
                    match acc {
                        Acc::Power(i) => i.push(t, Some(watts)),
                        Acc::Counter(_) => Joules(0.0),
                    }
                }
                (None, None) => Joules(0.0),
            };
            if joules.0 > 0.0 {
                *added.entry(r.domain).or_default() += joules;
            }
        }
        added
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reading::{Quality, Stamp};
    use crate::units::Watts;

    fn at(s: u64) -> Stamp {
        Stamp::new(Duration::from_secs(s), s as f64)
    }

    fn counted(domain: Domain, device: &str, joules: f64, watts: f64, s: u64) -> Reading {
        Reading {
            energy_counter: Some(Joules(joules)),
            ..Reading::power(domain, Watts(watts), "nvml", Quality::Measured, at(s))
                .with_device(device)
        }
    }

    #[test]
    fn a_counter_beats_integrated_power_in_the_same_reading() {
        // Zeus's idle window: the counter says 187 J where integrating the spot power says 327 J.
        let mut m = Meter::new();
        m.push(
            Duration::from_secs(0),
            &[counted(Domain::Gpu, "0", 1000.0, 60.0, 0)],
        );
        let added = m.push(
            Duration::from_secs(5),
            &[counted(Domain::Gpu, "0", 1187.0, 70.8, 5)],
        );
        assert_eq!(added.get(&Domain::Gpu), Some(&Joules(187.0)));
    }

    #[test]
    fn devices_add_up_within_a_domain_and_watts_integrate_without_a_counter() {
        let mut m = Meter::new();
        let cpu = |w: f64, s: u64| {
            Reading::power(Domain::Cpu, Watts(w), "rapl", Quality::Measured, at(s))
        };
        m.push(
            Duration::from_secs(0),
            &[
                counted(Domain::Gpu, "0", 0.0, 0.0, 0),
                counted(Domain::Gpu, "1", 0.0, 0.0, 0),
                cpu(10.0, 0),
            ],
        );
        let added = m.push(
            Duration::from_secs(1),
            &[
                counted(Domain::Gpu, "0", 300.0, 0.0, 1),
                counted(Domain::Gpu, "1", 250.0, 0.0, 1),
                cpu(20.0, 1),
            ],
        );
        assert_eq!(added.get(&Domain::Gpu), Some(&Joules(550.0)));
        assert_eq!(added.get(&Domain::Cpu), Some(&Joules(15.0)));
    }

    #[test]
    fn a_driver_reload_resets_the_baseline_and_adds_nothing() {
        let mut m = Meter::new();
        m.push(
            Duration::from_secs(0),
            &[counted(Domain::Gpu, "0", 50_000.0, 0.0, 0)],
        );
        let added = m.push(
            Duration::from_secs(1),
            &[counted(Domain::Gpu, "0", 20.0, 0.0, 1)],
        );
        assert!(added.is_empty());
        let added = m.push(
            Duration::from_secs(2),
            &[counted(Domain::Gpu, "0", 120.0, 0.0, 2)],
        );
        assert_eq!(added.get(&Domain::Gpu), Some(&Joules(100.0)));
    }
}
