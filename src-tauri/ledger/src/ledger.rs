//! The engine's side of the store, and its one write path: everything the engine writes waits in
//! one [`Batch`] and is written in one transaction, every batch interval or at once when a
//! client waits for it (a receipt, a posted record), ids must be reserved, or the engine stops.
//!
//! A failed write is logged, kept for the next batch (up to [`MAX_PENDING`] rows and
//! [`MAX_PENDING_RECORDS`] records) and shown to the user; it never stops sampling.

use crate::store::battery::BatteryDay;
use crate::store::feeds::FeedSlots;
use crate::store::profiles::StoredProfile;
use crate::store::resident::BatchExtras;
use crate::store::scopes::ScopeChange;
use crate::store::wear::Worn;
use crate::store::{MovedAside, Row, Store, StoreError, Total};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use wattbar_core::battery::Health;
use wattbar_core::calibration::Learned;
use wattbar_core::inference::resident::{ResidentDay, SetBaseline, Unload};
use wattbar_core::inference::server_window::ServerWindow;
use wattbar_core::inference::{Baseline, Record};
use wattbar_core::{LowPowerState, Scope};

/// Rows kept while the store cannot be written (a day at 1 Hz).
pub const MAX_PENDING: usize = 86_400;
/// Inference records kept while the store cannot be written.
pub const MAX_PENDING_RECORDS: usize = 10_000;

/// Feeds' answers kept while the store cannot be written: two feeds' hourly fetches for two
/// days.
pub const MAX_PENDING_FEEDS: usize = 96;

/// What waits for the next write.
#[derive(Default)]
struct Batch {
    rows: Vec<Row>,
    /// A new idle baseline.
    baseline: Option<Baseline>,
    /// Residency rows changed since the last batch, by key (the newest of each wins).
    sets: BTreeMap<String, SetBaseline>,
    days: BTreeMap<(String, String), ResidentDay>,
    /// Joules per (UTC hour, program).
    programs: BTreeMap<(i64, String), f64>,
    records: Vec<Record>,
    unloads: Vec<Unload>,
    low_power: Vec<(LowPowerState, String)>,
    reserve_ids_through: Option<u64>,
    scope_changes: Vec<ScopeChange>,
    calibration: Option<Learned>,
    server_windows: Vec<ServerWindow>,
    profiles: Vec<StoredProfile>,
    feed_slots: Vec<FeedSlots>,
    key_refusals: Vec<String>,
    /// Batteries' figures by (battery, local day): the day's last wins.
    battery_days: BTreeMap<(String, String), BatteryDay>,
    /// Energy drawn from the battery and its wear, by (local day, currency).
    wear: BTreeMap<(String, String), Worn>,
}

/// What the UI and CLI show from the ledger.
#[derive(Debug, Clone, PartialEq, Default, Serialize, serde::Deserialize)]
pub struct LedgerTotals {
    pub today: Total,
    pub month: Total,
    pub lifetime: Total,
}

pub struct Ledger {
    store: Store,
    session_id: i64,
    batch: Batch,
    /// Wall-clock time of the last pruning of old rows.
    pruned_at: Option<f64>,
    /// How long inference records are kept, seconds.
    inference_keep_seconds: f64,
    /// The batteries' health last kept, and the local day it was kept for.
    batteries_kept: Option<(String, Arc<[Health]>)>,
    /// The minute (Unix seconds / 60) the kept health was last seen in: a day starts on a
    /// whole minute, so the same health within it needs no look at the day.
    batteries_seen_minute: Option<i64>,
}

/// Old rows are deleted this often, not at every batch: two deletes per batch were two more
/// commits every 5 s, for rows that age by the day.
pub const PRUNE_EVERY_SECONDS: f64 = 600.0;

impl Ledger {
    /// Opens the store and starts a session. The second value is a notice for the user.
    pub fn open(
        path: &Path,
        now_unix: f64,
        currency: &str,
    ) -> Result<(Ledger, Option<String>), StoreError> {
        let (mut store, moved) = Store::open(path, now_unix)?;
        let notice = moved.map(|MovedAside { to, reason }| {
            format!(
                "The energy database was damaged ({reason}); it was moved to {} and a new one started.",
                to.display()
            )
        });
        let session_id = store.start_session(now_unix, currency)?;
        Ok((
            Ledger {
                store,
                session_id,
                batch: Batch::default(),
                pruned_at: None,
                inference_keep_seconds: f64::from(crate::store::inference::DEFAULT_KEEP_DAYS)
                    * 86_400.0,
                batteries_kept: None,
                batteries_seen_minute: None,
            },
            notice,
        ))
    }

    /// Keeps inference records `days` days from the next pruning on.
    pub fn keep_inference_days(&mut self, days: u32) {
        self.inference_keep_seconds = f64::from(days) * 86_400.0;
    }

    /// True while rows wait for the next batch.
    pub fn has_pending(&self) -> bool {
        !self.batch.rows.is_empty()
    }

    /// Inference records waiting for the next batch: lost if the process dies now.
    pub fn unwritten_records(&self) -> usize {
        self.batch.records.len()
    }

    /// Keeps `baseline` for the next batch.
    pub fn record_baseline(&mut self, baseline: Baseline) {
        self.batch.baseline = Some(baseline);
    }

    /// Keeps changed residency rows for the next batch.
    pub fn record_residency(&mut self, sets: Vec<SetBaseline>, days: Vec<ResidentDay>) {
        for s in sets {
            self.batch.sets.insert(s.key.clone(), s);
        }
        for d in days {
            self.batch.days.insert((d.day.clone(), d.model.clone()), d);
        }
    }

    /// Adds energy per program for the next batch.
    pub fn record_programs(&mut self, hour: i64, joules: &BTreeMap<String, f64>) {
        for (program, j) in joules {
            *self
                .batch
                .programs
                .entry((hour, program.clone()))
                .or_default() += j;
        }
    }

    /// Keeps the windows of model servers followed by their own counters for the next batch;
    /// while the store cannot be written, the oldest beyond [`MAX_PENDING_RECORDS`] are dropped
    /// (and so never counted in the sums: what `/metrics` shows stays what was committed).
    pub fn record_server_windows(&mut self, windows: Vec<ServerWindow>) {
        let pending = &mut self.batch.server_windows;
        pending.extend(windows);
        let over = pending.len().saturating_sub(MAX_PENDING_RECORDS);
        pending.drain(..over);
    }

    /// Keeps a change of the headline's scope for the next batch. The session finds the
    /// changes (it owns the scope); the ledger only keeps them.
    pub fn record_scope_change(&mut self, change: wattbar_core::session::ScopeChange) {
        if self.batch.scope_changes.len() >= MAX_PENDING {
            self.batch.scope_changes.remove(0);
        }
        self.batch.scope_changes.push(ScopeChange {
            t: change.unix,
            from: change.from,
            to: change.to,
        });
    }

    /// Keeps a sample's row for the next batch.
    pub fn record(&mut self, row: Row) {
        if self.batch.rows.len() >= MAX_PENDING {
            self.batch.rows.remove(0);
        }
        self.batch.rows.push(row);
    }

    /// Keeps inference records for the next batch.
    pub fn record_inference(&mut self, records: &[Record]) {
        let records_kept = &mut self.batch.records;
        records_kept.extend_from_slice(records);
        let over = records_kept.len().saturating_sub(MAX_PENDING_RECORDS);
        if over > 0 {
            tracing::error!("{over} inference records were dropped: the ledger cannot be written");
            records_kept.drain(..over);
        }
    }

    pub fn record_unload(&mut self, unload: Unload) {
        self.batch.unloads.push(unload);
    }

    /// Counts a request refused for `key`'s budget in the next batch.
    pub fn record_key_refused(&mut self, key: String) {
        let refusals = &mut self.batch.key_refusals;
        if refusals.len() < MAX_PENDING_RECORDS {
            refusals.push(key);
        }
    }

    /// Keeps a feed's answer for the next batch; a newer answer of the same feed that covers
    /// it replaces it there.
    pub fn record_feed_slots(&mut self, slots: FeedSlots) {
        let pending = &mut self.batch.feed_slots;
        pending.retain(|p| p.feed != slots.feed || p.series.span() != slots.series.span());
        pending.push(slots);
        let over = pending.len().saturating_sub(MAX_PENDING_FEEDS);
        pending.drain(..over);
    }

    /// Keeps a graded profile for the next batch.
    pub fn record_profile(&mut self, profile: StoredProfile) {
        self.batch.profiles.push(profile);
    }

    /// The batteries' health at Unix time `t`: kept as their local day's figures when it is news
    /// (another `Arc` than the last kept, or a new day), else nothing is done.
    pub fn observe_batteries(&mut self, t: f64, health: &Arc<[Health]>) {
        let minute = (t / 60.0).floor() as i64;
        let same = self
            .batteries_kept
            .as_ref()
            .is_some_and(|(_, kept)| Arc::ptr_eq(kept, health));
        if same && self.batteries_seen_minute == Some(minute) {
            return;
        }
        self.batteries_seen_minute = Some(minute);
        let (day, _) = crate::store::local_day_month(t);
        if let Some((kept_day, kept)) = &self.batteries_kept {
            if *kept_day == day && Arc::ptr_eq(kept, health) {
                return;
            }
        }
        for h in health.iter() {
            self.batch
                .battery_days
                .insert((h.battery.clone(), day.clone()), BatteryDay::of(&day, h));
        }
        self.batteries_kept = Some((day, Arc::clone(health)));
    }

    /// Energy drawn from the battery at Unix time `t`, and its wear, for the next batch.
    pub fn record_wear(&mut self, t: f64, worn: &Worn) {
        let (day, _) = crate::store::local_day_month(t);
        let key = (day, worn.currency.clone());
        self.batch
            .wear
            .entry(key)
            .or_insert_with(|| Worn {
                currency: worn.currency.clone(),
                ..Worn::default()
            })
            .add(worn);
    }

    /// Keeps a new fit for the next batch (the newest wins).
    pub fn record_calibration(&mut self, learned: Learned) {
        self.batch.calibration = Some(learned);
    }

    pub fn record_low_power(&mut self, state: LowPowerState, message: String) {
        self.batch.low_power.push((state, message));
    }

    /// Keeps the record ids through `through` reserved from the next batch on.
    pub fn reserve_ids(&mut self, through: u64) {
        let r = &mut self.batch.reserve_ids_through;
        *r = Some(r.map_or(through, |t| t.max(through)));
    }

    /// Writes what is pending in one transaction, with the session's running totals.
    pub fn flush(
        &mut self,
        session_joules: f64,
        session_cost: f64,
        now_unix: f64,
    ) -> Result<(), StoreError> {
        let b = &self.batch;
        let sets: Vec<SetBaseline> = b.sets.values().cloned().collect();
        let days: Vec<ResidentDay> = b.days.values().cloned().collect();
        let battery_days: Vec<BatteryDay> = b.battery_days.values().cloned().collect();
        let wear: Vec<(String, Worn)> = b
            .wear
            .iter()
            .map(|((day, _), w)| (day.clone(), w.clone()))
            .collect();
        self.store.write_batch_with(
            self.session_id,
            &b.rows,
            session_joules,
            session_cost,
            &BatchExtras {
                baseline: b.baseline.as_ref(),
                set_baselines: &sets,
                resident_days: &days,
                program_hours: Some(&b.programs),
                records: &b.records,
                unloads: &b.unloads,
                low_power: &b.low_power,
                reserve_ids_through: b.reserve_ids_through,
                scope_changes: &b.scope_changes,
                calibration: b.calibration.as_ref(),
                server_windows: &b.server_windows,
                profiles: &b.profiles,
                feed_slots: &b.feed_slots,
                key_refusals: &b.key_refusals,
                battery_days: &battery_days,
                wear: &wear,
            },
        )?;
        self.batch = Batch::default();
        // Any step of the wall clock, either way, prunes at once.
        if self
            .pruned_at
            .is_none_or(|at| (now_unix - at).abs() >= PRUNE_EVERY_SECONDS)
        {
            self.store.prune(now_unix)?;
            self.store
                .prune_inference(now_unix - self.inference_keep_seconds)?;
            self.pruned_at = Some(now_unix);
        }
        Ok(())
    }

    /// Ends the running session and starts another; lifetime is untouched.
    pub fn new_session(
        &mut self,
        session_joules: f64,
        session_cost: f64,
        now_unix: f64,
        currency: &str,
    ) -> Result<(), StoreError> {
        self.flush(session_joules, session_cost, now_unix)?;
        self.store.end_session(self.session_id, now_unix)?;
        self.session_id = self.store.start_session(now_unix, currency)?;
        Ok(())
    }

    pub fn end(
        &mut self,
        session_joules: f64,
        session_cost: f64,
        now_unix: f64,
    ) -> Result<(), StoreError> {
        self.flush(session_joules, session_cost, now_unix)?;
        self.store.end_session(self.session_id, now_unix)
    }

    /// Today, this month and lifetime in `scope` (the headline's, as the session holds it),
    /// with costs in `currency` (other currencies and scopes listed apart).
    pub fn totals(
        &self,
        now_unix: f64,
        currency: &str,
        scope: Option<Scope>,
    ) -> Result<LedgerTotals, StoreError> {
        Ok(LedgerTotals {
            today: self.store.day(now_unix, currency, scope)?,
            month: self.store.month(now_unix, currency, scope)?,
            lifetime: self.store.lifetime(currency, scope)?,
        })
    }

    /// Records that an alert was given; false when it already had been (in this period).
    pub fn first_alert(&mut self, key: &str, now_unix: f64) -> Result<bool, StoreError> {
        self.store.mark_alert(key, now_unix)
    }

    pub fn store(&self) -> &Store {
        &self.store
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn baseline(watts: f64) -> Baseline {
        Baseline {
            watts,
            spread_watts: Some(0.5),
            samples: 30,
            from: 1_700_000_000.0,
            to: 1_700_000_030.0,
            method: "median".into(),
            coverage: None,
        }
    }

    #[test]
    fn a_new_baseline_is_written_with_the_next_batch_and_survives_a_restart() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join(crate::store::DB_FILE);
        let now = 1_700_000_030.0;
        let (mut ledger, _) = Ledger::open(&path, now, "EUR").unwrap_or_else(|e| panic!("{e}"));
        ledger.record_baseline(baseline(18.0));
        ledger.record_baseline(baseline(21.5));
        // Kept for the batch: a reader sees nothing yet.
        let reader = Store::open_read_only(&path).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(reader.baseline().ok().flatten(), None);
        ledger
            .flush(0.0, 0.0, now)
            .unwrap_or_else(|e| panic!("{e}"));
        drop(ledger);
        let reader = Store::open_read_only(&path).unwrap_or_else(|e| panic!("{e}"));
        // The latest of the two, not the first.
        assert_eq!(reader.baseline().ok().flatten(), Some(baseline(21.5)));
    }

    #[test]
    fn the_last_batch_at_shutdown_writes_a_waiting_baseline() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join(crate::store::DB_FILE);
        let now = 1_700_000_030.0;
        let (mut ledger, _) = Ledger::open(&path, now, "EUR").unwrap_or_else(|e| panic!("{e}"));
        ledger.record_baseline(baseline(30.0));
        ledger.end(0.0, 0.0, now).unwrap_or_else(|e| panic!("{e}"));
        drop(ledger);
        let reader = Store::open_read_only(&path).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            reader.baseline().ok().flatten().map(|b| b.watts),
            Some(30.0)
        );
    }
}
