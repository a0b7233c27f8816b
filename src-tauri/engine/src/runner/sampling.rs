//! Taking a sample: read the chain, account it, hand the interval to the inference book,
//! record the row, remember the point, settle the requests that ended.

use super::{period, Engine, INFERENCE_INTERVAL, WALL_STEP_SECONDS};
use crate::published::{remember, Point};
use crate::store::Row;
use std::time::Duration;
use wattbar_core::inference::Interval;
use wattbar_core::policy::Measured;
use wattbar_core::Stamp;

impl Engine {
    pub(super) fn sample(&mut self) {
        // Every request's start wakes a sample: ids stay reserved ahead of those given.
        self.recorder.reserve_record_ids(self.ids.next());
        let at = self.stamp();
        let prev = self.last_stamp;
        self.notice_wall_step(at);
        let snapshot = self.chain.sample(at);
        let week_seconds = self.local_week.at(at.unix_seconds);
        let step = self.accounting.push(&snapshot, week_seconds);
        let measured_before = self.snapshot.as_ref().is_some_and(|s| s.headline.is_some());
        if let Some(prev) = prev
            .filter(|p| at.monotonic.saturating_sub(p.monotonic) <= self.accounting.gap_threshold())
        {
            let headline = snapshot.headline.as_ref().filter(|_| measured_before);
            let interval = Interval {
                start: prev.monotonic.as_secs_f64(),
                end: at.monotonic.as_secs_f64(),
                unix_start: prev.unix_seconds,
                unix_end: at.unix_seconds,
                joules: headline.map(|_| step.headline.joules.0),
                by_domain: step
                    .by_domain
                    .iter()
                    .map(|(d, j)| (d.as_str().to_string(), j.0))
                    .collect(),
                quality: headline.map(|h| h.quality),
                source: headline.map(|h| h.source.clone()),
                method: headline.map(|_| step.method),
            };
            if let Some(h) = headline {
                let cpu = step
                    .by_domain
                    .iter()
                    .find(|(d, _)| **d == wattbar_core::Domain::Cpu)
                    .map(|(_, j)| j.0);
                // Programs share the CPU domain's energy: theirs is its quality.
                let quality = snapshot
                    .breakdown
                    .iter()
                    .find(|r| r.domain == wattbar_core::Domain::Cpu)
                    .map_or(h.quality, |r| r.quality);
                self.programs.add(
                    step.headline.joules.0,
                    cpu,
                    interval.end - interval.start,
                    Some(quality),
                );
                let gpu_quality = snapshot
                    .breakdown
                    .iter()
                    .filter(|r| r.domain == wattbar_core::Domain::Gpu)
                    .map(|r| r.quality)
                    .max();
                for (part, joules) in &step.by_part {
                    if let (wattbar_core::Domain::Gpu, Some(device)) = (part.domain, &part.device) {
                        self.programs
                            .add_gpu(&part.source, device, joules.0, gpu_quality);
                    }
                }
            }
            let open = self.requests.open();
            self.follow_residency(&interval, open.iter().any(|o| !o.remote), week_seconds);
            self.book.push_interval(interval, &open);
        }
        if step.clamped {
            tracing::warn!(
                watts = snapshot.headline_watts().map(|w| w.0),
                "absurd power clamped to 100 kW: a broken sensor or a bogus unit"
            );
        }
        if let Some(t) = self
            .low_power
            .observe(at, snapshot.headline_watts(), snapshot.battery)
        {
            self.low_power_changed(&t);
        }
        let seconds = prev
            .map(|p| at.monotonic.saturating_sub(p.monotonic))
            .filter(|d| *d <= self.accounting.gap_threshold())
            .map_or(0.0, |d| d.as_secs_f64());
        self.recorder.record(Row {
            t: at.unix_seconds,
            seconds,
            watts: snapshot.headline_watts().map(|w| w.0),
            joules: step.headline.joules.0,
            cost: step.headline.cost,
            by_domain: step
                .by_domain
                .into_iter()
                .map(|(d, j)| (d.as_str().to_string(), j.0))
                .collect(),
            currency: self.prefs.currency.as_str().to_string(),
        });
        if self.recorder.due(at.monotonic) {
            let session = self.accounting.totals(&self.prefs.currency);
            self.recorder
                .flush(at.monotonic, &session, at.unix_seconds, &self.prefs);
        }
        remember(
            &self.recent,
            Point {
                t: at.unix_seconds,
                watts: snapshot.headline_watts().map(|w| w.0),
            },
        );
        for (part, joules) in step.by_part {
            *self.part_totals.entry(part).or_default() += joules.0;
        }
        self.snapshot = Some(snapshot);
        self.programs
            .set_upstream_port(self.requests.upstream_port());
        let chain = &mut self.chain;
        if self
            .programs
            .read_if_due_with(at.monotonic, at.unix_seconds, || chain.process_use())
        {
            let mut view = self.programs.view().clone();
            let loaded: Option<Vec<String>> = self
                .requests
                .loaded(at.monotonic)
                .map(|l| l.iter().map(|m| m.name.clone()).collect());
            // Models answered through the proxy in the last ten minutes.
            let mut answered: Vec<String> = Vec::new();
            for r in &self.book.view().recent {
                if r.end >= at.unix_seconds - 600.0 && !answered.contains(&r.model) {
                    answered.push(r.model.clone());
                }
            }
            crate::programs::name_servers(&mut view, loaded.as_deref(), &answered);
            self.programs_view = std::sync::Arc::new(view);
            let joules = self.programs.take_pending();
            self.recorder.record_programs(at.unix_seconds, &joules);
        }
        self.settle_inference(at);
    }

    /// Turns the requests that ended by `at` into records, and stores them.
    fn settle_inference(&mut self, at: Stamp) {
        let finished = self.requests.take_finished(at.monotonic);
        if !finished.is_empty() {
            let records = self.book.settle(finished, &self.requests.open());
            self.recorder.record_inference(&records);
            self.measured_changed();
        }
        if let Some(b) = self.book.take_baseline_change() {
            self.recorder.record_baseline(&b);
        }
    }

    pub(super) fn measured_changed(&mut self) {
        let v = self.book.view();
        self.low_power.set_measured(Measured {
            score: v.score,
            tokens_per_second_per_watt: v.tokens_per_second_per_watt,
            most_efficient_model: v.most_efficient_model.clone(),
        });
    }

    /// Says when the wall clock was stepped (NTP, the user): labels move, energy does not.
    fn notice_wall_step(&mut self, at: Stamp) {
        if let Some(last) = self.last_stamp {
            let elapsed = at.monotonic.saturating_sub(last.monotonic).as_secs_f64();
            let wall = at.unix_seconds - last.unix_seconds;
            if (wall - elapsed).abs() > WALL_STEP_SECONDS {
                tracing::info!(
                    seconds = wall - elapsed,
                    "the wall clock was stepped; energy is unaffected"
                );
            }
        }
        self.last_stamp = Some(at);
    }

    /// The configured pace while idle; the fast one while a request is in flight or waits for
    /// the sample that settles it.
    pub(super) fn period(&self) -> Duration {
        if self.requests.inflight() == 0 && !self.requests.unsettled() {
            period(&self.prefs, &self.chain)
        } else {
            self.fast_period()
        }
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
