//! Applying what readers ask: prices, preferences, low-power mode, session resets, records a
//! client measured itself, and the shutdown that writes the last batch.

use super::Engine;
use crate::command::{Command, External};
use crate::error::Error;
use crate::recorder::Write;
use std::sync::Arc;
use wattbar_core::inference::Record;
use wattbar_core::{Preferences, Transition};

impl Engine {
    pub(super) fn apply(&mut self, command: Command) {
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
        if let Some(path) = &self.files.preferences {
            crate::home::prefs_file::save_field(path, &next, key)?;
        }
        self.set_preferences(next)?;
        Ok(Preferences::clone(&self.prefs))
    }

    fn set_preferences(&mut self, next: Preferences) -> Result<(), Error> {
        let checked = next
            .validate()
            .and_then(|()| next.tariff_schedule())
            .map_err(|e| Error::Refused(e.to_string()));
        match checked {
            Ok(tariffs) => {
                if next.currency != self.prefs.currency {
                    // A session's cost is in one currency: a new currency starts a new session.
                    self.reset_session(&next.currency);
                }
                self.meter
                    .accounting
                    .set_prices(tariffs, next.carbon_g_per_kwh);
                self.meter.accounting.set_interval(next.interval());
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
                    self.servers.configure(
                        &crate::server_metrics::ServerMetricsConfig::from_prefs(
                            &next.server_metrics,
                        ),
                    );
                }
                self.publication.prefs.send_replace(next.clone());
                self.prefs = Arc::new(next);
                self.measured_changed();
                let period = self.period();
                self.meter.accounting.set_interval(period);
                Ok(())
            }
            Err(e) => {
                tracing::warn!("preferences refused: {e}");
                Err(e)
            }
        }
    }

    /// Records a change of low-power mode in the store at once and announces it.
    pub(super) fn low_power_changed(&mut self, t: &Transition) {
        self.low_power
            .changed(t, &self.prefs.low_power, self.prefs.low_power.os_power_mode);
        self.recorder.write(Write::LowPower {
            state: t.state.clone(),
            message: t.message.clone(),
        });
    }

    /// A record for work a client measured itself, over a window that has ended.
    fn record_external(&mut self, e: External) -> Result<Record, Error> {
        let now = self.clock.unix();
        if !(e.start.is_finite() && e.end.is_finite() && e.start < e.end) {
            return Err(Error::Refused("start must come before end".into()));
        }
        if e.end > now + 1.0 {
            return Err(Error::Refused(format!(
                "end is {:.1} s in the future",
                e.end - now
            )));
        }
        if self.meter.last.is_none_or(|l| l.unix_seconds < e.end) {
            self.sample();
        }
        let last = self.meter.last.unwrap_or_else(|| self.stamp());
        let record = self
            .inference
            .book
            .external(
                e,
                self.inference.ids.take(),
                last,
                &self.inference.requests.open(),
            )
            .ok_or_else(|| Error::Refused("the record could not be made".into()))?;
        // Its client reads it back from the ledger: written before the answer.
        self.recorder.write(Write::Records {
            records: vec![record.clone()],
            at_once: true,
        });
        self.write_if_due(last);
        self.measured_changed();
        Ok(record)
    }

    /// Writes the low-power view to the advice file when it changed: a whole new file renamed
    /// over the old one, so a reader never sees half of it.
    pub(super) fn write_advice(&mut self) {
        let Some(path) = self.files.advice.as_ref() else {
            return;
        };
        let view = crate::advice::LowPowerView::from_parts(
            self.low_power.state(),
            self.low_power.advice(),
            self.prefs.low_power.action,
            &self.inference.book.view().routed,
            self.low_power.event(),
        );
        if self.files.advice_written.as_ref() == Some(&view) {
            return;
        }
        let Ok(json) = serde_json::to_string(&view) else {
            return;
        };
        let tmp = path.with_extension("json.tmp");
        let written = path
            .parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .and_then(|()| std::fs::write(&tmp, format!("{json}\n")))
            .and_then(|()| std::fs::rename(&tmp, path));
        match written {
            Ok(()) => self.files.advice_written = Some(view),
            Err(e) => {
                tracing::warn!("{}: {e}", path.display());
                self.files.advice = None;
            }
        }
    }
}
