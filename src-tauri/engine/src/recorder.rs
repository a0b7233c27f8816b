//! Recording: rows go to the ledger in batches and budgets are checked at each batch.
//!
//! Two kinds of figures come out, on purpose kept apart:
//! - The lifetime counters others build on ([`Committed`]) are what the store committed, read
//!   back after each batch: a crash can lose the batch in progress, but never take back a figure
//!   already exported. What was measured since is [`Recorder::unwritten_joules`], a gauge.
//! - Today, this month and lifetime as the menu shows them are the stored totals plus what was
//!   measured since the last batch written (by its local day and currency), so session ≤ today ≤
//!   month ≤ lifetime holds at every published state, not only after each batch.
//!
//! A failed write is logged, kept for the next batch and shown to the user; it never stops
//! sampling. Without a store everything stays in memory.

use crate::budget::{self, BudgetAlert};
use crate::inference::book::{Restored, SCORED_RECORDS, SHOWN_RECORDS};
use committed::Committed;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use wattbar_core::calibration::Learned;
use wattbar_core::inference::resident::Unload;
use wattbar_core::inference::resident::{Kept, ResidentDay, SetBaseline};
use wattbar_core::inference::{Baseline, Record, Routed};
use wattbar_core::{LowPowerState, Preferences, Scope, SessionTotals};
use wattbar_ledger::ledger::{Ledger, LedgerTotals};
use wattbar_ledger::store::{Row, StoreError, Total};

pub struct Recorder {
    ledger: Option<Ledger>,
    batch_interval: Duration,
    last_flush: Option<Duration>,
    totals: Option<LedgerTotals>,
    /// The local day and month `totals` were read for.
    totals_for: Option<(String, String)>,
    /// Joules and cost measured since the last batch written, by (local day, month, scope,
    /// currency).
    unwritten: BTreeMap<Unwritten, (f64, f64)>,
    /// The lifetime counters as the store committed them; replaced after each batch written.
    committed: Arc<Committed>,
    /// The per-model totals must be read back after the next batch (records were given, or
    /// none was read yet).
    models_stale: bool,
    /// The time of the newest row given: once written, what the committed figures are of.
    newest_row: Option<f64>,
    /// What the headline covered at the last row.
    scope: Option<Scope>,
    notice: Option<String>,
    /// Why the ledger refused the last write, until a batch is written again.
    failure: Option<String>,
    alerts: Vec<BudgetAlert>,
    alert_seq: u64,
    /// Record ids below this are reserved in the ledger: a restart numbers from here, so an id
    /// given to a request in flight when the engine died is never given again.
    reserved_ids: Option<u64>,
    /// Something in the batch cannot wait for the next interval: write at the next chance.
    urgent: bool,
}

/// Where energy not yet written belongs: (local day, local month, scope, currency).
type Unwritten = (String, String, Option<Scope>, String);

/// How many record ids are reserved at once; more are reserved when half are given.
pub const RESERVED_IDS: u64 = 1000;

impl Recorder {
    /// Opens the ledger at `path` (none: in memory) and starts a session.
    pub fn open(
        path: Option<&Path>,
        batch_interval: Duration,
        now_unix: f64,
        prefs: &Preferences,
    ) -> Recorder {
        let currency = prefs.currency.as_str();
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
        let mut recorder = Recorder {
            totals: ledger
                .as_ref()
                .and_then(|l| l.totals(now_unix, currency).ok()),
            totals_for: Some(wattbar_ledger::store::local_day_month(now_unix)),
            unwritten: BTreeMap::new(),
            ledger,
            batch_interval,
            last_flush: None,
            committed: Arc::default(),
            models_stale: true,
            newest_row: None,
            scope: None,
            notice,
            failure: None,
            alerts: Vec::new(),
            alert_seq: 0,
            reserved_ids: None,
            urgent: false,
        };
        recorder.scope = recorder.ledger.as_ref().and_then(Ledger::scope);
        let lifetime = recorder.totals.as_ref().map(|t| t.lifetime.clone());
        recorder.refresh_committed(lifetime, prefs.score_ceiling);
        recorder
    }

    /// The low-power state the store recorded last; off without one.
    pub fn restored_low_power(&self) -> LowPowerState {
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
    pub fn restored_inference(&self, ceiling: f64) -> Restored {
        let Some(store) = self.ledger.as_ref().map(|l| l.store()) else {
            return Restored::default();
        };
        let warn = |what: &str, e: &StoreError| {
            tracing::warn!("the stored inference {what} could not be read: {e}");
        };
        Restored {
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

    /// Keeps records for the batch; `at_once`: a client waits for them (a receipt, a posted
    /// record), so the batch is written at the next chance rather than at its interval.
    pub fn record_inference(&mut self, records: &[Record], at_once: bool) {
        let Some(ledger) = self.ledger.as_mut() else {
            return;
        };
        ledger.record_inference(records);
        self.models_stale |= !records.is_empty();
        self.urgent |= at_once;
    }

    /// Keeps the ids from `next` on reserved ([`RESERVED_IDS`] ahead) before they are given;
    /// writes only when half the reserved ids are used.
    pub fn reserve_record_ids(&mut self, next: u64) {
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

    /// The fit the ledger kept last; `None` without one.
    pub fn restored_calibration(&self) -> Option<Learned> {
        let ledger = self.ledger.as_ref()?;
        ledger.store().calibration().unwrap_or_else(|e| {
            tracing::warn!("the stored calibration could not be read: {e}");
            None
        })
    }

    /// Keeps a new fit; it is written with the next batch.
    pub fn record_calibration(&mut self, learned: Learned) {
        if let Some(ledger) = self.ledger.as_mut() {
            ledger.record_calibration(learned);
        }
    }

    /// Keeps a new idle baseline; it is written with the next batch.
    pub fn record_baseline(&mut self, baseline: &Baseline) {
        if let Some(ledger) = self.ledger.as_mut() {
            ledger.record_baseline(baseline.clone());
        }
    }

    /// Keeps changed residency rows; they are written with the next batch.
    pub fn record_residency(&mut self, sets: Vec<SetBaseline>, days: Vec<ResidentDay>) {
        if let Some(ledger) = self.ledger.as_mut() {
            ledger.record_residency(sets, days);
        }
    }

    /// What residency starts from: the stored set baselines and today's rows.
    pub fn restored_residency(&self, now_unix: f64) -> Kept {
        let Some(ledger) = self.ledger.as_ref() else {
            return Kept::default();
        };
        ledger.store().resident_kept(now_unix).unwrap_or_else(|e| {
            tracing::warn!("the stored resident-model figures could not be read: {e}");
            Kept::default()
        })
    }

    /// Today's joules per program, as the ledger kept them.
    pub fn restored_program_day(&self, now_unix: f64) -> BTreeMap<String, f64> {
        let Some(ledger) = self.ledger.as_ref() else {
            return BTreeMap::new();
        };
        ledger.store().program_day(now_unix).unwrap_or_else(|e| {
            tracing::warn!("today's energy per program could not be read: {e}");
            BTreeMap::new()
        })
    }

    /// Keeps energy per program for the next batch, in the UTC hour of `unix`.
    pub fn record_programs(&mut self, unix: f64, joules: &BTreeMap<String, f64>) {
        if let Some(ledger) = self.ledger.as_mut() {
            ledger.record_programs(wattbar_ledger::store::programs::hour_of(unix), joules);
        }
    }

    /// Keeps an unload for the batch.
    pub fn record_unload(&mut self, unload: &Unload) {
        if let Some(ledger) = self.ledger.as_mut() {
            ledger.record_unload(unload.clone());
        }
    }

    pub fn record(&mut self, row: Row) {
        self.newest_row = Some(self.newest_row.map_or(row.t, |t| t.max(row.t)));
        if row.scope.is_some() {
            self.scope = row.scope;
        }
        if row.joules > 0.0 && self.ledger.is_some() {
            let (day, month) = wattbar_ledger::store::local_day_month(row.t);
            let u = self
                .unwritten
                .entry((day, month, row.scope, row.currency.clone()))
                .or_default();
            u.0 += row.joules;
            u.1 += row.cost;
        }
        if let Some(ledger) = self.ledger.as_mut() {
            ledger.record(row);
        }
    }

    /// True when a batch is due at `elapsed` (the engine's clock), or something in it cannot
    /// wait.
    pub fn due(&mut self, elapsed: Duration) -> bool {
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

    /// Writes the pending batch with the session's running totals, then refreshes the stored
    /// totals and checks the budgets.
    pub fn flush(
        &mut self,
        elapsed: Duration,
        session: &SessionTotals,
        now_unix: f64,
        prefs: &Preferences,
    ) {
        self.last_flush = Some(elapsed);
        // Written or failed, the next try waits for the interval: a ledger that refuses writes
        // is not asked again at every fast sample.
        self.urgent = false;
        let Some(ledger) = self.ledger.as_mut() else {
            return;
        };
        ledger.keep_inference_days(prefs.inference_keep_days);
        match ledger
            .flush(session.joules.0, session.cost, now_unix)
            .and_then(|()| ledger.totals(now_unix, prefs.currency.as_str()))
        {
            Ok(t) => {
                if self.failure.take().is_some() {
                    tracing::info!("energy store: written again");
                }
                self.totals = Some(t.clone());
                self.totals_for = Some(wattbar_ledger::store::local_day_month(now_unix));
                self.unwritten.clear();
                self.refresh_committed(Some(t.lifetime.clone()), prefs.score_ceiling);
                self.check_budgets(&t, now_unix, prefs);
            }
            Err(e) => self.failed(e),
        }
    }

    /// Ends the running session with its totals and starts another.
    pub fn new_session(&mut self, ended: &SessionTotals, now_unix: f64, currency: &str) {
        let Some(ledger) = self.ledger.as_mut() else {
            return;
        };
        if let Err(e) = ledger.new_session(ended.joules.0, ended.cost, now_unix, currency) {
            self.failed(e);
        }
    }

    /// Writes what is pending and ends the session (shutdown).
    /// Writes the last batch and ends the session; an error when the ledger refused it.
    pub fn end(&mut self, session: &SessionTotals, now_unix: f64) -> Result<(), StoreError> {
        let Some(ledger) = self.ledger.as_mut() else {
            return Ok(());
        };
        ledger
            .end(session.joules.0, session.cost, now_unix)
            .inspect_err(|e| tracing::error!("could not write the last batch: {e}"))
    }

    /// Keeps a change of low-power mode for the batch, written at the next chance: a choice
    /// the user made is not lost to a crash in the seconds after it.
    pub fn record_low_power(&mut self, state: &LowPowerState, message: &str) {
        if let Some(ledger) = self.ledger.as_mut() {
            ledger.record_low_power(state.clone(), message.to_string());
            self.urgent = true;
        }
    }

    /// The lifetime counters as the store last committed them (see [`committed`]).
    pub fn committed(&self) -> Arc<Committed> {
        Arc::clone(&self.committed)
    }

    /// The headline's joules measured since the last batch written, not yet in
    /// [`committed`](Self::committed): lost if the process dies now.
    pub fn unwritten_joules(&self) -> f64 {
        self.unwritten.values().map(|(joules, _)| joules).sum()
    }

    /// Today, this month and lifetime at `now_unix` in the headline's scope: the stored totals
    /// of the last batch plus what was measured since (in its own local day, scope and
    /// currency).
    pub fn totals(&self, now_unix: f64) -> Option<LedgerTotals> {
        let stored = self.totals.clone()?;
        let mut t = LedgerTotals {
            today: stored.today.in_scope(self.scope),
            month: stored.month.in_scope(self.scope),
            lifetime: stored.lifetime.in_scope(self.scope),
        };
        let (today, month) = wattbar_ledger::store::local_day_month(now_unix);
        // Past midnight (or a month's end) since the batch: the stored day is another day's.
        if let Some((day, mon)) = &self.totals_for {
            if *day != today {
                t.today = t.today.emptied();
            }
            if *mon != month {
                t.month = t.month.emptied();
            }
        }
        for ((day, mon, scope, currency), (joules, cost)) in &self.unwritten {
            t.lifetime.add(*joules, *scope, currency, *cost);
            if *mon == month {
                t.month.add(*joules, *scope, currency, *cost);
            }
            if *day == today {
                t.today.add(*joules, *scope, currency, *cost);
            }
        }
        Some(t)
    }

    /// What the user must know: a write the ledger refuses now, else what opening it found.
    pub fn notice(&self) -> Option<&String> {
        self.failure.as_ref().or(self.notice.as_ref())
    }

    pub fn alerts(&self) -> &[BudgetAlert] {
        &self.alerts
    }

    pub fn alert_seq(&self) -> u64 {
        self.alert_seq
    }

    fn failed(&mut self, e: StoreError) {
        tracing::error!("energy store: {e}");
        self.failure = Some(format!("Energy history is not being saved: {e}"));
    }

    /// Reads the lifetime counters back from the store after a batch was committed (or at
    /// open), with `lifetime` as the store's totals just gave it. The per-model totals are read
    /// again only when records were written; a failed read keeps the last figures, which the
    /// store still holds or exceeds.
    fn refresh_committed(&mut self, lifetime: Option<Total>, ceiling: f64) {
        let Some(ledger) = self.ledger.as_ref() else {
            return;
        };
        if ledger.has_pending() {
            return;
        }
        let store = ledger.store();
        let read = (|| {
            let models = if self.models_stale {
                store.inference_models(ceiling)?
            } else {
                self.committed.models.clone()
            };
            let since_unix = match self.committed.since_unix {
                Some(since) => Some(since),
                None => store.first_session_start()?,
            };
            let through_unix = match self.newest_row {
                Some(t) => Some(t),
                None => store.newest_sample()?,
            };
            Ok::<_, StoreError>(Committed {
                since_unix,
                through_unix,
                by_scope: store.lifetime_by_scope()?,
                by_domain: store.lifetime_by_domain()?,
                lifetime,
                models,
            })
        })();
        match read {
            Ok(committed) => {
                self.models_stale = false;
                if *self.committed != committed {
                    self.committed = Arc::new(committed);
                }
            }
            Err(e) => tracing::warn!("could not read the lifetime totals back: {e}"),
        }
    }

    /// Alerts for budgets crossed, each once per local day or month.
    fn check_budgets(&mut self, totals: &LedgerTotals, now: f64, prefs: &Preferences) {
        let Some(ledger) = self.ledger.as_mut() else {
            return;
        };
        let (day, month) = wattbar_ledger::store::local_day_month(now);
        let mut fresh = Vec::new();
        for alert in budget::crossed(prefs, totals) {
            let period = if alert.kind.starts_with("daily") {
                &day
            } else {
                &month
            };
            match ledger.first_alert(&format!("{}:{period}", alert.kind), now) {
                Ok(true) => fresh.push(alert),
                Ok(false) => {}
                Err(e) => tracing::warn!("could not record a budget alert: {e}"),
            }
        }
        if !fresh.is_empty() {
            for a in &fresh {
                tracing::info!("{}", a.message);
            }
            self.alerts = fresh;
            self.alert_seq += 1;
        }
    }
}

pub mod committed;
#[cfg(test)]
mod tests;
