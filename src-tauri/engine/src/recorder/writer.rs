//! The ledger's writer: every stage hands what it wants kept over as one [`Write`], which waits
//! in the ledger's batch until the batch is due (its interval, or at once when something in it
//! cannot wait); what the ledger held at start is read back through it.
//!
//! A failed write is logged, kept for the next batch and shown to the user; it never stops
//! sampling. Without a store nothing is kept.

use crate::inference::book::{StoredBook, SCORED_RECORDS, SHOWN_RECORDS};
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;
use wattbar_core::calibration::Learned;
use wattbar_core::eval::best::KeptProfile;
use wattbar_core::inference::resident::{ResidentDay, SetBaseline, StoredResidency, Unload};
use wattbar_core::inference::server_window::ServerWindow;
use wattbar_core::inference::{Baseline, Record, Routed};
use wattbar_core::session::ScopeChange;
use wattbar_core::{LowPowerState, Preferences, Scope, SessionTotals};
use wattbar_ledger::ledger::Ledger;
use wattbar_ledger::store::profiles::StoredProfile;
use wattbar_ledger::store::{Row, StoreError};

/// How many record ids are reserved at once; more are reserved when half are given.
pub const RESERVED_IDS: u64 = 1000;

/// Something a stage wants kept, handed to the writer.
pub enum Write {
    /// A sample's row.
    Row(Row),
    /// The headline's scope changed, as the session found.
    ScopeChange(ScopeChange),
    /// Settled inference records; `at_once`: a client waits for them (a receipt, a posted
    /// record), so the batch is written at the next chance rather than at its interval.
    Records { records: Vec<Record>, at_once: bool },
    /// A request refused for this key's budget.
    KeyRefused(String),
    /// A new calibration fit (the newest wins).
    Calibration(Learned),
    /// Energy drawn from the battery at a sample, and its wear.
    Wear {
        unix: f64,
        worn: wattbar_ledger::store::wear::Worn,
    },
    /// The batteries' health at a sample (the ledger keeps each local day's last).
    Batteries {
        unix: f64,
        health: std::sync::Arc<[wattbar_core::battery::Health]>,
    },
    /// A new idle baseline.
    Baseline(Baseline),
    /// Changed residency rows.
    Residency {
        sets: Vec<SetBaseline>,
        days: Vec<ResidentDay>,
    },
    /// Energy per program, in the UTC hour of `unix`.
    Programs {
        unix: f64,
        joules: BTreeMap<String, f64>,
    },
    /// A model low-power mode unloaded.
    Unload(Unload),
    /// Windows of model servers followed by their own counters.
    ServerWindows(Vec<ServerWindow>),
    /// A graded profile of a model, written at the next chance: its client is answered once it
    /// is kept.
    Profile(StoredProfile),
    /// A price or carbon feed's answer, to price from after a restart.
    FeedSlots(wattbar_ledger::store::feeds::FeedSlots),
    /// A change of low-power mode, written at the next chance: a choice the user made is not
    /// lost to a crash in the seconds after it.
    LowPower {
        state: LowPowerState,
        message: String,
    },
}

pub(super) struct Writer {
    ledger: Option<Ledger>,
    batch_interval: Duration,
    last_flush: Option<Duration>,
    /// Something in the batch cannot wait for the next interval: write at the next chance.
    urgent: bool,
    /// Record ids below this are reserved in the ledger: a restart numbers from here, so an id
    /// given to a request in flight when the engine died is never given again.
    reserved_ids: Option<u64>,
    /// What opening the ledger found that the user must know.
    notice: Option<String>,
    /// Why the ledger refused the last write, until a batch is written again.
    failure: Option<String>,
}

impl Writer {
    /// Opens the ledger at `path` (none: nothing kept) and starts a session.
    pub(super) fn open(
        path: Option<&Path>,
        batch_interval: Duration,
        now_unix: f64,
        currency: &str,
    ) -> Writer {
        let (ledger, notice) = match path {
            Some(path) => match Ledger::open(path, now_unix, currency) {
                Ok((ledger, notice)) => (Some(ledger), notice),
                Err(e) => {
                    tracing::error!("energy store: {e}");
                    (
                        None,
                        Some(format!("Energy history is not being saved: {e}")),
                    )
                }
            },
            None => (None, None),
        };
        Writer {
            ledger,
            batch_interval,
            last_flush: None,
            urgent: false,
            reserved_ids: None,
            notice,
            failure: None,
        }
    }

    pub(super) fn ledger(&self) -> Option<&Ledger> {
        self.ledger.as_ref()
    }

    pub(super) fn ledger_mut(&mut self) -> Option<&mut Ledger> {
        self.ledger.as_mut()
    }

    /// Keeps `write` for the batch.
    pub(super) fn take(&mut self, write: Write) {
        let Some(ledger) = self.ledger.as_mut() else {
            return;
        };
        match write {
            Write::Row(row) => ledger.record(row),
            Write::ScopeChange(change) => ledger.record_scope_change(change),
            Write::Records { records, at_once } => {
                ledger.record_inference(&records);
                self.urgent |= at_once;
            }
            Write::Calibration(learned) => ledger.record_calibration(learned),
            Write::Batteries { unix, health } => ledger.observe_batteries(unix, &health),
            Write::Wear { unix, worn } => ledger.record_wear(unix, &worn),
            Write::Baseline(baseline) => ledger.record_baseline(baseline),
            Write::Residency { sets, days } => ledger.record_residency(sets, days),
            Write::Programs { unix, joules } => {
                ledger.record_programs(wattbar_ledger::store::programs::hour_of(unix), &joules);
            }
            Write::Unload(unload) => ledger.record_unload(unload),
            Write::KeyRefused(key) => ledger.record_key_refused(key),
            Write::ServerWindows(windows) => ledger.record_server_windows(windows),
            Write::FeedSlots(slots) => ledger.record_feed_slots(slots),
            Write::LowPower { state, message } => {
                ledger.record_low_power(state, message);
                self.urgent = true;
            }
            Write::Profile(profile) => {
                ledger.record_profile(profile);
                self.urgent = true;
            }
        }
    }

    /// Keeps the ids from `next` on reserved ([`RESERVED_IDS`] ahead) before they are given;
    /// writes only when half the reserved ids are used.
    pub(super) fn reserve_ids(&mut self, next: u64) {
        if self
            .reserved_ids
            .is_some_and(|r| next.saturating_add(RESERVED_IDS / 2) <= r)
        {
            return;
        }
        let Some(ledger) = self.ledger.as_mut() else {
            return;
        };
        let through = next.saturating_add(RESERVED_IDS - 1);
        // Half the reserve is still ahead of the ids given: written at the next chance, it is
        // durable long before they run out. A failed write keeps it for the next batch.
        ledger.reserve_ids(through);
        self.reserved_ids = Some(through.saturating_add(1));
        self.urgent = true;
    }

    /// True when a batch is due at `elapsed` (the engine's clock), or something in it cannot
    /// wait.
    pub(super) fn due(&mut self, elapsed: Duration) -> bool {
        if self.urgent {
            return true;
        }
        match self.last_flush {
            None => {
                self.last_flush = Some(elapsed);
                false
            }
            Some(last) => elapsed.saturating_sub(last) >= self.batch_interval,
        }
    }

    /// Writes the batch with the session's running totals; the ledger when it was committed.
    pub(super) fn flush(
        &mut self,
        elapsed: Duration,
        session: &SessionTotals,
        now_unix: f64,
        prefs: &Preferences,
    ) -> Option<&mut Ledger> {
        self.last_flush = Some(elapsed);
        // Written or failed, the next try waits for the interval: a ledger that refuses writes
        // is not asked again at every fast sample.
        self.urgent = false;
        let ledger = self.ledger.as_mut()?;
        ledger.keep_inference_days(prefs.inference_keep_days);
        match ledger.flush(session.joules.0, session.cost, now_unix) {
            Ok(()) => {
                if self.failure.take().is_some() {
                    tracing::info!("energy store: written again");
                }
                self.ledger.as_mut()
            }
            Err(e) => {
                self.failed(e);
                None
            }
        }
    }

    /// Ends the running session with its totals and starts another.
    pub(super) fn new_session(&mut self, ended: &SessionTotals, now_unix: f64, currency: &str) {
        let Some(ledger) = self.ledger.as_mut() else {
            return;
        };
        if let Err(e) = ledger.new_session(ended.joules.0, ended.cost, now_unix, currency) {
            self.failed(e);
        }
    }

    /// Writes the last batch and ends the session; an error when the ledger refused it.
    pub(super) fn end(&mut self, session: &SessionTotals, now_unix: f64) -> Result<(), StoreError> {
        let Some(ledger) = self.ledger.as_mut() else {
            return Ok(());
        };
        ledger
            .end(session.joules.0, session.cost, now_unix)
            .inspect_err(|e| tracing::error!("could not write the last batch: {e}"))
    }

    /// What the user must know: a write the ledger refuses now, else what opening it found.
    pub(super) fn notice(&self) -> Option<&String> {
        self.failure.as_ref().or(self.notice.as_ref())
    }

    fn failed(&mut self, e: StoreError) {
        tracing::error!("energy store: {e}");
        self.failure = Some(format!("Energy history is not being saved: {e}"));
    }

    /// The low-power state the store recorded last; off without one.
    pub(super) fn restored_scope(&self) -> Option<Scope> {
        match self.ledger.as_ref().map(|l| l.store().last_scope()) {
            Some(Ok(scope)) => scope,
            Some(Err(e)) => {
                tracing::warn!("could not read the last scope: {e}");
                None
            }
            None => None,
        }
    }

    pub(super) fn restored_low_power(&self) -> LowPowerState {
        match self.ledger.as_ref().map(|l| l.store().low_power()) {
            Some(Ok(state)) => state,
            Some(Err(e)) => {
                tracing::warn!("could not read the last low-power state: {e}");
                LowPowerState::off()
            }
            None => LowPowerState::off(),
        }
    }

    /// What the inference book starts from: the stored figures per model, the newest records
    /// it shows, the next id and the last idle baseline.
    pub(super) fn restored_inference(&self, ceiling: f64) -> StoredBook {
        let Some(store) = self.ledger.as_ref().map(|l| l.store()) else {
            return StoredBook::default();
        };
        let warn = |what: &str, e: &StoreError| {
            tracing::warn!("the stored inference {what} could not be read: {e}");
        };
        StoredBook {
            records: store
                .latest_inference(SHOWN_RECORDS, SCORED_RECORDS)
                .unwrap_or_else(|e| {
                    warn("records", &e);
                    Vec::new()
                }),
            models: store.inference_models(ceiling).unwrap_or_else(|e| {
                warn("figures per model", &e);
                Vec::new()
            }),
            next_id: store.next_inference_id().unwrap_or_else(|e| {
                warn("ids", &e);
                1
            }),
            baseline: store.baseline().ok().flatten(),
            routed: store.routed_inference().unwrap_or_else(|e| {
                warn("routed requests", &e);
                Routed::default()
            }),
        }
    }

    /// The fit the ledger kept last; `None` without one.
    pub(super) fn restored_calibration(&self) -> Option<Learned> {
        let ledger = self.ledger.as_ref()?;
        ledger.store().calibration().unwrap_or_else(|e| {
            tracing::warn!("the stored calibration could not be read: {e}");
            None
        })
    }

    /// The graded profiles kept, oldest first.
    /// Feed `feed`'s kept slots that end after `since`; `None` without any.
    pub(super) fn restored_feed(
        &self,
        feed: &str,
        quantity: wattbar_core::slots::Quantity,
        since: f64,
    ) -> Option<wattbar_core::slots::Series> {
        let ledger = self.ledger.as_ref()?;
        ledger
            .store()
            .feed_slots(feed, quantity, since)
            .unwrap_or_else(|e| {
                tracing::warn!("the kept slots of {feed} could not be read: {e}");
                None
            })
    }

    pub(super) fn restored_profiles(&self) -> Vec<KeptProfile> {
        let Some(ledger) = self.ledger.as_ref() else {
            return Vec::new();
        };
        match ledger.store().profiles() {
            Ok(kept) => kept.into_iter().map(|p| p.profile).collect(),
            Err(e) => {
                tracing::warn!("the stored profiles could not be read: {e}");
                Vec::new()
            }
        }
    }

    /// What residency starts from: the stored set baselines and today's rows.
    pub(super) fn restored_residency(&self, now_unix: f64) -> StoredResidency {
        let Some(ledger) = self.ledger.as_ref() else {
            return StoredResidency::default();
        };
        ledger.store().resident_kept(now_unix).unwrap_or_else(|e| {
            tracing::warn!("the stored resident-model figures could not be read: {e}");
            StoredResidency::default()
        })
    }

    /// Today's joules per program, as the ledger kept them.
    pub(super) fn restored_program_day(&self, now_unix: f64) -> BTreeMap<String, f64> {
        let Some(ledger) = self.ledger.as_ref() else {
            return BTreeMap::new();
        };
        ledger.store().program_day(now_unix).unwrap_or_else(|e| {
            tracing::warn!("today's energy per program could not be read: {e}");
            BTreeMap::new()
        })
    }
}
