//! One record per request, and the figures per model built from them.
//!
//! Definitions (each `None` when an input is unknown, never 0):
//! - energy: the request's [`Share`](super::attribution::Share) of the measured energy (gross); net subtracts
//!   the idle baseline times the request's share of time, floored at 0, where the baseline was
//!   taken in the energy's scope (else unknown);
//! - tokens per second: the server's decode rate, else completion tokens over the decode window;
//! - tokens per second per watt = completion tokens ÷ decode joules (tokens/s over the mean watts of
//!   the same window), the whole request's joules when the phases are unknown;
//! - score = min(10, tokens/s per W ÷ ceiling × 10).
//! - bound: how far the energy may be from the truth ([`bound`](super::bound)); the net
//!   energy's bound adds the idle baseline's spread times the request's share of time;
//! - covered: the share of the request's window that measured intervals cover. Below
//!   [`MIN_COVERED`] the record is `partial`: its energy is what was measured (never scaled up),
//!   and it has no J/token, efficiency or score. Only complete (`ok`), fully measured records
//!   feed a model's figures; the others are counted apart.

use super::attribution::Share;
use super::response::{ServerFigures, TokensSource};
use super::route::Route;
use crate::reading::Quality;
use crate::scope::Scope;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Least share of a window that must be measured for its figures to count.
pub const MIN_COVERED: f64 = 0.9;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Ok,
    /// The client went away before the answer ended.
    Cancelled,
    /// The server answered an error, before or after its 200, or ended early.
    Error,
    /// A cloud model: the work ran elsewhere, no local energy is charged.
    Remote,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Cancelled => "cancelled",
            Status::Error => "error",
            Status::Remote => "remote",
        }
    }

    pub fn parse(s: &str) -> Option<Status> {
        [Status::Ok, Status::Cancelled, Status::Error, Status::Remote]
            .into_iter()
            .find(|x| x.as_str() == s)
    }
}

/// What one request cost, as the API returns it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    pub id: u64,
    /// The model that served the request.
    pub model: String,
    /// The model the client asked for, when low-power mode sent the request to another one.
    #[serde(default)]
    pub requested_model: Option<String>,
    pub route: Route,
    pub status: Status,
    /// Wall-clock Unix seconds.
    pub start: f64,
    pub end: f64,
    pub wall_seconds: f64,
    pub ttft_seconds: Option<f64>,
    pub prompt_tokens: Option<u64>,
    pub completion_tokens: Option<u64>,
    /// Where the token counts come from.
    #[serde(default)]
    pub tokens_source: Option<TokensSource>,
    pub prefill_seconds: Option<f64>,
    pub decode_seconds: Option<f64>,
    /// Model load time the server reported; never charged to the request.
    pub load_seconds: Option<f64>,
    pub tokens_per_second: Option<f64>,
    pub energy_joules: Option<f64>,
    pub net_energy_joules: Option<f64>,
    /// The energy is within this many joules of the truth over the measured part.
    #[serde(default)]
    pub energy_bound_joules: Option<f64>,
    #[serde(default)]
    pub net_energy_bound_joules: Option<f64>,
    pub prefill_joules: Option<f64>,
    pub decode_joules: Option<f64>,
    pub joules_per_token: Option<f64>,
    pub tokens_per_second_per_watt: Option<f64>,
    pub score: Option<f64>,
    /// The idle draw subtracted for the net figure.
    pub baseline_watts: Option<f64>,
    /// Share of the window that measured intervals cover, 0–1; `None` for remote work.
    #[serde(default)]
    pub covered: Option<f64>,
    /// Less than [`MIN_COVERED`] of the window was measured.
    #[serde(default)]
    pub partial: bool,
    /// The most requests that shared any moment of its window, itself included: 1 where it had
    /// the machine to itself, more where its energy is a share. `None` where nothing was
    /// measured.
    #[serde(default)]
    pub shared_by: Option<u64>,
    /// The energy of its window that records settled before it already held, and so is not
    /// its own ([`crate::inference::claims`]).
    #[serde(default)]
    pub held_before_joules: Option<f64>,
    pub quality: Option<Quality>,
    pub sources: Vec<String>,
    /// What the energy covers (`wall`, `system`, or `components` and which), as the snapshot
    /// says it; `None` where not known. Records of different scope are never added together.
    #[serde(default)]
    pub scope: Option<Scope>,
    #[serde(default)]
    pub covers: Vec<String>,
    pub error: Option<String>,
    /// What its energy cost at the price in force when it was recorded, in `currency`; `None`
    /// where its energy is not known.
    #[serde(default)]
    pub cost: Option<f64>,
    #[serde(default)]
    pub currency: Option<String>,
    /// Its energy at the grid intensity in force then; `None` where either is not known.
    #[serde(default)]
    pub carbon_g: Option<f64>,
    /// The name of the proxy key the request came with; `None` without one.
    #[serde(default)]
    pub key: Option<String>,
    /// Who sent it: its `X-Wattbar-Client`, else its key's name.
    #[serde(default)]
    pub client: Option<String>,
    /// What its key's budget was charged: its energy where measured, else what was held for it
    /// (unknown is not free). `None` without a key.
    #[serde(default)]
    pub key_joules: Option<f64>,
    /// What its key's money budget was charged, in `currency`, on the same rule; `None` without
    /// a key.
    #[serde(default)]
    pub key_cost: Option<f64>,
}

/// The price and grid intensity in force when records are made: what each costs.
#[derive(Debug, Clone, PartialEq)]
pub struct PriceNow {
    pub price_per_kwh: f64,
    pub currency: String,
    pub carbon_g_per_kwh: Option<f64>,
}

impl Record {
    /// Prices the record's energy at `price`.
    pub fn price(&mut self, price: &PriceNow) {
        let kwh = self
            .energy_joules
            .filter(|j| j.is_finite())
            .map(|j| j / 3.6e6);
        self.cost = kwh
            .zip(Some(price.price_per_kwh).filter(|p| p.is_finite()))
            .map(|(k, p)| k * p);
        self.currency = Some(price.currency.clone());
        self.carbon_g = kwh
            .zip(
                price
                    .carbon_g_per_kwh
                    .filter(|g| g.is_finite() && *g >= 0.0),
            )
            .map(|(k, g)| k * g);
    }
}

/// Everything a record is made of.
#[derive(Debug, Clone)]
pub struct Observed {
    pub route: Route,
    pub model: String,
    /// The model asked for, when the request was routed to `model` instead.
    pub requested_model: Option<String>,
    pub status: Status,
    pub error: Option<String>,
    pub start: f64,
    pub end: f64,
    /// First token as the proxy saw it pass, seconds after the start (streams only).
    pub ttft_seconds: Option<f64>,
    pub figures: ServerFigures,
    /// The request's energy; `None` for remote work or when it could not be measured.
    pub share: Option<Share>,
    /// Whether the share's prefill/decode parts were cut at a known first token.
    pub phases_known: bool,
    pub baseline_watts: Option<f64>,
    /// How far the idle draw strays from the baseline, in watts.
    pub baseline_spread_watts: Option<f64>,
    /// Tokens per second per watt that scores 10.
    pub ceiling: f64,
}

/// Score 0–10 for `tokens_per_second_per_watt` against `ceiling`.
pub fn score(tokens_per_second_per_watt: f64, ceiling: f64) -> Option<f64> {
    (tokens_per_second_per_watt.is_finite()
        && tokens_per_second_per_watt >= 0.0
        && ceiling.is_finite()
        && ceiling > 0.0)
        .then(|| (tokens_per_second_per_watt / ceiling * 10.0).min(10.0))
}

impl Record {
    pub fn build(id: u64, o: Observed) -> Record {
        let f = &o.figures;
        let wall = (o.end - o.start).max(0.0);
        let decode_window = o.ttft_seconds.map(|t| (wall - t).max(0.0));
        let decode_seconds = f.decode_seconds.or(decode_window.filter(|s| *s > 0.0));
        let prefill_seconds = f.prefill_seconds.or(o.ttft_seconds);
        let tokens_per_second = f
            .decode_rate
            .or(match (f.completion_tokens, decode_seconds) {
                (Some(n), Some(s)) if s > 0.0 => Some(n as f64 / s),
                _ => None,
            });
        let local = o.status != Status::Remote;
        // On the timeline the share was cut on (the wall clock is read apart from it), and
        // rounded so that a whole window reads exactly 1.
        let covered = o
            .share
            .as_ref()
            .filter(|s| local && s.window_seconds > 0.0)
            .map(|s| ((s.covered_seconds / s.window_seconds).clamp(0.0, 1.0) * 1e9).round() / 1e9);
        let partial = covered.is_some_and(|c| c < MIN_COVERED);
        let share = o
            .share
            .as_ref()
            .filter(|s| local && s.covered_seconds > 0.0);
        let energy = share.map(|s| s.joules);
        let net = match (share, o.baseline_watts) {
            (Some(s), Some(b)) => Some((s.joules - b * s.shared_seconds).max(0.0)),
            _ => None,
        };
        let bound = share.map(|s| s.bound_joules);
        let net_bound = match (share, net, o.baseline_spread_watts) {
            (Some(s), Some(_), Some(spread)) => Some(s.bound_joules + spread * s.shared_seconds),
            _ => None,
        };
        let phases = share.filter(|_| o.phases_known);
        let prefill_joules = phases.map(|s| s.prefill_joules);
        let decode_joules = phases.map(|s| s.decode_joules);
        let tokens = f.completion_tokens.map(|n| n as f64);
        let joules_per_token = match (energy, tokens) {
            (Some(e), Some(n)) if n > 0.0 && !partial => Some(e / n),
            _ => None,
        };
        let tokens_per_second_per_watt = match (decode_joules.or(energy), tokens) {
            (Some(e), Some(n)) if e > 0.0 && !partial => Some(n / e),
            _ => None,
        };
        let scored = o.status == Status::Ok;
        Record {
            id,
            model: o.model,
            requested_model: o.requested_model,
            route: o.route,
            status: o.status,
            start: o.start,
            end: o.end,
            wall_seconds: wall,
            ttft_seconds: o.ttft_seconds,
            prompt_tokens: f.prompt_tokens,
            completion_tokens: f.completion_tokens,
            tokens_source: f.completion_tokens.and(f.tokens_source),
            prefill_seconds,
            decode_seconds,
            load_seconds: f.load_seconds,
            tokens_per_second,
            energy_joules: energy,
            net_energy_joules: net,
            energy_bound_joules: bound,
            net_energy_bound_joules: net_bound,
            prefill_joules,
            decode_joules,
            joules_per_token,
            tokens_per_second_per_watt,
            score: tokens_per_second_per_watt
                .filter(|_| scored)
                .and_then(|t| score(t, o.ceiling)),
            baseline_watts: o.baseline_watts.filter(|_| share.is_some()),
            covered,
            partial,
            shared_by: share.map(|s| u64::try_from(s.shared_by).unwrap_or(u64::MAX)),
            held_before_joules: share.map(|s| s.held_before_joules),
            quality: share.and_then(|s| s.quality),
            sources: share.map(|s| s.sources.clone()).unwrap_or_default(),
            scope: share.and_then(|s| s.coverage.as_ref()).map(|c| c.scope),
            covers: share
                .and_then(|s| s.coverage.as_ref())
                .map(|c| c.covers.clone())
                .unwrap_or_default(),
            error: o.error,
            cost: None,
            currency: None,
            carbon_g: None,
            key: None,
            client: None,
            key_joules: None,
            key_cost: None,
        }
    }
}

/// The requests low-power mode sent to another model than the one asked for.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Routed {
    pub requests: u64,
    /// The energy of those whose energy was measured; `None` until one was.
    pub energy_joules: Option<f64>,
    /// Routed requests whose energy is unknown (remote, or not measured).
    pub unmeasured: u64,
}

impl Routed {
    /// Counts `r` when it was routed.
    pub fn add(&mut self, r: &Record) {
        if r.requested_model.is_none() {
            return;
        }
        self.requests += 1;
        match r.energy_joules {
            Some(j) => *self.energy_joules.get_or_insert(0.0) += j,
            None => self.unmeasured += 1,
        }
    }
}

/// Figures per model over its records.
#[derive(Debug, Clone, Default, PartialEq, Serialize, serde::Deserialize)]
pub struct ModelStats {
    pub model: String,
    /// The scope of its energy (`None` where not known): a model measured at the wall and on
    /// the CPU package has figures for each, never one sum of both.
    pub scope: Option<Scope>,
    pub requests: u64,
    pub requests_by_status: BTreeMap<String, u64>,
    /// Records less than [`MIN_COVERED`] measured: in `requests`, left out of every ratio.
    pub partial_requests: u64,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    /// Local energy charged to the model.
    pub energy_joules: f64,
    /// Over the records with both energy and completion tokens.
    pub joules_per_token: Option<f64>,
    pub net_joules_per_token: Option<f64>,
    /// Mean of the records' tokens per second.
    pub tokens_per_second: Option<f64>,
    /// Completion tokens over their decode joules, all records together.
    pub tokens_per_second_per_watt: Option<f64>,
    pub score: Option<f64>,
    /// The last record's end, Unix seconds.
    pub last: f64,
    #[serde(skip)]
    pub sums: RatioSums,
}

/// What a model's ratios are made of: sums over its complete, fully measured records, so that
/// the figures can be kept (and carried on) without the records.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct RatioSums {
    /// Energy and completion tokens of the records with both.
    pub jpt_joules: f64,
    pub jpt_tokens: f64,
    pub net_joules: f64,
    pub net_tokens: f64,
    /// Sum and count of the records' tokens per second.
    pub tps: f64,
    pub tps_n: f64,
    /// Completion tokens and their decode joules (the whole request's without phases).
    pub eff_tokens: f64,
    pub eff_joules: f64,
}

/// The largest count kept: the ledger's integers are signed 64-bit.
pub const MAX_COUNT: u64 = i64::MAX as u64;

impl ModelStats {
    pub fn new(model: &str, scope: Option<Scope>) -> Self {
        ModelStats {
            model: model.to_string(),
            scope,
            ..ModelStats::default()
        }
    }

    /// The figures `r` adds to: its model's in its scope.
    pub fn key(r: &Record) -> (String, Option<Scope>) {
        (r.model.clone(), r.scope)
    }

    pub fn add(&mut self, r: &Record, ceiling: f64) {
        // Counters saturate at what the ledger holds: a server's absurd count must not wrap a
        // total back below itself, nor make memory and the ledger disagree.
        let add = |total: u64, n: u64| total.saturating_add(n).min(MAX_COUNT);
        self.requests = add(self.requests, 1);
        let by_status = self
            .requests_by_status
            .entry(r.status.as_str().to_string())
            .or_insert(0);
        *by_status = add(*by_status, 1);
        self.prompt_tokens = add(self.prompt_tokens, r.prompt_tokens.unwrap_or(0));
        self.completion_tokens = add(self.completion_tokens, r.completion_tokens.unwrap_or(0));
        self.energy_joules += r.energy_joules.unwrap_or(0.0);
        self.last = self.last.max(r.end);
        if r.partial {
            self.partial_requests += 1;
        }
        if r.status != Status::Ok || r.partial {
            return;
        }
        let s = &mut self.sums;
        let tokens = r.completion_tokens.map(|n| n as f64);
        if let (Some(e), Some(n)) = (r.energy_joules, tokens) {
            s.jpt_joules += e;
            s.jpt_tokens += n;
        }
        if let (Some(e), Some(n)) = (r.net_energy_joules, tokens) {
            s.net_joules += e;
            s.net_tokens += n;
        }
        if let Some(t) = r.tokens_per_second {
            s.tps += t;
            s.tps_n += 1.0;
        }
        if let (Some(e), Some(n)) = (r.decode_joules.or(r.energy_joules), tokens) {
            if e > 0.0 {
                s.eff_tokens += n;
                s.eff_joules += e;
            }
        }
        self.refresh(ceiling);
    }

    /// Works the ratios and the score out of the sums.
    pub fn refresh(&mut self, ceiling: f64) {
        let s = &self.sums;
        let ratio = |a: f64, b: f64| (b > 0.0).then(|| a / b);
        self.joules_per_token = ratio(s.jpt_joules, s.jpt_tokens);
        self.net_joules_per_token = ratio(s.net_joules, s.net_tokens);
        self.tokens_per_second = ratio(s.tps, s.tps_n);
        self.tokens_per_second_per_watt = ratio(s.eff_tokens, s.eff_joules);
        self.score = self
            .tokens_per_second_per_watt
            .and_then(|t| score(t, ceiling));
    }
}

#[cfg(test)]
mod tests;
