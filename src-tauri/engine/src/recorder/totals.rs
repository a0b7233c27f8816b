//! The totals readers see, changed only by the rows the recorder takes and the batches the
//! writer commits. Two kinds, on purpose kept apart:
//! - The lifetime counters others build on ([`CommittedTotals`]) are what the store committed, read
//!   back after each batch: a crash can lose the batch in progress, but never take back a figure
//!   already exported. What was measured since is [`Totals::unwritten_joules`], a gauge.
//! - Today, this month and lifetime as the menu shows them are the stored totals plus what was
//!   measured since the last batch written (by its local day and currency), so session ≤ today ≤
//!   month ≤ lifetime holds at every published state, not only after each batch.

use super::committed::CommittedTotals;
use std::collections::BTreeMap;
use std::sync::Arc;
use wattbar_core::{Preferences, Scope};
use wattbar_ledger::ledger::{Ledger, LedgerTotals};
use wattbar_ledger::store::{Row, StoreError, Total};

/// Where energy not yet written belongs: (local day, local month, scope, currency).
type Unwritten = (String, String, Option<Scope>, String);

pub(super) struct Totals {
    /// Today, this month and lifetime as the store gave them after the last batch.
    stored: Option<LedgerTotals>,
    /// The local day and month `stored` was read for.
    stored_for: Option<(String, String)>,
    /// Joules and cost measured since the last batch written.
    unwritten: BTreeMap<Unwritten, (f64, f64)>,
    /// The lifetime counters as the store committed them; replaced after each batch written.
    committed: Arc<CommittedTotals>,
    /// The per-model totals must be read back after the next batch (records were given, or
    /// none was read yet).
    models_stale: bool,
    /// Likewise the model servers' sums (windows were given, or none was read yet).
    servers_stale: bool,
    /// The time of the newest row taken: once written, what the committed figures are of.
    newest_row: Option<f64>,
}

impl Totals {
    /// What `ledger` holds at `now_unix`, read in `scope`; nothing without one.
    pub(super) fn open(
        ledger: Option<&Ledger>,
        now_unix: f64,
        prefs: &Preferences,
        scope: Option<Scope>,
    ) -> Totals {
        let mut totals = Totals {
            stored: ledger.and_then(|l| l.totals(now_unix, prefs.currency.as_str(), scope).ok()),
            stored_for: Some(wattbar_ledger::store::local_day_month(now_unix)),
            unwritten: BTreeMap::new(),
            committed: Arc::default(),
            models_stale: true,
            servers_stale: true,
            newest_row: None,
        };
        if let Some(ledger) = ledger {
            let lifetime = totals.stored.as_ref().map(|t| t.lifetime.clone());
            totals.refresh_committed(ledger, lifetime, prefs.score_ceiling);
        }
        totals
    }

    /// Takes a row given to the writer; `kept`: a store will write it.
    pub(super) fn observe_row(&mut self, row: &Row, kept: bool) {
        self.newest_row = Some(self.newest_row.map_or(row.t, |t| t.max(row.t)));
        if row.joules > 0.0 && kept {
            let (day, month) = wattbar_ledger::store::local_day_month(row.t);
            let u = self
                .unwritten
                .entry((day, month, row.scope, row.currency.clone()))
                .or_default();
            u.0 += row.joules;
            u.1 += row.cost;
        }
    }

    /// Records were given to the writer: the per-model totals are read back after the batch.
    pub(super) fn observe_records(&mut self) {
        self.models_stale = true;
    }

    /// Server windows were given to the writer: their sums are read back after the batch.
    pub(super) fn observe_server_windows(&mut self) {
        self.servers_stale = true;
    }

    /// After `ledger` committed a batch at `now_unix`: the stored totals (in `scope`, the
    /// session's) and the committed counters read back, what was unwritten now in them. A
    /// failed read keeps the figures as they were, the unwritten part included, so nothing is
    /// counted twice or dropped.
    pub(super) fn after_write(
        &mut self,
        ledger: &Ledger,
        now_unix: f64,
        prefs: &Preferences,
        scope: Option<Scope>,
    ) -> Option<&LedgerTotals> {
        match ledger.totals(now_unix, prefs.currency.as_str(), scope) {
            Ok(t) => {
                self.stored_for = Some(wattbar_ledger::store::local_day_month(now_unix));
                self.unwritten.clear();
                self.refresh_committed(ledger, Some(t.lifetime.clone()), prefs.score_ceiling);
                self.stored = Some(t);
                self.stored.as_ref()
            }
            Err(e) => {
                tracing::warn!("could not read the totals back: {e}");
                None
            }
        }
    }

    /// The lifetime counters as the store last committed them (see [`CommittedTotals`]).
    pub(super) fn committed(&self) -> Arc<CommittedTotals> {
        Arc::clone(&self.committed)
    }

    /// The headline's joules measured since the last batch written, not yet in
    /// [`committed`](Self::committed): lost if the process dies now.
    pub(super) fn unwritten_joules(&self) -> f64 {
        self.unwritten.values().map(|(joules, _)| joules).sum()
    }

    /// Today, this month and lifetime at `now_unix` in `scope` (the session's): the stored
    /// totals of the last batch plus what was measured since (in its own local day, scope and
    /// currency).
    pub(super) fn at(&self, now_unix: f64, scope: Option<Scope>) -> Option<LedgerTotals> {
        let stored = self.stored.as_ref()?;
        let mut t = LedgerTotals {
            today: stored.today.in_scope(scope),
            month: stored.month.in_scope(scope),
            lifetime: stored.lifetime.in_scope(scope),
        };
        let (today, month) = wattbar_ledger::store::local_day_month(now_unix);
        // Past midnight (or a month's end) since the batch: the stored day is another day's.
        if let Some((day, mon)) = &self.stored_for {
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

    /// Reads the lifetime counters back from the store, with `lifetime` as its totals just
    /// gave it. The per-model totals are read again only when records were written; a failed
    /// read keeps the last figures, which the store still holds or exceeds.
    fn refresh_committed(&mut self, ledger: &Ledger, lifetime: Option<Total>, ceiling: f64) {
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
            let keys = if self.models_stale {
                store.key_totals()?
            } else {
                self.committed.keys.clone()
            };
            let server_totals = if self.servers_stale {
                store.server_totals()?
            } else {
                self.committed.server_totals.clone()
            };
            let since_unix = match self.committed.since_unix {
                Some(since) => Some(since),
                None => store.first_session_start()?,
            };
            let through_unix = match self.newest_row {
                Some(t) => Some(t),
                None => store.newest_sample()?,
            };
            let wear_today = match through_unix {
                Some(t) => store.wear_on(&wattbar_ledger::store::local_day_month(t).0)?,
                None => Vec::new(),
            };
            Ok::<_, StoreError>(CommittedTotals {
                since_unix,
                through_unix,
                by_scope: store.lifetime_by_scope()?,
                by_domain: store.lifetime_by_domain()?,
                lifetime,
                costs: store.lifetime_costs()?,
                resident_idle: store.resident_idle_totals()?,
                models,
                server_totals,
                keys,
                wear: store.lifetime_wear()?,
                wear_today,
            })
        })();
        match read {
            Ok(committed) => {
                self.models_stale = false;
                self.servers_stale = false;
                if *self.committed != committed {
                    self.committed = Arc::new(committed);
                }
            }
            Err(e) => tracing::warn!("could not read the lifetime totals back: {e}"),
        }
    }
}
