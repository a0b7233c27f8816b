//! What keeping a model loaded costs while it answers nothing.
//!
//! Rules:
//! - Each sampling interval comes with the models the server held at its end (`None` where the
//!   server could not say); the set at its start is the one the interval before ended with. An
//!   interval tells a set's idle draw only when the set was the same at both ends, known, and no
//!   request was in flight.
//! - A set's idle baseline is [`idle_baseline`] (the machinery net energy uses) over that set's
//!   idle intervals of the last `span` seconds, taken again every `every` seconds. It is kept,
//!   and stored, until measured again: the set with no model loaded may have been seen hours ago.
//! - A set's extra draw is its baseline minus the baseline with no model loaded, shared among its
//!   models by their size in GPU memory (else their size, else equal parts). A model's idle watts
//!   is the extra draw of the set holding it alone, else its share in the set last measured
//!   with it. Until both baselines are known it is unknown, never 0. A difference below 0 (the
//!   model costs nothing measurable) counts as 0 W.
//! - A model is resident and idle over an interval when the server held it at both ends and no
//!   request was in flight. Those seconds are priced at the interval's extra draw (its set's,
//!   else the models' own idle watts). Seconds before any draw is known wait, and are priced
//!   once at the first one known: so the day's energy is the draw times all its resident idle
//!   seconds, and the lifetime counter only grows.
//! - Uncertainty: a 95 % interval on the difference of two medians, each median's standard error
//!   taken as 1.2533 σ/√n with σ = its 5–95 % spread / 1.645, the intervals taken as independent.
//!
//! Time: the engine's elapsed seconds (the intervals' `start` and `end`); the caller names the
//! local day and the price.

use super::attribution::{idle_baseline, Baseline, Interval};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// One model a server holds in memory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Loaded {
    pub name: String,
    /// The part in GPU memory, bytes.
    pub size_vram_bytes: u64,
    /// The whole model in memory, bytes, when the server says.
    pub size_bytes: Option<u64>,
}

/// The key of a set of loaded models: the names, sorted, joined by `" + "`; `""` for none.
pub fn set_key(models: &[Loaded]) -> String {
    let names: BTreeSet<&str> = models.iter().map(|m| m.name.as_str()).collect();
    names.into_iter().collect::<Vec<_>>().join(" + ")
}

/// The idle baseline measured while one set of models was loaded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SetBaseline {
    /// [`set_key`] of the set.
    pub key: String,
    pub models: Vec<String>,
    /// Each model's part of the set's extra draw, in the order of `models`; they sum to 1.
    pub shares: Vec<f64>,
    pub baseline: Baseline,
}

/// One model's resident idle time on one local day.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ResidentDay {
    pub day: String,
    pub model: String,
    /// Seconds held with no request in flight.
    pub idle_seconds: f64,
    /// Energy and cost of the priced seconds.
    pub joules: f64,
    pub cost: f64,
    /// Seconds not yet priced: no idle draw was known for them yet.
    pub unpriced_seconds: f64,
}

/// A model's idle draw and how it was found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IdleDraw {
    pub watts: f64,
    /// Half-width of a 95 % interval; `None` where a baseline kept no spread.
    pub uncertainty_watts: Option<f64>,
    pub method: String,
}

/// What one model costs by staying loaded, as readers see it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResidentCost {
    pub model: String,
    /// Held by the server at the last sample.
    pub loaded: bool,
    pub size_vram_bytes: Option<u64>,
    /// `None` until the draw with it loaded and with nothing loaded were both measured.
    pub idle_watts: Option<f64>,
    pub uncertainty_watts: Option<f64>,
    /// How `idle_watts` was measured, or why it is not known.
    pub method: String,
    /// Today: seconds resident with no request in flight, and their energy and cost (`None`
    /// while some of those seconds cannot be priced).
    pub idle_seconds_today: f64,
    pub idle_joules_today: Option<f64>,
    pub idle_cost_today: Option<f64>,
    /// Keeping it loaded all day at the current price.
    pub kwh_per_day: Option<f64>,
    pub cost_per_day: Option<f64>,
    /// Resident idle energy ever priced.
    pub idle_joules_total: f64,
}

/// One unload low-power mode asked for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Unload {
    pub t: f64,
    pub server: String,
    pub unloaded: Vec<String>,
    /// Left loaded: a request was using them.
    pub kept: Vec<String>,
    /// Why nothing (or not everything) was unloaded.
    pub error: Option<String>,
}

/// What the store kept.
#[derive(Debug, Clone, Default)]
pub struct StoredResidency {
    pub baselines: Vec<SetBaseline>,
    /// Today's rows.
    pub today: Vec<ResidentDay>,
    /// Resident idle joules per model, every day.
    pub lifetime: BTreeMap<String, f64>,
}

/// One sampling interval as residency sees it.
#[derive(Debug, Clone, Copy)]
pub struct ResidencyInterval<'a> {
    pub interval: &'a Interval,
    /// The models held at the interval's end; `None` where not known.
    pub loaded: Option<&'a [Loaded]>,
    /// A request was in flight during the interval.
    pub busy: bool,
    /// The local day the interval ends in.
    pub day: &'a str,
    pub price_per_kwh: f64,
}

#[derive(Debug, Clone)]
struct Tagged {
    key: String,
    interval: Interval,
}

/// Learns each set's idle draw and counts each model's resident idle time.
#[derive(Debug)]
pub struct Residency {
    span: f64,
    every: f64,
    recent: VecDeque<Tagged>,
    /// The models and shares of each set seen lately, by key.
    sets: BTreeMap<String, (Vec<String>, Vec<f64>)>,
    baselines: BTreeMap<String, SetBaseline>,
    taken: Option<f64>,
    last: Option<Vec<Loaded>>,
    day: Option<String>,
    today: BTreeMap<String, ResidentDay>,
    lifetime: BTreeMap<String, f64>,
    changed_baselines: BTreeSet<String>,
    changed_days: BTreeSet<String>,
}

/// Joules in a kWh.
const JOULES_PER_KWH: f64 = 3.6e6;
const SECONDS_PER_DAY: f64 = 86_400.0;

impl Residency {
    /// `span`: seconds of idle intervals a baseline is taken over; `every`: how often.
    pub fn new(span: f64, every: f64, kept: StoredResidency) -> Self {
        let day = kept.today.first().map(|d| d.day.clone());
        Residency {
            span,
            every,
            recent: VecDeque::new(),
            sets: BTreeMap::new(),
            baselines: kept
                .baselines
                .into_iter()
                .map(|b| (b.key.clone(), b))
                .collect(),
            taken: None,
            last: None,
            day,
            today: kept
                .today
                .into_iter()
                .map(|d| (d.model.clone(), d))
                .collect(),
            lifetime: kept.lifetime,
            changed_baselines: BTreeSet::new(),
            changed_days: BTreeSet::new(),
        }
    }

    pub fn push(&mut self, step: ResidencyInterval<'_>) {
        if self.day.as_deref() != Some(step.day) {
            self.day = Some(step.day.to_string());
            self.today.clear();
        }
        let before = std::mem::replace(&mut self.last, step.loaded.map(<[Loaded]>::to_vec));
        let i = step.interval;
        let seconds = i.end - i.start;
        let (Some(before), Some(after)) = (before, step.loaded) else {
            return;
        };
        if seconds <= 0.0 {
            return;
        }
        let key = set_key(after);
        let steady = set_key(&before) == key;
        if steady && !step.busy && i.watts().is_some() {
            self.sets.insert(key.clone(), models_and_shares(after));
            self.recent.push_back(Tagged {
                key: key.clone(),
                interval: Interval {
                    by_domain: Vec::new(),
                    ..i.clone()
                },
            });
        }
        while self
            .recent
            .front()
            .is_some_and(|t| t.interval.end < i.end - self.span)
        {
            self.recent.pop_front();
        }
        if self.taken.is_none_or(|t| i.end - t >= self.every) {
            self.taken = Some(i.end);
            self.take_baselines();
        }
        if step.busy {
            return;
        }
        let held: Vec<&Loaded> = after
            .iter()
            .filter(|m| before.iter().any(|b| b.name == m.name))
            .collect();
        let set_draw = steady
            .then(|| self.extra_watts(&key))
            .flatten()
            .map(|w| w.max(0.0));
        let (names, shares) = models_and_shares(after);
        for m in held {
            let watts = match set_draw {
                Some(w) => names
                    .iter()
                    .position(|n| *n == m.name)
                    .map(|k| w * shares[k]),
                None => self.idle_draw(&m.name).map(|d| d.watts),
            };
            let day = self
                .today
                .entry(m.name.clone())
                .or_insert_with(|| ResidentDay {
                    day: step.day.to_string(),
                    model: m.name.clone(),
                    ..ResidentDay::default()
                });
            day.idle_seconds += seconds;
            match watts {
                Some(w) => {
                    let joules = w * seconds;
                    day.joules += joules;
                    day.cost += joules / JOULES_PER_KWH * step.price_per_kwh;
                    *self.lifetime.entry(m.name.clone()).or_default() += joules;
                }
                None => day.unpriced_seconds += seconds,
            }
            self.changed_days.insert(m.name.clone());
        }
        self.price_waiting(step.price_per_kwh);
    }

    /// Prices the seconds that waited, for each model whose draw is now known.
    fn price_waiting(&mut self, price_per_kwh: f64) {
        let waiting: Vec<String> = self
            .today
            .values()
            .filter(|d| d.unpriced_seconds > 0.0)
            .map(|d| d.model.clone())
            .collect();
        for model in waiting {
            let Some(draw) = self.idle_draw(&model) else {
                continue;
            };
            if let Some(d) = self.today.get_mut(&model) {
                let joules = draw.watts.max(0.0) * d.unpriced_seconds;
                d.joules += joules;
                d.cost += joules / JOULES_PER_KWH * price_per_kwh;
                d.unpriced_seconds = 0.0;
                *self.lifetime.entry(model.clone()).or_default() += joules;
                self.changed_days.insert(model);
            }
        }
    }

    fn take_baselines(&mut self) {
        let keys: BTreeSet<String> = self.recent.iter().map(|t| t.key.clone()).collect();
        for key in keys {
            let intervals: Vec<Interval> = self
                .recent
                .iter()
                .filter(|t| t.key == key)
                .map(|t| t.interval.clone())
                .collect();
            let Some(baseline) = idle_baseline(&intervals, &[]) else {
                continue;
            };
            let Some((models, shares)) = self.sets.get(&key).cloned() else {
                continue;
            };
            let next = SetBaseline {
                key: key.clone(),
                models,
                shares,
                baseline,
            };
            if self.baselines.get(&key) != Some(&next) {
                self.baselines.insert(key.clone(), next);
                self.changed_baselines.insert(key);
            }
        }
    }

    /// The set's baseline minus the one with nothing loaded; `None` where the two were taken in
    /// different scopes.
    fn extra_watts(&self, key: &str) -> Option<f64> {
        let none = self.baselines.get("")?;
        let set = self.baselines.get(key)?;
        Some(set.baseline.watts_for(none.baseline.coverage.as_ref())? - none.baseline.watts)
    }

    /// `model`'s idle draw: alone, else its share in the set measured last with it.
    pub fn idle_draw(&self, model: &str) -> Option<IdleDraw> {
        let none = self.baselines.get("")?;
        let alone = self.baselines.get(model).filter(|s| s.models.len() == 1);
        let set = alone.or_else(|| {
            self.baselines
                .values()
                .filter(|s| !s.key.is_empty() && s.models.iter().any(|m| m == model))
                .max_by(|a, b| a.baseline.to.total_cmp(&b.baseline.to))
        })?;
        let share = set
            .models
            .iter()
            .position(|m| m == model)
            .and_then(|k| set.shares.get(k).copied())?;
        let set_watts = set.baseline.watts_for(none.baseline.coverage.as_ref())?;
        let watts = ((set_watts - none.baseline.watts) * share).max(0.0);
        let uncertainty_watts = match (
            standard_error(&set.baseline),
            standard_error(&none.baseline),
        ) {
            (Some(a), Some(b)) => Some(1.96 * a.hypot(b) * share),
            _ => None,
        };
        let shared = if set.models.len() > 1 {
            format!(
                ", {:.0} % of what {} draw together (by size in GPU memory)",
                share * 100.0,
                set.key
            )
        } else {
            String::new()
        };
        Some(IdleDraw {
            watts,
            uncertainty_watts,
            method: format!(
                "idle draw with {} loaded ({:.2} W, {} intervals) minus with no model loaded \
                 ({:.2} W, {} intervals){shared}",
                set.key,
                set.baseline.watts,
                set.baseline.samples,
                none.baseline.watts,
                none.baseline.samples
            ),
        })
    }

    /// Baselines and today's rows changed since the last call, for the store.
    pub fn take_changes(&mut self) -> (Vec<SetBaseline>, Vec<ResidentDay>) {
        let baselines = std::mem::take(&mut self.changed_baselines)
            .into_iter()
            .filter_map(|k| self.baselines.get(&k).cloned())
            .collect();
        let days = std::mem::take(&mut self.changed_days)
            .into_iter()
            .filter_map(|m| self.today.get(&m).cloned())
            .collect();
        (baselines, days)
    }

    pub fn lifetime(&self) -> &BTreeMap<String, f64> {
        &self.lifetime
    }

    /// Every model loaded now, seen resident today or with a known draw, by name.
    pub fn costs(&self, price_per_kwh: f64) -> Vec<ResidentCost> {
        let loaded = self.last.as_deref().unwrap_or_default();
        let mut names: BTreeSet<&str> = loaded.iter().map(|m| m.name.as_str()).collect();
        names.extend(self.today.keys().map(String::as_str));
        names.extend(self.lifetime.keys().map(String::as_str));
        for set in self.baselines.values() {
            names.extend(set.models.iter().map(String::as_str));
        }
        names
            .into_iter()
            .map(|name| {
                let held = loaded.iter().find(|m| m.name == name);
                let draw = self.idle_draw(name);
                let day = self.today.get(name);
                let priced = day.is_none_or(|d| d.unpriced_seconds == 0.0);
                let kwh_per_day = draw
                    .as_ref()
                    .map(|d| d.watts * SECONDS_PER_DAY / JOULES_PER_KWH);
                ResidentCost {
                    model: name.to_string(),
                    loaded: held.is_some(),
                    size_vram_bytes: held.map(|m| m.size_vram_bytes),
                    idle_watts: draw.as_ref().map(|d| d.watts),
                    uncertainty_watts: draw.as_ref().and_then(|d| d.uncertainty_watts),
                    method: draw.map_or_else(|| self.why_unknown(name), |d| d.method),
                    idle_seconds_today: day.map_or(0.0, |d| d.idle_seconds),
                    idle_joules_today: priced.then(|| day.map_or(0.0, |d| d.joules)),
                    idle_cost_today: priced.then(|| day.map_or(0.0, |d| d.cost)),
                    kwh_per_day,
                    cost_per_day: kwh_per_day.map(|k| k * price_per_kwh),
                    idle_joules_total: self.lifetime.get(name).copied().unwrap_or(0.0),
                }
            })
            .collect()
    }

    fn why_unknown(&self, model: &str) -> String {
        let with = self
            .baselines
            .values()
            .any(|s| s.models.iter().any(|m| m == model));
        match (with, self.baselines.contains_key("")) {
            (false, false) => format!(
                "not known yet: the idle draw must be measured both with {model} loaded and \
                 with no model loaded"
            ),
            (false, true) => format!("not known yet: the idle draw with {model} loaded"),
            _ => "not known yet: the idle draw with no model loaded".to_string(),
        }
    }
}

fn models_and_shares(models: &[Loaded]) -> (Vec<String>, Vec<f64>) {
    let mut sorted: Vec<&Loaded> = models.iter().collect();
    sorted.sort_by(|a, b| a.name.cmp(&b.name));
    sorted.dedup_by(|a, b| a.name == b.name);
    let by = |f: fn(&Loaded) -> f64| {
        let w: Vec<f64> = sorted.iter().map(|m| f(m)).collect();
        let sum: f64 = w.iter().sum();
        (sum > 0.0).then(|| w.iter().map(|x| x / sum).collect::<Vec<f64>>())
    };
    let shares = by(|m| m.size_vram_bytes as f64)
        .or_else(|| by(|m| m.size_bytes.unwrap_or(0) as f64))
        .unwrap_or_else(|| vec![1.0 / sorted.len().max(1) as f64; sorted.len()]);
    (sorted.into_iter().map(|m| m.name.clone()).collect(), shares)
}

/// The standard error of a baseline's median, from its spread.
fn standard_error(b: &Baseline) -> Option<f64> {
    let sigma = b.spread_watts? / 1.645;
    Some(1.2533 * sigma / (b.samples.max(1) as f64).sqrt())
}

#[cfg(test)]
mod tests;
