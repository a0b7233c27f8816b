//! Every sample a run keeps, in a compact form: a run of hours at 10 Hz keeps hundreds of
//! thousands of states and intervals, and a measurement must not grow into a load of its own.
//!
//! Rules:
//! - Each name (domain, device, source) is stored once and referred to by number, so a state is
//!   some 100 bytes plus 56 per reading, and an interval some 90 plus 16 per domain.
//! - A state that repeats the last one's sample (same time) is not kept again.
//! - Only the last state's reasons for what could not be read are kept: they say why nothing
//!   was measured, which only the latest sample can tell.
//! - What is handed out is the full form ([`State`], [`Interval`]), made again for one window.
//! - A state is taken from the engine's one wire type, [`StatePayload`], whether it came from an
//!   engine in this process or from another's stream: never through JSON in between.

use std::collections::HashMap;
use wattbar_core::inference::{Answered, Interval};
use wattbar_core::meter::Method;
use wattbar_core::{Coverage, Quality, Unavailable};
use wattbar_serve::view::{BatteryDrawn, StatePayload};

/// One reading of one sample, as the engine publishes it.
#[derive(Debug, Clone)]
pub struct Item {
    pub domain: String,
    pub device: Option<String>,
    pub watts: Option<f64>,
    pub source: String,
    pub quality: Quality,
    /// What this part has added since the engine started (a counter).
    pub total_joules: Option<f64>,
}

/// The part of a published state a run keeps.
#[derive(Debug, Clone)]
pub struct State {
    pub at: Option<f64>,
    pub watts: Option<f64>,
    pub quality: Option<Quality>,
    pub source: Option<String>,
    pub domain: Option<String>,
    pub breakdown: Vec<Item>,
    pub unavailable: Vec<Unavailable>,
    pub session_joules: f64,
    /// The session's battery energy and wear so far, where the machine has a battery.
    pub battery: Option<BatteryDrawn>,
    /// The sampling interval the engine was asked for.
    pub interval_ms: u64,
    /// The period it samples at, which a source may make slower.
    pub period_ms: Option<u64>,
}

impl From<&StatePayload> for State {
    fn from(p: &StatePayload) -> Self {
        State {
            at: p.at,
            watts: p.watts,
            quality: p.quality,
            source: p.source.clone(),
            domain: p.domain.map(|d| d.as_str().to_string()),
            breakdown: p
                .breakdown
                .iter()
                .map(|b| Item {
                    domain: b.domain.as_str().to_string(),
                    device: b.device.clone(),
                    watts: b.watts,
                    source: b.source.clone(),
                    quality: b.quality,
                    total_joules: b.total_joules,
                })
                .collect(),
            unavailable: p.unavailable.clone(),
            session_joules: p.session_joules,
            battery: p.battery_drawn.clone(),
            interval_ms: p.interval_ms,
            period_ms: Some(p.period_ms),
        }
    }
}

impl State {
    /// The period samples are actually taken at (a source may hold the engine slower than the
    /// interval asked for).
    pub fn period(&self) -> u64 {
        self.period_ms.unwrap_or(self.interval_ms)
    }
}

/// Names stored once, each referred to by its number.
#[derive(Debug, Default)]
struct Names {
    list: Vec<Box<str>>,
    index: HashMap<Box<str>, u32>,
}

impl Names {
    fn id(&mut self, name: &str) -> u32 {
        if let Some(&id) = self.index.get(name) {
            return id;
        }
        let id = u32::try_from(self.list.len()).unwrap_or(u32::MAX);
        self.list.push(name.into());
        self.index.insert(name.into(), id);
        id
    }

    fn name(&self, id: u32) -> String {
        self.list
            .get(id as usize)
            .map(|s| s.to_string())
            .unwrap_or_default()
    }
}

/// A reading of a breakdown part: its domain, device and source by number.
#[derive(Debug)]
struct Reading {
    domain: u32,
    device: Option<u32>,
    source: u32,
    quality: Quality,
    watts: Option<f64>,
    total_joules: Option<f64>,
}

#[derive(Debug)]
struct CompactState {
    at: Option<f64>,
    watts: Option<f64>,
    quality: Option<Quality>,
    source: Option<u32>,
    domain: Option<u32>,
    breakdown: Box<[Reading]>,
    session_joules: f64,
    battery: Option<CompactBattery>,
    interval_ms: u64,
    period_ms: u64,
}

/// [`BatteryDrawn`] with its currency by number.
#[derive(Debug)]
struct CompactBattery {
    on_battery: bool,
    joules: f64,
    unpriced_joules: f64,
    wear: f64,
    currency: u32,
}

#[derive(Debug)]
struct CompactInterval {
    start: f64,
    end: f64,
    unix_start: f64,
    unix_end: f64,
    joules: Option<f64>,
    by_domain: Box<[(u32, f64)]>,
    quality: Option<Quality>,
    source: Option<u32>,
    method: Option<Method>,
    answered: Option<Answered>,
    /// Index into [`Samples::coverages`]: a run sees one or two.
    coverage: Option<u32>,
}

/// The states and intervals of a run, in the order they came in.
#[derive(Debug, Default)]
pub struct Samples {
    names: Names,
    states: Vec<CompactState>,
    intervals: Vec<CompactInterval>,
    coverages: Vec<Coverage>,
    unavailable: Vec<Unavailable>,
}

impl Samples {
    /// Keeps `s`, unless it repeats the last state's sample (an engine publishes again when
    /// something other than a sample changed).
    pub fn push_state(&mut self, s: State) {
        let repeat = self
            .states
            .last()
            .is_some_and(|last| last.at.is_some() && last.at == s.at);
        if repeat {
            self.unavailable = s.unavailable;
            return;
        }
        let names = &mut self.names;
        let breakdown = s
            .breakdown
            .iter()
            .map(|i| Reading {
                domain: names.id(&i.domain),
                device: i.device.as_deref().map(|d| names.id(d)),
                source: names.id(&i.source),
                quality: i.quality,
                watts: i.watts,
                total_joules: i.total_joules,
            })
            .collect();
        self.states.push(CompactState {
            at: s.at,
            watts: s.watts,
            quality: s.quality,
            source: s.source.as_deref().map(|n| names.id(n)),
            domain: s.domain.as_deref().map(|n| names.id(n)),
            breakdown,
            session_joules: s.session_joules,
            battery: s.battery.as_ref().map(|b| CompactBattery {
                on_battery: b.on_battery,
                joules: b.joules,
                unpriced_joules: b.unpriced_joules,
                wear: b.wear,
                currency: names.id(&b.currency),
            }),
            interval_ms: s.interval_ms,
            period_ms: s.period(),
        });
        self.unavailable = s.unavailable;
    }

    pub fn push_intervals(&mut self, intervals: impl IntoIterator<Item = Interval>) {
        let names = &mut self.names;
        let coverages = &mut self.coverages;
        let mut coverage_id = |c: Option<Coverage>| {
            let c = c?;
            let at = match coverages.iter().position(|known| *known == c) {
                Some(at) => at,
                None => {
                    coverages.push(c);
                    coverages.len() - 1
                }
            };
            u32::try_from(at).ok()
        };
        self.intervals
            .extend(intervals.into_iter().map(|i| CompactInterval {
                start: i.start,
                end: i.end,
                unix_start: i.unix_start,
                unix_end: i.unix_end,
                joules: i.joules,
                by_domain: i.by_domain.iter().map(|(d, j)| (names.id(d), *j)).collect(),
                quality: i.quality,
                source: i.source.as_deref().map(|n| names.id(n)),
                method: i.method,
                answered: i.answered,
                coverage: coverage_id(i.coverage),
            }));
    }

    fn state(&self, c: &CompactState) -> State {
        let name = |id: Option<u32>| id.map(|i| self.names.name(i));
        State {
            at: c.at,
            watts: c.watts,
            quality: c.quality,
            source: name(c.source),
            domain: name(c.domain),
            breakdown: c
                .breakdown
                .iter()
                .map(|r| Item {
                    domain: self.names.name(r.domain),
                    device: name(r.device),
                    watts: r.watts,
                    source: self.names.name(r.source),
                    quality: r.quality,
                    total_joules: r.total_joules,
                })
                .collect(),
            unavailable: Vec::new(),
            session_joules: c.session_joules,
            battery: c.battery.as_ref().map(|b| BatteryDrawn {
                on_battery: b.on_battery,
                joules: b.joules,
                unpriced_joules: b.unpriced_joules,
                wear: b.wear,
                currency: self.names.name(b.currency),
                // A run needs the counters only: the rate in force is not kept per sample.
                per_kwh: None,
                unpriced_because: None,
            }),
            interval_ms: c.interval_ms,
            period_ms: Some(c.period_ms),
        }
    }

    /// The states sampled from `from` to `to`, including the first one at or after `to` (which
    /// ends the last interval of the window).
    pub fn states(&self, from: f64, to: f64) -> impl Iterator<Item = State> + '_ {
        let mut past_end = false;
        self.states
            .iter()
            .filter(move |s| s.at.is_some_and(|at| at >= from))
            .take_while(move |s| {
                let take = !past_end;
                past_end = past_end || s.at.is_some_and(|at| at >= to);
                take
            })
            .map(|s| self.state(s))
    }

    /// The intervals that overlap `from`–`to`, which are all that window's energy is made of,
    /// and those that touch it (within a slow source's answer period): the power's spread
    /// around the window bounds it.
    pub fn intervals(&self, from: f64, to: f64) -> Vec<Interval> {
        self.intervals
            .iter()
            .filter(|i| {
                let reach = i.answered.map_or(0.0, |a| a.period_seconds);
                i.unix_end >= from - reach && i.unix_start <= to + reach
            })
            .map(|i| Interval {
                start: i.start,
                end: i.end,
                unix_start: i.unix_start,
                unix_end: i.unix_end,
                joules: i.joules,
                by_domain: i
                    .by_domain
                    .iter()
                    .map(|(d, j)| (self.names.name(*d), *j))
                    .collect(),
                quality: i.quality,
                source: i.source.map(|s| self.names.name(s)),
                method: i.method,
                answered: i.answered,
                coverage: i
                    .coverage
                    .and_then(|k| self.coverages.get(usize::try_from(k).ok()?).cloned()),
            })
            .collect()
    }

    /// The time and sampling period of the last state.
    pub fn last(&self) -> Option<(Option<f64>, u64)> {
        self.states.last().map(|s| (s.at, s.period_ms))
    }

    /// Why parts could not be read, as the last state said.
    pub fn unavailable(&self) -> &[Unavailable] {
        &self.unavailable
    }

    /// Everything kept so far; what is left behind starts empty.
    pub fn take(&mut self) -> Samples {
        std::mem::take(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(at: f64, cpu: f64) -> State {
        State {
            at: Some(at),
            watts: Some(100.0),
            quality: Some(Quality::Measured),
            source: Some("rapl".into()),
            domain: Some("system".into()),
            breakdown: vec![
                Item {
                    domain: "cpu".into(),
                    device: Some("package-0".into()),
                    watts: Some(cpu),
                    source: "rapl".into(),
                    quality: Quality::Measured,
                    total_joules: Some(cpu * 0.1),
                },
                Item {
                    domain: "gpu".into(),
                    device: None,
                    watts: None,
                    source: "nvml".into(),
                    quality: Quality::Measured,
                    total_joules: None,
                },
            ],
            unavailable: Vec::new(),
            session_joules: at * 100.0,
            battery: None,
            interval_ms: 100,
            period_ms: Some(250),
        }
    }

    #[test]
    fn a_state_comes_back_as_it_went_in() {
        let mut s = Samples::default();
        let original = state(10.0, 40.0);
        s.push_state(original.clone());
        let back: Vec<State> = s.states(0.0, 100.0).collect();
        assert_eq!(back.len(), 1);
        assert_eq!(format!("{:?}", back[0]), format!("{original:?}"));
    }

    #[test]
    fn a_repeated_sample_is_kept_once_and_its_reasons_are_the_latest() {
        let mut s = Samples::default();
        s.push_state(state(1.0, 40.0));
        let mut again = state(1.0, 40.0);
        again.unavailable = vec![Unavailable {
            source: "rapl".into(),
            reason: "no permission".into(),
            permanent: true,
        }];
        s.push_state(again);
        assert_eq!(s.states(0.0, 10.0).count(), 1);
        assert_eq!(s.unavailable().len(), 1);
    }

    #[test]
    fn a_window_takes_its_states_and_the_first_one_at_or_after_its_end() {
        let mut s = Samples::default();
        for k in 0..10 {
            s.push_state(state(f64::from(k), f64::from(k)));
        }
        let at: Vec<f64> = s.states(2.5, 5.0).filter_map(|s| s.at).collect();
        assert_eq!(at, [3.0, 4.0, 5.0]);
        let at: Vec<f64> = s.states(2.5, 5.5).filter_map(|s| s.at).collect();
        assert_eq!(at, [3.0, 4.0, 5.0, 6.0]);
    }

    #[test]
    fn intervals_of_a_window_give_its_energy_per_domain() {
        let mut s = Samples::default();
        // Ten one-second intervals: 100 W headline, 40 W cpu.
        s.push_intervals((0..10).map(|k| {
            let t = f64::from(k);
            Interval {
                start: t,
                end: t + 1.0,
                unix_start: 1e9 + t,
                unix_end: 1e9 + t + 1.0,
                joules: Some(100.0),
                by_domain: vec![("cpu".into(), 40.0)],
                quality: Some(Quality::Measured),
                source: Some("rapl".into()),
                method: Some(Method::Counter),
                answered: None,
                coverage: Some(Coverage::of_domain(wattbar_core::Domain::Cpu, None)),
            }
        }));
        let window = s.intervals(1e9 + 2.5, 1e9 + 5.0);
        // The three it overlaps and the one touching its end.
        assert_eq!(window.len(), 4);
        let e = wattbar_core::inference::window_energy(&window, 1e9 + 2.5, 1e9 + 5.0);
        // 2.5 s at 100 W = 250 J; cpu 2.5 s × 40 W = 100 J.
        assert!((e.joules.unwrap_or_default() - 250.0).abs() < 1e-9);
        assert_eq!(e.by_domain.len(), 1);
        assert_eq!(e.by_domain[0].0, "cpu");
        assert!((e.by_domain[0].1 - 100.0).abs() < 1e-9);
        assert_eq!(e.sources, ["rapl"]);
        assert_eq!(
            e.coverage.map(|c| c.covers),
            Some(vec!["cpu-package".into()])
        );
    }
}
