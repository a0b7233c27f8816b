//! Recording, in three stages that each own their state: the [`writer`] keeps what the engine's
//! stages hand over as one [`Write`] and commits it in batches; the [`totals`] follow the rows
//! taken and the batches committed, and are what readers see; the [`Budgets`] observe the totals
//! after each batch.
//!
//! A failed write is logged, kept for the next batch and shown to the user; it never stops
//! sampling. Without a store nothing is kept, and there are no lifetime counters.
//!
//! Three kinds of totals, each with its own readers, never mixed:
//!
//! | totals | what they are | kept in | read by |
//! |---|---|---|---|
//! | the session's | energy, cost and carbon since the session began (or was reset), per scope; in memory only | the meter's accounting ([`crate::accounting`]), published as `PublishedState::energy` | the tray's Session line, `/v1/snapshot` and `/v1/stream`, `watch`, `run` |
//! | the menu's today, month and lifetime | what the store holds as of the last batch plus what was measured since, by local day and currency: session ≤ today ≤ month ≤ lifetime at every state | [`totals`]' stored and unwritten parts, published as `LedgerView::totals` | the tray's Today line, `/v1/totals`, `wattbar-cli totals`, the dashboard, budgets |
//! | the committed counters | lifetime figures exactly as the store committed them (per scope, domain, currency, model, server, key), read back after each batch; what was measured since is the `unwritten_joules` gauge | [`committed`], published as `LedgerView::committed` | every exported counter: `/metrics`' `_total` series, OTLP sums, MQTT `total_increasing` sensors; none goes back after a crash |

pub mod committed;
mod totals;
mod writer;

use crate::budget::{BudgetAlert, Budgets};
use crate::inference::book::StoredBook;
use committed::CommittedTotals;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use totals::Totals;
use wattbar_core::calibration::Learned;
use wattbar_core::inference::resident::StoredResidency;
use wattbar_core::{LowPowerState, Preferences, Scope, SessionTotals};
use wattbar_ledger::ledger::{Ledger, LedgerTotals};
use wattbar_ledger::store::StoreError;
use writer::Writer;
pub use writer::{Write, RESERVED_IDS};

pub struct Recorder {
    writer: Writer,
    totals: Totals,
    budgets: Budgets,
}

impl Recorder {
    /// Opens the ledger at `path` (none: nothing kept) and starts a session.
    pub fn open(
        path: Option<&Path>,
        batch_interval: Duration,
        now_unix: f64,
        prefs: &Preferences,
    ) -> Recorder {
        let writer = Writer::open(path, batch_interval, now_unix, prefs.currency.as_str());
        let totals = Totals::open(writer.ledger(), now_unix, prefs, writer.restored_scope());
        Recorder {
            writer,
            totals,
            budgets: Budgets::default(),
        }
    }

    /// Keeps `write` for the batch; a row also counts in the totals at once.
    pub fn write(&mut self, write: Write) {
        let kept = self.writer.ledger().is_some();
        match &write {
            Write::Row(row) => self.totals.observe_row(row, kept),
            Write::Records { records, .. } if !records.is_empty() => {
                self.totals.observe_records();
            }
            Write::KeyRefused(_) => self.totals.observe_records(),
            Write::ServerWindows(_) => self.totals.observe_server_windows(),
            _ => {}
        }
        self.writer.take(write);
    }

    /// Keeps the ids from `next` on reserved ([`RESERVED_IDS`] ahead) before they are given.
    pub fn reserve_record_ids(&mut self, next: u64) {
        self.writer.reserve_ids(next);
    }

    /// True when a batch is due at `elapsed` (the engine's clock), or something in it cannot
    /// wait.
    pub fn due(&mut self, elapsed: Duration) -> bool {
        self.writer.due(elapsed)
    }

    /// Writes the batch with the session's running totals; once committed, the totals read it
    /// back and the budgets observe them.
    pub fn flush(
        &mut self,
        elapsed: Duration,
        session: &SessionTotals,
        now_unix: f64,
        prefs: &Preferences,
    ) {
        let Some(ledger) = self.writer.flush(elapsed, session, now_unix, prefs) else {
            return;
        };
        if let Some(t) = self
            .totals
            .after_write(ledger, now_unix, prefs, session.scope)
        {
            self.budgets.observe(t, now_unix, prefs, ledger);
        }
    }

    /// The keys as they stand after a batch: a soft alert for each that spent most of its
    /// budget, once per window.
    pub fn observe_keys(&mut self, keys: &[crate::keys::KeyView], now_unix: f64) {
        if keys
            .iter()
            .all(|k| k.status.is_none() && k.money_status.is_none())
        {
            return;
        }
        if let Some(ledger) = self.writer.ledger_mut() {
            self.budgets.observe_keys(keys, now_unix, ledger);
        }
    }

    /// Ends the running session with its totals and starts another.
    pub fn new_session(&mut self, ended: &SessionTotals, now_unix: f64, currency: &str) {
        self.writer.new_session(ended, now_unix, currency);
    }

    /// Writes the last batch and ends the session; an error when the ledger refused it.
    pub fn end(&mut self, session: &SessionTotals, now_unix: f64) -> Result<(), StoreError> {
        self.writer.end(session, now_unix)
    }

    /// The lifetime counters as the store last committed them (see [`committed`]).
    pub fn committed(&self) -> Arc<CommittedTotals> {
        self.totals.committed()
    }

    /// The headline's joules measured since the last batch written: lost if the process dies
    /// now.
    pub fn unwritten_joules(&self) -> f64 {
        self.totals.unwritten_joules()
    }

    /// Inference records settled since the last batch written: lost if the process dies now;
    /// `None` without a ledger.
    pub fn unwritten_records(&self) -> Option<usize> {
        self.writer.ledger().map(Ledger::unwritten_records)
    }

    /// Today, this month and lifetime at `now_unix` in `scope` (the session's), measured since
    /// the last batch included.
    pub fn totals(&self, now_unix: f64, scope: Option<Scope>) -> Option<LedgerTotals> {
        self.totals.at(now_unix, scope)
    }

    /// What the user must know: a write the ledger refuses now, else what opening it found.
    pub fn notice(&self) -> Option<&String> {
        self.writer.notice()
    }

    pub fn alerts(&self) -> &[BudgetAlert] {
        self.budgets.alerts()
    }

    /// What readers see of the ledger now, at wall-clock `now_unix` in the headline's `scope`;
    /// `start_notice`: what start-up had to say, shown until the ledger has something newer.
    pub fn kept(
        &self,
        now_unix: f64,
        scope: Option<Scope>,
        start_notice: Option<&String>,
    ) -> crate::published::LedgerView {
        crate::published::LedgerView {
            totals: self.totals(now_unix, scope),
            committed: self.committed(),
            unwritten_joules: self.unwritten_joules(),
            unwritten_records: self.unwritten_records(),
            notice: self.notice().or(start_notice).cloned(),
            alerts: self.alerts().to_vec(),
            alert_seq: self.alert_seq(),
        }
    }

    pub fn alert_seq(&self) -> u64 {
        self.budgets.seq()
    }

    /// What the headline covered when the ledger was last written; `None` without one. The
    /// session starts from it, so a restart in another scope is a change.
    pub fn restored_scope(&self) -> Option<Scope> {
        self.writer.restored_scope()
    }

    /// The low-power state the store recorded last; off without one.
    pub fn restored_low_power(&self) -> LowPowerState {
        self.writer.restored_low_power()
    }

    /// What the inference book starts from.
    pub fn restored_inference(&self, ceiling: f64) -> StoredBook {
        self.writer.restored_inference(ceiling)
    }

    /// The fit the ledger kept last; `None` without one.
    pub fn restored_calibration(&self) -> Option<Learned> {
        self.writer.restored_calibration()
    }

    /// Feed `feed`'s kept slots that end after `since`; `None` without any.
    pub fn restored_feed(
        &self,
        feed: &str,
        quantity: wattbar_core::slots::Quantity,
        since: f64,
    ) -> Option<wattbar_core::slots::Series> {
        self.writer.restored_feed(feed, quantity, since)
    }

    /// The graded profiles kept, oldest first.
    pub fn restored_profiles(&self) -> Vec<wattbar_core::eval::best::KeptProfile> {
        self.writer.restored_profiles()
    }

    /// What the ledger committed for key `name` in `[from, to)`, in `unit`. Where it cannot be
    /// read, the most any budget allows: a budget that cannot be known spent is taken as spent.
    pub fn key_spent(&self, name: &str, unit: crate::keys::Unit, from: f64, to: f64) -> f64 {
        match self.writer.ledger() {
            Some(ledger) => crate::keys::spent_in(ledger.store(), name, unit, from, to),
            None => 0.0,
        }
    }

    /// What residency starts from: the stored set baselines and today's rows.
    pub fn restored_residency(&self, now_unix: f64) -> StoredResidency {
        self.writer.restored_residency(now_unix)
    }

    /// Today's joules per program, as the ledger kept them.
    pub fn restored_program_day(&self, now_unix: f64) -> BTreeMap<String, f64> {
        self.writer.restored_program_day(now_unix)
    }
}

#[cfg(test)]
mod tests;
