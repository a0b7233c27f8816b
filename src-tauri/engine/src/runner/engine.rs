//! The engine's state and what it does: [`Engine::sample`] runs the stages
//! of a sample in order ([`crate::stages`]), [`Engine::apply`] applies what readers ask, and
//! [`Engine::published`] ([`super::view`]) gathers what readers see.
//!
//! Rules:
//! - Each stage owns its state; the engine only orders them and carries what one stage gives to
//!   the next or to the recorder, the ledger's one writer.
//! - What a command changes is published before it is answered ([`Engine::after_publish`]).

use super::config::{period, INFERENCE_INTERVAL};
use super::publication::{Publication, Work};
use crate::advice::AdviceFile;
use crate::command::{Command, External};
use crate::error::Error;
use crate::home::lock::EngineLock;
use crate::inference::RequestEvent;
use crate::recorder::{Recorder, Write};
use crate::server_metrics::ServerMetrics;
use crate::stages::inference::Inference;
use crate::stages::low_power::LowPower;
use crate::stages::meter::Meter;
use crate::stages::prices::{Prices, KEPT_BACK_SECONDS};
use crate::stages::programs::Programs;
use crate::stages::residency::{unload_message, Resident};
use crate::stages::rest::Rest;
use crate::time::clock::Clock;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use wattbar_core::inference::resident::Unload;
use wattbar_core::inference::Record;
use wattbar_core::{Chain, Preferences, Stamp, Transition};
use wattbar_ledger::store::profiles::StoredProfile;

/// The engine's state: the chain and the clock it samples with, the preferences it owns, and one
/// field per stage of a sample, each owning its own state.
pub(super) struct Engine {
    pub chain: Chain,
    pub clock: Arc<dyn Clock>,
    pub prefs: Arc<Preferences>,
    pub meter: Meter,
    pub programs: Programs,
    pub resident: Resident,
    pub inference: Inference,
    pub servers: ServerMetrics,
    pub prices: Prices,
    pub low_power: LowPower,
    pub wear: crate::stages::wear::Wear,
    pub rest: Rest,
    pub recorder: Recorder,
    /// The proxy's keys: the engine charges them as it makes records.
    pub keys: crate::keys::Keys,
    pub advice_file: AdviceFile,
    /// Where a preference set one field at a time is saved.
    pub preferences_file: Option<PathBuf>,
    /// Held until the last batch is written; released before shutdown answers.
    pub lock: Option<EngineLock>,
    pub publication: Publication,
}

impl Engine {
    fn stamp(&self) -> Stamp {
        Stamp::new(self.clock.elapsed(), self.clock.unix())
    }

    /// Does `work`, then keeps the advice file current and queues the answers it made due.
    pub fn run(&mut self, work: Work) {
        match work {
            Work::Sample => self.sample(),
            Work::Events(events) => self.events(events),
            Work::Apply(command) => self.apply(command),
        }
        self.write_advice();
        for reply in self.inference.requests.take_answerable() {
            self.after_publish(move || {
                let _ = reply.send(());
            });
        }
    }

    fn after_publish(&mut self, answer: impl FnOnce() + Send + 'static) {
        self.publication.answers.push(Box::new(answer));
    }

    /// One sample: the stages in the order of [`crate::stages`]' table (the numbers below).
    fn sample(&mut self) {
        // Every request's start wakes a sample: ids stay reserved ahead of those given.
        self.recorder.reserve_record_ids(self.inference.ids_ahead());
        let at = self.stamp();
        // 1-3: prices, the sample accounted, the price in force.
        let fed = self.prices.observe(at.unix_seconds);
        for answer in fed.keep {
            self.recorder.write(Write::FeedSlots(answer));
        }
        if let Some(pricing) = fed.pricing {
            self.meter.accounting.set_pricing(pricing);
        }
        let snapshot = self.chain.sample(at);
        let s = self.meter.observe(at, snapshot);
        let (price, _) = self
            .meter
            .accounting
            .price_per_kwh(at.unix_seconds, s.week_seconds);
        if let Some(learned) = self.meter.calibration.take_fresh() {
            self.recorder.write(Write::Calibration(learned));
        }
        // 4-7: the interval observed.
        if let Some(interval) = &s.interval {
            self.programs.observe(&s);
            let local_busy = self.inference.observe(interval);
            let loaded = self.inference.requests.loaded(self.clock.elapsed());
            if let Some(c) = self.resident.observe(interval, loaded, local_busy, price) {
                self.recorder.write(Write::Residency {
                    sets: c.sets,
                    days: c.days,
                });
            }
            self.servers
                .follow_upstream(self.inference.requests.upstream_port());
            // Once a window (10 s), not every sample: the spans and intervals are gathered only
            // when a window is due.
            if self.servers.due(at) {
                let intervals = self.inference.book.intervals();
                let made = self.servers.observe(
                    at,
                    intervals.iter(),
                    self.inference.view().baseline.as_ref(),
                    &self.inference.proxy_seen(),
                    self.programs.meter.process_gpu(),
                );
                if !made.is_empty() {
                    self.recorder.write(Write::ServerWindows(made));
                }
            }
        }
        // 8-9: the draw against the policy; the scope change, then the row.
        let (watts, battery) = (s.snapshot.headline_watts(), s.snapshot.battery);
        if let Some(t) = self.low_power.observe(at, watts, battery, Some(price)) {
            self.low_power_changed(&t);
        }
        let joules = s.step.headline.joules.0;
        if let Some(worn) = self.wear.observe(joules, &s.snapshot, &self.prefs) {
            self.recorder.write(Write::Wear {
                unix: at.unix_seconds,
                worn,
            });
        }
        if let Some(change) = s.step.headline.scope_change {
            self.recorder.write(Write::ScopeChange(change));
        }
        if let Some(health) = &s.snapshot.battery_health {
            self.recorder.write(Write::Batteries {
                unix: at.unix_seconds,
                health: std::sync::Arc::clone(health),
            });
        }
        self.recorder
            .write(Write::Row(s.row(self.prefs.currency.as_str())));
        // 10-14: processes when due; the sample kept; requests settled; the pace; the batch.
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
        self.settle_inference(at, price);
        self.rest
            .observe(at.monotonic, headline, self.inference.busy());
        self.write_if_due(at);
    }

    /// What the proxy reported: unloads are recorded and said; a request that started or ended
    /// makes a sample, at most one per fast period however many requests start and end (a flood
    /// of short requests must not become a flood of samples). A request whose client waits for
    /// its receipt is settled at once: that client pays the sample.
    fn events(&mut self, events: Vec<RequestEvent>) {
        let mut started_or_ended = false;
        for event in events {
            match event {
                RequestEvent::Unloaded(u) => self.unloaded(&u),
                RequestEvent::KeyRefused(key) => self.recorder.write(Write::KeyRefused(key)),
                RequestEvent::Abandoned { record_id } => {
                    self.keys.abandon(record_id);
                    started_or_ended |= self
                        .inference
                        .requests
                        .apply(RequestEvent::Abandoned { record_id });
                }
                event => started_or_ended |= self.inference.requests.apply(event),
            }
        }
        if !started_or_ended {
            return;
        }
        let since = self
            .meter
            .last
            .map(|l| self.clock.elapsed().saturating_sub(l.monotonic));
        let fast = self.fast_period();
        if since.is_none_or(|s| s >= fast) || self.inference.requests.urgent() {
            self.sample();
        }
    }

    /// Writes the batch when its interval has passed, or at once when something in it cannot
    /// wait ([`Recorder::due`]).
    fn write_if_due(&mut self, at: Stamp) {
        if self.recorder.due(at.monotonic) {
            let session = self.meter.accounting.totals(&self.prefs.currency);
            self.recorder
                .flush(at.monotonic, &session, at.unix_seconds, &self.prefs);
            self.recorder
                .observe_keys(&self.keys.list(at.unix_seconds), at.unix_seconds);
        }
    }

    /// Turns the requests that ended by `at` into records, priced at `price_per_kwh` and the
    /// grid intensity in force, and stores them.
    fn settle_inference(&mut self, at: Stamp, price_per_kwh: f64) {
        if self.inference.requests.unsettled() {
            self.inference
                .book
                .set_price(wattbar_core::inference::PriceNow {
                    price_per_kwh,
                    currency: self.prefs.currency.as_str().to_string(),
                    carbon_g_per_kwh: self.meter.accounting.pricing().carbon_at(at.unix_seconds),
                });
        }
        if let Some(settled) = self.inference.settle(at) {
            self.recorder.write(Write::Records {
                records: settled.records,
                at_once: settled.at_once,
            });
            self.measured_changed();
        }
        if let Some(b) = self.inference.take_baseline_change() {
            self.recorder.write(Write::Baseline(b));
        }
    }

    /// The records, the profiles or the preferences changed: low-power mode's advice weighs
    /// them anew.
    pub fn measured_changed(&mut self) {
        let measured = self.inference.measured(&self.prefs.low_power);
        self.low_power.set_measured(measured);
    }

    /// The configured pace while idle; the pace at rest while nobody looks
    /// ([`crate::stages::rest`]); the fast one while a request is in flight or waits for the
    /// sample that settles it.
    pub fn period(&self) -> Duration {
        if self.inference.busy() {
            self.fast_period()
        } else if self.rest.resting() {
            period(&self.prefs, &self.chain).max(self.prefs.rest_interval())
        } else {
            period(&self.prefs, &self.chain)
        }
    }

    /// [`INFERENCE_INTERVAL`], or the configured pace if faster, never faster than the sources.
    fn fast_period(&self) -> Duration {
        let fast = period(&self.prefs, &self.chain).min(INFERENCE_INTERVAL);
        match self.chain.min_interval() {
            Some(min) if min > fast => min,
            _ => fast,
        }
    }

    /// Applies what a reader asked; its answer, if any, waits for the state it caused.
    fn apply(&mut self, command: Command) {
        match command {
            Command::SetPreferences(p, reply) => {
                let verdict = self.set_preferences(*p);
                if let Some(reply) = reply {
                    self.after_publish(move || {
                        let _ = reply.send(verdict);
                    });
                }
            }
            Command::SetPreference { key, value, reply } => {
                let verdict = self.set_preference(&key, &value);
                self.after_publish(move || {
                    let _ = reply.send(verdict);
                });
            }
            Command::SetLowPower(on) => {
                let at = self.stamp();
                if let Some(t) = self.low_power.set_manual(on, at) {
                    self.low_power_changed(&t);
                    self.write_if_due(self.meter.last.unwrap_or(at));
                }
            }
            Command::SetInterval(d) => {
                let mut next = Preferences::clone(&self.prefs);
                next.interval_ms = u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
                if let Err(e) = self.set_preferences(next) {
                    tracing::warn!("{e}");
                }
            }
            Command::RecordInference(e, reply) => {
                let _ = reply.send(self.record_external(*e));
            }
            Command::RecordProfile(p, reply) => {
                let verdict = self.record_profile(*p);
                self.after_publish(move || {
                    let _ = reply.send(verdict);
                });
            }
            // Answered by `run` once nothing of it is pending, after the state is published.
            Command::AwaitSettled(id, reply) => self.inference.requests.await_settled(id, reply),
            Command::Wake => {
                let now = self.clock.elapsed();
                self.rest.woken(now);
            }
            Command::ResetSession => {
                let currency = self.prefs.currency.clone();
                self.reset_session(&currency);
            }
            Command::Shutdown(done) => {
                let session = self.meter.accounting.totals(&self.prefs.currency);
                let written = self.recorder.end(&session, self.clock.unix());
                self.lock = None;
                let _ = done.send(written);
            }
        }
    }

    /// Ends the session and starts another, priced in `currency`. A sample first closes the
    /// interval in progress, so that its energy is the old session's (and lifetime's, today's,
    /// the month's) and the new one starts from this moment.
    fn reset_session(&mut self, currency: &wattbar_core::Currency) {
        self.sample();
        let now = self.clock.unix();
        let ended = self.meter.accounting.totals(&self.prefs.currency);
        self.recorder.new_session(&ended, now, currency.as_str());
        self.meter.accounting.reset(now);
        self.wear.reset();
    }

    /// One field, from the engine's own preferences; saved before it is applied, so what is in
    /// force is what the next start reads.
    fn set_preference(
        &mut self,
        key: &str,
        value: &serde_json::Value,
    ) -> Result<Preferences, Error> {
        if !Preferences::is_key(key) {
            return Err(Error::Refused(format!("unknown preference {key:?}")));
        }
        let mut next = Preferences::clone(&self.prefs);
        next.set_field(key, value).map_err(Error::Invalid)?;
        next.validate().map_err(Error::Invalid)?;
        next.tariff_schedule().map_err(Error::Invalid)?;
        if let Some(path) = &self.preferences_file {
            crate::home::prefs_file::save_field(path, &next, key)?;
        }
        self.set_preferences(next)?;
        Ok(Preferences::clone(&self.prefs))
    }

    /// Checks `next` whole, then hands each stage what changed for it.
    fn set_preferences(&mut self, next: Preferences) -> Result<(), Error> {
        let checked = next
            .validate()
            .and_then(|()| next.tariff_schedule())
            .map_err(|e| Error::Refused(e.to_string()));
        if let Err(e) = checked {
            tracing::warn!("preferences refused: {e}");
            return Err(e);
        }
        if next.currency != self.prefs.currency {
            // A session's cost is in one currency: a new currency starts a new session.
            self.reset_session(&next.currency);
        }
        self.low_power.set_config(next.low_power.clone());
        self.inference.book.set_ceiling(next.score_ceiling);
        if next.wall_meter != self.prefs.wall_meter {
            let source = next
                .wall_meter
                .as_ref()
                .map(|m| crate::setup::wall_meter_source(&crate::setup::wall_meter_of(m)));
            self.chain
                .set_source(wattbar_sources::plugs::SOURCE_ID, source);
            self.publication.sources = self.chain.ids();
        }
        if next.find_model_servers != self.prefs.find_model_servers {
            self.programs.find_model_servers(next.find_model_servers);
            self.servers
                .follow_listening(&self.programs.meter.model_servers());
        }
        if next.server_metrics != self.prefs.server_metrics {
            self.servers
                .configure(&crate::server_metrics::ServerMetricsConfig::from_prefs(
                    &next.server_metrics,
                ));
        }
        self.publication.prefs.send_replace(next.clone());
        self.prefs = Arc::new(next);
        let (recorder, since) = (&self.recorder, self.clock.unix() - KEPT_BACK_SECONDS);
        self.prices.follow(&self.prefs, &mut |feed, quantity| {
            recorder.restored_feed(feed, quantity, since)
        });
        self.meter.accounting.set_pricing(self.prices.pricing());
        self.measured_changed();
        let period = self.period();
        self.meter.accounting.set_interval(period);
        Ok(())
    }

    /// Records a change of low-power mode in the store at once and announces it.
    fn low_power_changed(&mut self, t: &Transition) {
        self.low_power
            .changed(t, &self.prefs.low_power, self.prefs.low_power.os_power_mode);
        self.recorder.write(Write::LowPower {
            state: t.state.clone(),
            message: t.message.clone(),
        });
    }

    /// Records an unload the proxy reported and says it once.
    fn unloaded(&mut self, u: &Unload) {
        self.recorder.write(Write::Unload(u.clone()));
        self.low_power.announce(unload_message(u));
    }

    /// A record for work a client measured itself, over a window that has ended. Its client
    /// reads it back from the ledger: it is written before the answer.
    fn record_external(&mut self, e: External) -> Result<Record, Error> {
        Inference::check_external(&e, self.clock.unix())
            .map_err(|r| Error::Refused(r.to_string()))?;
        if self.meter.last.is_none_or(|l| l.unix_seconds < e.end) {
            self.sample();
        }
        let last = self.meter.last.unwrap_or_else(|| self.stamp());
        let record = self
            .inference
            .external(e, last)
            .map_err(|r| Error::Refused(r.to_string()))?;
        self.recorder.write(Write::Records {
            records: vec![record.clone()],
            at_once: true,
        });
        self.write_if_due(last);
        self.measured_changed();
        Ok(record)
    }

    /// Keeps a graded profile: checked, written at once, weighed by the advice.
    fn record_profile(&mut self, p: StoredProfile) -> Result<(), Error> {
        self.inference
            .keep_profile(p.profile.clone())
            .map_err(Error::Refused)?;
        self.recorder.write(Write::Profile(p));
        let at = self.meter.last.unwrap_or_else(|| self.stamp());
        self.write_if_due(at);
        self.measured_changed();
        Ok(())
    }

    /// Keeps the advice file current, where there is one.
    pub fn write_advice(&mut self) {
        let routed = &self.inference.view().routed;
        self.advice_file
            .keep(&self.low_power, &self.prefs.low_power, routed);
    }
}
