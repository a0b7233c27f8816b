//! The engine's inference book: recent energy intervals, the idle baseline, and the records and
//! per-model figures made from finished requests.
//!
//! Rules:
//! - Intervals are kept for [`WINDOW_KEEP`]; energy windows inside it are exact at the sampling
//!   resolution.
//! - A request is turned into a record only once the engine has sampled past its end, and is
//!   attributed together with every other request whose window touched it, open ones included,
//!   so that overlapping requests share each interval. What records settled before hold of an
//!   interval stays theirs ([`Claims`]): records never hold more than was drawn, whatever order
//!   they arrive in, and a record once returned never changes.
//! - Remote (cloud) requests draw nothing locally: they take no share and dilute nobody's.

use super::events::{External, Finished, Open};
use crate::ring::{Ring, Shared};
use serde::Serialize;
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;
use wattbar_core::inference::{
    attribute_held, idle_baseline, is_remote_model, Baseline, Claims, Interval, ModelStats,
    Observed, Record, Route, Routed, ServerFigures, Status, TokensSource, Window,
};
use wattbar_core::{Scope, Stamp};

/// How long intervals (and request windows) are kept in memory.
pub const WINDOW_KEEP: Duration = Duration::from_secs(15 * 60);
/// The span the idle baseline is taken over, and how often it is taken again.
pub const BASELINE_SPAN: Duration = Duration::from_secs(10 * 60);
pub const BASELINE_EVERY: Duration = Duration::from_secs(30);
/// Records kept in memory for readers.
pub const RECENT_RECORDS: usize = 1000;
/// Records readers are shown live.
pub const SHOWN_RECORDS: usize = 10;
/// Records the mean score (and so the advice) is taken over.
pub const SCORED_RECORDS: usize = 10;

/// What readers see of inference, rebuilt when a record arrives or the baseline changes.
#[derive(Debug, Clone, Default, Serialize, serde::Deserialize)]
pub struct InferenceView {
    pub seq: u64,
    pub last: Option<Record>,
    /// The last [`SHOWN_RECORDS`] records, newest first.
    pub recent: Vec<Record>,
    pub models: Vec<ModelStats>,
    pub baseline: Option<Baseline>,
    /// Mean score of the last [`SCORED_RECORDS`] scored records, and their mean tokens/s per W.
    pub score: Option<f64>,
    pub tokens_per_second_per_watt: Option<f64>,
    /// The model with the most tokens/s per W measured on this machine.
    pub most_efficient_model: Option<String>,
    /// Tokens/s per W that scores 10.
    pub ceiling: f64,
    /// The requests low-power mode routed, over the records kept.
    pub routed: Routed,
}

/// What a book starts from: what the store kept.
#[derive(Debug, Clone, Default)]
pub struct StoredBook {
    /// The newest records, oldest first.
    pub records: Vec<Record>,
    /// The figures per model over every record ever made.
    pub models: Vec<ModelStats>,
    /// Above every id ever given.
    pub next_id: u64,
    pub baseline: Option<Baseline>,
    /// The routed requests among the records kept.
    pub routed: Routed,
}

pub struct Book {
    intervals: Ring<Interval>,
    /// Windows of requests settled within [`WINDOW_KEEP`], for their neighbours' shares.
    closed: VecDeque<Window>,
    /// What the records settled within [`WINDOW_KEEP`] hold.
    claims: Claims,
    /// The last [`RECENT_RECORDS`], oldest first.
    records: Ring<Record>,
    models: BTreeMap<(String, Option<Scope>), ModelStats>,
    routed: Routed,
    baseline: Option<Baseline>,
    baseline_changed: bool,
    baseline_taken: Option<f64>,
    /// The first record id the ledger has not given.
    first_free_id: u64,
    ceiling: f64,
    view: Arc<InferenceView>,
    /// The proxy's keys, charged as each record is made; `None`: none are.
    keys: Option<crate::keys::Keys>,
    /// The price and intensity records are made at; `None`: not priced.
    price: Option<wattbar_core::inference::PriceNow>,
}

fn secs(s: Stamp) -> f64 {
    s.monotonic.as_secs_f64()
}

impl Book {
    pub fn new(restored: StoredBook, ceiling: f64) -> Book {
        let first_free_id = restored
            .records
            .iter()
            .map(|r| r.id + 1)
            .fold(restored.next_id.max(1), u64::max);
        let mut book = Book {
            intervals: Ring::default(),
            closed: VecDeque::new(),
            claims: Claims::default(),
            records: Ring::from_items(restored.records),
            models: restored
                .models
                .into_iter()
                .map(|m| ((m.model.clone(), m.scope), m))
                .collect(),
            baseline: restored.baseline,
            routed: restored.routed,
            baseline_changed: false,
            baseline_taken: None,
            first_free_id,
            ceiling,
            view: Arc::default(),
            keys: None,
            price: None,
        };
        book.rescore();
        book
    }

    /// The intervals of the last [`WINDOW_KEEP`], as readers see them.
    pub fn intervals(&mut self) -> Shared<Interval> {
        self.intervals.shared()
    }

    /// The last [`RECENT_RECORDS`] records, as readers see them.
    pub fn records(&mut self) -> Shared<Record> {
        self.records.shared()
    }

    /// The first record id the ledger had not given when the book was opened: [`super::RecordIds`] gives
    /// ids from there.
    pub fn first_free_id(&self) -> u64 {
        self.first_free_id
    }

    pub fn view(&self) -> Arc<InferenceView> {
        Arc::clone(&self.view)
    }

    /// The baseline, once, after it changed (for the store).
    pub fn take_baseline_change(&mut self) -> Option<Baseline> {
        std::mem::take(&mut self.baseline_changed)
            .then(|| self.baseline.clone())
            .flatten()
    }

    /// Scores the models against `ceiling` (their figures are sums, so nothing is re-read).
    pub fn set_ceiling(&mut self, ceiling: f64) {
        if ceiling != self.ceiling {
            self.ceiling = ceiling;
            self.rescore();
        }
    }

    fn rescore(&mut self) {
        let ceiling = self.ceiling;
        for m in self.models.values_mut() {
            m.refresh(ceiling);
        }
        self.rebuild_view();
    }

    /// Adds the interval that ended at the latest sample; forgets old ones; takes the baseline
    /// again when due. `open` are the requests in flight.
    pub fn push_interval(&mut self, interval: Interval, open: &[Open]) {
        let now = interval.end;
        let oldest = now - WINDOW_KEEP.as_secs_f64();
        let all = &mut self.intervals;
        while all.back().is_some_and(|i| i.end > interval.start) {
            all.pop_back();
        }
        all.push_back(interval);
        while all.front().is_some_and(|i| i.end < oldest) {
            all.pop_front();
        }
        while self
            .closed
            .front()
            .is_some_and(|w| w.end.is_some_and(|e| e < oldest))
        {
            self.closed.pop_front();
        }
        self.claims.forget_before(oldest);
        if self
            .baseline_taken
            .is_none_or(|t| now - t >= BASELINE_EVERY.as_secs_f64())
        {
            self.baseline_taken = Some(now);
            let from = now - BASELINE_SPAN.as_secs_f64();
            let recent: Vec<Interval> = self
                .intervals
                .iter()
                .filter(|i| i.start >= from)
                .cloned()
                .collect();
            let windows = self.windows(open);
            if let Some(b) = idle_baseline(&recent, &windows) {
                if self.baseline.as_ref() != Some(&b) {
                    self.baseline = Some(b);
                    self.baseline_changed = true;
                    self.rebuild_view();
                }
            }
        }
    }

    fn windows(&self, open: &[Open]) -> Vec<Window> {
        self.closed
            .iter()
            .copied()
            .chain(open_windows(open))
            .collect()
    }

    /// Names each record's key and client and charges its key as the record is made, so that
    /// readers and the store see one record.
    pub fn charge_to(&mut self, keys: crate::keys::Keys) {
        self.keys = Some(keys);
    }

    /// The price and grid intensity in force now: the records made next cost their energy at it.
    pub fn set_price(&mut self, price: wattbar_core::inference::PriceNow) {
        self.price = Some(price);
    }

    /// Turns finished requests into records; answers them for the store.
    pub fn settle(&mut self, finished: Vec<Finished>, open: &[Open]) -> Vec<Record> {
        let windows: Vec<Window> = finished.iter().map(window_of).collect();
        self.settle_windows(finished, windows, open)
    }

    /// [`Book::settle`] with each request's window given (a client's may start before the
    /// engine did, where no stamp can).
    fn settle_windows(
        &mut self,
        finished: Vec<Finished>,
        windows: Vec<Window>,
        open: &[Open],
    ) -> Vec<Record> {
        if finished.is_empty() {
            return Vec::new();
        }
        let mine: Vec<(Window, bool)> = finished
            .iter()
            .zip(windows)
            .map(|(f, w)| {
                (
                    w,
                    f.remote || f.model.as_deref().is_some_and(is_remote_model),
                )
            })
            .collect();
        // Only the intervals these windows overlap, one more on each side (the spread of power
        // around a cut interval bounds its error), and the neighbours that share them.
        let lo = mine
            .iter()
            .map(|(w, _)| w.start)
            .fold(f64::INFINITY, f64::min);
        let hi = mine
            .iter()
            .filter_map(|(w, _)| w.end)
            .fold(f64::NEG_INFINITY, f64::max);
        let intervals: Vec<Interval> = {
            let all: Vec<&Interval> = self.intervals.iter().collect();
            let first = all.partition_point(|i| i.end <= lo).saturating_sub(1);
            let last = (all.partition_point(|i| i.start < hi) + 1).min(all.len());
            all[first..last.max(first)]
                .iter()
                .map(|i| (*i).clone())
                .collect()
        };
        let touches = |w: &Window| w.start < hi && w.end.is_none_or(|e| e > lo);
        let settling: Vec<Window> = mine
            .iter()
            .filter(|(_, remote)| !remote)
            .map(|(w, _)| *w)
            .collect();
        let open: Vec<Window> = open_windows(open).filter(touches).collect();
        let settled: Vec<Window> = self.closed.iter().copied().filter(touches).collect();
        let shares = attribute_held(&intervals, &settling, &open, &settled, &mut self.claims);
        self.closed.extend(settling);
        let mut shares = shares.into_iter();
        let mut made = Vec::with_capacity(finished.len());
        for (f, (window, remote)) in finished.into_iter().zip(mine) {
            let share = if remote { None } else { shares.next() };
            // The idle draw nets only energy of its own coverage.
            let baseline = self.baseline.as_ref().filter(|b| {
                share
                    .as_ref()
                    .is_some_and(|s| b.watts_for(s.coverage.as_ref()).is_some())
            });
            let status = if remote { Status::Remote } else { f.status };
            let observed = Observed {
                route: f.route,
                model: f.model.clone().unwrap_or_else(|| "unknown".to_string()),
                requested_model: f.requested_model.clone(),
                status,
                error: f.error.clone(),
                start: f.start.unix_seconds,
                // The window the energy was measured over is the elapsed clock's: the wall
                // clock read beside it may be a moment off (or jump), and the record's seconds
                // must be the ones its energy covers.
                end: f.start.unix_seconds
                    + f.end
                        .monotonic
                        .saturating_sub(f.start.monotonic)
                        .as_secs_f64(),
                ttft_seconds: f
                    .first_token
                    .map(|t| t.monotonic.saturating_sub(f.start.monotonic).as_secs_f64()),
                figures: f.figures,
                share,
                phases_known: window.split.is_some(),
                baseline_watts: baseline.map(|b| b.watts),
                baseline_spread_watts: baseline.and_then(|b| b.spread_watts),
                ceiling: self.ceiling,
            };
            let mut record = Record::build(f.record_id, observed);
            if let Some(price) = &self.price {
                record.price(price);
            }
            if let Some(keys) = &self.keys {
                keys.settle(std::slice::from_mut(&mut record));
            }
            self.remember(record.clone());
            made.push(record);
        }
        self.rebuild_view();
        made
    }

    /// Record `id` for work a client measured itself; `now` is the engine's last sample.
    pub fn external(&mut self, e: External, id: u64, now: Stamp, open: &[Open]) -> Option<Record> {
        let to_elapsed = |unix: f64| secs(now) - (now.unix_seconds - unix);
        let finished = Finished {
            record_id: id,
            route: Route::External,
            model: Some(e.model),
            requested_model: None,
            remote: false,
            status: Status::Ok,
            error: None,
            start: Stamp::new(
                Duration::from_secs_f64(to_elapsed(e.start).max(0.0)),
                e.start,
            ),
            first_token: None,
            end: Stamp::new(Duration::from_secs_f64(to_elapsed(e.end).max(0.0)), e.end),
            figures: ServerFigures {
                prompt_tokens: e.prompt_tokens,
                completion_tokens: Some(e.completion_tokens).filter(|&n| n > 0),
                tokens_source: Some(TokensSource::Client),
                decode_rate: e.tokens_per_second,
                finished: true,
                ..ServerFigures::default()
            },
            urgent: false,
        };
        let window = Window {
            start: to_elapsed(e.start),
            split: None,
            end: Some(to_elapsed(e.end)),
        };
        self.settle_windows(vec![finished], vec![window], open)
            .pop()
    }

    fn remember(&mut self, record: Record) {
        self.add_to_model(&record);
        self.routed.add(&record);
        self.records.push_back(record);
        while self.records.len() > RECENT_RECORDS {
            self.records.pop_front();
        }
    }

    fn add_to_model(&mut self, r: &Record) {
        let ceiling = self.ceiling;
        self.models
            .entry(ModelStats::key(r))
            .or_insert_with(|| ModelStats::new(&r.model, r.scope))
            .add(r, ceiling);
    }

    fn rebuild_view(&mut self) {
        let recent = &self.records;
        let last = recent.back().cloned();
        let shown: Vec<Record> = recent.iter().rev().take(SHOWN_RECORDS).cloned().collect();
        // Figures of one scope only are compared and averaged: that of the latest record that
        // measured any (a cloud request's has none).
        let scope = recent.iter().rev().find_map(|r| r.scope);
        let scored: Vec<&Record> = recent
            .iter()
            .rev()
            .filter(|r| r.score.is_some() && r.scope == scope)
            .take(SCORED_RECORDS)
            .collect();
        let mean = |f: fn(&Record) -> Option<f64>| {
            let v: Vec<f64> = scored.iter().filter_map(|r| f(r)).collect();
            (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
        };
        let score = mean(|r| r.score);
        let tpw = mean(|r| r.tokens_per_second_per_watt);
        let most_efficient_model = self
            .models
            .values()
            .filter(|m| m.scope == scope)
            .filter_map(|m| m.tokens_per_second_per_watt.map(|t| (t, &m.model)))
            .max_by(|a, b| a.0.total_cmp(&b.0))
            .map(|(_, m)| m.clone());
        let mut models: Vec<ModelStats> = self.models.values().cloned().collect();
        models.sort_by(|a, b| b.last.total_cmp(&a.last));
        self.view = Arc::new(InferenceView {
            seq: self.view.seq + 1,
            last,
            recent: shown,
            models,
            baseline: self.baseline.clone(),
            score,
            tokens_per_second_per_watt: tpw,
            most_efficient_model,
            ceiling: self.ceiling,
            routed: self.routed.clone(),
        });
    }
}

/// The windows of the local requests in flight.
fn open_windows(open: &[Open]) -> impl Iterator<Item = Window> + '_ {
    open.iter().filter(|o| !o.remote).map(|o| Window {
        start: secs(o.start),
        split: o.first_token.map(secs),
        end: o.end.map(secs),
    })
}

fn window_of(f: &Finished) -> Window {
    let end = secs(f.end);
    // Without a first token seen (a whole JSON body), the server's decode time marks the split.
    let split = f.first_token.map(secs).or_else(|| {
        f.figures
            .decode_seconds
            .filter(|d| *d < end - secs(f.start))
            .map(|d| end - d)
    });
    Window {
        start: secs(f.start),
        split,
        end: Some(end),
    }
}

#[cfg(test)]
mod tests;
