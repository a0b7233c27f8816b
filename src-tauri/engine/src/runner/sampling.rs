//! Taking a sample: read the chain, let each stage observe it in turn, settle the requests that
//! ended. Each stage owns its state ([`super::meter`], [`super::programs`],
//! [`super::residency`], the inference book, low-power mode, the recorder); this file only
//! orders them.

use super::{period, Engine, INFERENCE_INTERVAL};
use crate::recorder::Write;
use crate::server_metrics::ProxySeen;
use std::time::Duration;
use wattbar_core::policy::Measured;
use wattbar_core::Stamp;

impl Engine {
    /// One sample, as a pipeline: the meter accounts it; programs, residency and the inference
    /// book observe its interval; low-power mode its draw; the recorder keeps its row; then the
    /// processes are read when due, the requests that ended are settled, and the batch is
    /// written when due.
    pub(super) fn sample(&mut self) {
        // Every request's start wakes a sample: ids stay reserved ahead of those given.
        self.recorder.reserve_record_ids(self.inference.ids.next());
        let at = self.stamp();
        let snapshot = self.chain.sample(at);
        let s = self.meter.take(at, snapshot);
        if let Some(learned) = self.meter.calibration.take_fresh() {
            self.recorder.write(Write::Calibration(learned));
        }
        if let Some(interval) = &s.interval {
            self.programs.observe(&s);
            let open = self.inference.requests.open();
            self.follow_residency(interval, open.iter().any(|o| !o.remote), s.week_seconds);
            self.inference.book.push_interval(interval.clone(), &open);
            self.servers
                .follow_upstream(self.inference.requests.upstream_port());
            // Once a window (10 s), not every sample: the spans and intervals are gathered only
            // when a window is due.
            if self.servers.due(at) {
                let proxy = ProxySeen {
                    upstream_port: self.inference.requests.upstream_port(),
                    spans: open
                        .iter()
                        .filter(|o| !o.remote)
                        .map(|o| {
                            let end = o.end.map_or(f64::INFINITY, |e| e.unix_seconds);
                            (o.start.unix_seconds, end)
                        })
                        .chain(
                            self.inference
                                .book
                                .view()
                                .recent
                                .iter()
                                .map(|r| (r.start, r.end)),
                        )
                        .collect(),
                };
                let intervals = self.inference.book.intervals();
                let baseline = self.inference.book.view().baseline.clone();
                let made = self.servers.observe(
                    at,
                    intervals.iter(),
                    baseline.as_ref(),
                    &proxy,
                    self.programs.meter.process_gpu(),
                );
                if !made.is_empty() {
                    self.recorder.write(Write::ServerWindows(made));
                }
            }
        }
        let (watts, battery) = (s.snapshot.headline_watts(), s.snapshot.battery);
        if let Some(t) = self.low_power.observe(at, watts, battery) {
            self.low_power_changed(&t);
        }
        if let Some(change) = s.step.headline.scope_change {
            self.recorder.write(Write::ScopeChange(change));
        }
        self.recorder
            .write(Write::Row(s.row(self.prefs.currency.as_str())));
        let requests = &self.inference.requests;
        let read = self.programs.read_if_due(
            &s,
            &mut self.chain,
            requests.upstream_port(),
            requests.loaded(at.monotonic),
            &self.inference.book.view().recent,
        );
        if let Some(joules) = read {
            self.servers
                .follow_listening(&self.programs.meter.model_servers());
            self.recorder.write(Write::Programs {
                unix: at.unix_seconds,
                joules,
            });
        }
        let headline = s.interval.as_ref().and_then(|i| i.method);
        self.meter.keep(s);
        self.settle_inference(at);
        let busy = self.busy();
        self.rest.observe(at.monotonic, headline, busy);
        self.write_if_due(at);
    }

    /// Writes the batch when its interval has passed, or at once when something in it cannot
    /// wait ([`crate::recorder::Recorder::due`]).
    pub(super) fn write_if_due(&mut self, at: Stamp) {
        if self.recorder.due(at.monotonic) {
            let session = self.meter.accounting.totals(&self.prefs.currency);
            self.recorder
                .flush(at.monotonic, &session, at.unix_seconds, &self.prefs);
        }
    }

    /// Turns the requests that ended by `at` into records, and stores them.
    fn settle_inference(&mut self, at: Stamp) {
        let finished = self.inference.requests.take_finished(at.monotonic);
        if !finished.is_empty() {
            let receipts = finished.iter().any(|f| f.urgent);
            let records = self
                .inference
                .book
                .settle(finished, &self.inference.requests.open());
            self.recorder.write(Write::Records {
                records,
                at_once: receipts,
            });
            self.measured_changed();
        }
        if let Some(b) = self.inference.book.take_baseline_change() {
            self.recorder.write(Write::Baseline(b));
        }
    }

    pub(super) fn measured_changed(&mut self) {
        let v = self.inference.book.view();
        self.low_power.set_measured(Measured {
            score: v.score,
            tokens_per_second_per_watt: v.tokens_per_second_per_watt,
            most_efficient_model: v.most_efficient_model.clone(),
        });
    }

    /// The configured pace while idle; the pace at rest while nobody looks
    /// ([`crate::stages::rest`]); the fast one while a request is in flight or waits for the
    /// sample that settles it.
    pub(super) fn period(&self) -> Duration {
        if self.busy() {
            self.fast_period()
        } else if self.rest.resting() {
            period(&self.prefs, &self.chain).max(self.prefs.rest_interval())
        } else {
            period(&self.prefs, &self.chain)
        }
    }

    /// A proxy request is in flight, or waits for the sample that settles it.
    fn busy(&self) -> bool {
        self.inference.requests.inflight() > 0 || self.inference.requests.unsettled()
    }

    /// [`INFERENCE_INTERVAL`], or the configured pace if faster, never faster than the sources.
    pub(super) fn fast_period(&self) -> Duration {
        let fast = period(&self.prefs, &self.chain).min(INFERENCE_INTERVAL);
        match self.chain.min_interval() {
            Some(min) if min > fast => min,
            _ => fast,
        }
    }
}
