//! What each proxy key spent, and the usage ledger per key and client.
//!
//! Rules:
//! - A record made with a key names it and its client, and keeps what the key was charged
//!   (`key_joules`). The same transaction adds it to the key's lifetime totals
//!   (`key_totals`, per key, scope and outcome), which are kept apart from the records: pruning
//!   records never takes a counter back. A request refused for its budget adds to them too
//!   (outcome `budget_exceeded`, no joules).
//! - A key's spend in a window is the sum of its records' `key_joules` that ended in it: what a
//!   restarted engine starts the window from.
//! - Usage reads at most [`MAX_USAGE_RECORDS`] records, newest first, and says when it stopped
//!   short; groups keep each scope apart (joules of different scope are never added), and each
//!   currency (costs in two currencies are never added).
//! - A key's money spend in a window is the sum of its records' `key_cost`, likewise.

use super::{Store, StoreError};
use rusqlite::params;
use serde::Serialize;
use std::collections::BTreeMap;
use wattbar_core::inference::Record;
use wattbar_core::keys::Period;
use wattbar_core::Scope;

pub(super) const MIGRATION: &str = r#"
ALTER TABLE inference ADD COLUMN key TEXT;
ALTER TABLE inference ADD COLUMN client TEXT;
ALTER TABLE inference ADD COLUMN key_joules REAL;
ALTER TABLE inference ADD COLUMN cost REAL;
ALTER TABLE inference ADD COLUMN currency TEXT;
ALTER TABLE inference ADD COLUMN carbon_g REAL;
ALTER TABLE inference ADD COLUMN key_cost REAL;
CREATE INDEX inference_key_end ON inference(key, end);
CREATE TABLE key_totals (key TEXT NOT NULL, scope TEXT NOT NULL, outcome TEXT NOT NULL,
                         requests INTEGER NOT NULL, joules REAL NOT NULL,
                         PRIMARY KEY (key, scope, outcome));
"#;

/// The outcome a request refused for its key's budget is counted under.
pub const BUDGET_EXCEEDED: &str = "budget_exceeded";

/// The most records one usage query reads.
pub const MAX_USAGE_RECORDS: usize = 1_000_000;

/// One key's lifetime figures for one scope and outcome.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KeyTotal {
    pub key: String,
    pub scope: Option<Scope>,
    /// `ok`, `cancelled`, `error` (the record's status), or [`BUDGET_EXCEEDED`].
    pub outcome: String,
    pub requests: u64,
    pub joules: f64,
}

fn add_total(
    tx: &rusqlite::Connection,
    key: &str,
    scope: Option<Scope>,
    outcome: &str,
    joules: f64,
) -> rusqlite::Result<()> {
    let joules = if joules.is_finite() {
        joules.max(0.0)
    } else {
        0.0
    };
    tx.prepare_cached(
        "INSERT INTO key_totals (key, scope, outcome, requests, joules) VALUES (?1, ?2, ?3, 1, ?4)
         ON CONFLICT (key, scope, outcome)
         DO UPDATE SET requests = requests + 1, joules = joules + excluded.joules",
    )?
    .execute(params![key, super::scopes::to_text(scope), outcome, joules])?;
    Ok(())
}

/// Adds record `r` to its key's totals, in the transaction that writes it.
pub(super) fn count_record(tx: &rusqlite::Connection, r: &Record) -> rusqlite::Result<()> {
    match &r.key {
        Some(key) => add_total(
            tx,
            key,
            r.scope,
            r.status.as_str(),
            r.key_joules.unwrap_or(0.0),
        ),
        None => Ok(()),
    }
}

/// Counts one request of `key` refused for its budget; `tx` may be a batch's transaction.
pub(super) fn count_refused(tx: &rusqlite::Connection, key: &str) -> rusqlite::Result<()> {
    add_total(tx, key, None, BUDGET_EXCEEDED, 0.0)
}

/// How usage is grouped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Group {
    Day,
    Week,
    Month,
    Key,
    Client,
    Model,
    /// One group of everything.
    All,
}

impl Group {
    pub fn parse(text: &str) -> Option<Group> {
        serde_json::from_value(serde_json::Value::String(text.trim().to_ascii_lowercase())).ok()
    }
}

/// Which records usage reads: each given field must match; `[from, to)` on their end.
#[derive(Debug, Clone, Default)]
pub struct UsageQuery {
    pub key: Option<String>,
    pub client: Option<String>,
    pub model: Option<String>,
    pub from: f64,
    pub to: f64,
}

/// One group's usage in one scope and currency.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct UsageRow {
    pub group: String,
    pub scope: Option<Scope>,
    /// The currency of `cost` and `key_cost`; `None` for records made before costs were kept.
    pub currency: Option<String>,
    pub requests: u64,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    /// Over the records whose energy was measured.
    pub energy_joules: f64,
    pub net_energy_joules: f64,
    /// What keys were charged for them.
    pub key_joules: f64,
    /// What their measured energy cost at the price in force when each was made.
    pub cost: f64,
    /// What keys' money budgets were charged for them.
    pub key_cost: f64,
    /// Their measured energy at the grid intensity then, where one was known.
    pub carbon_g: f64,
    /// Records whose energy is unknown (remote, or not measured).
    pub unmeasured: u64,
}

/// A usage answer: its groups, and whether [`MAX_USAGE_RECORDS`] cut it short.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Usage {
    pub rows: Vec<UsageRow>,
    pub truncated: bool,
}

impl Store {
    /// Every key's lifetime totals, as committed.
    pub fn key_totals(&self) -> Result<Vec<KeyTotal>, StoreError> {
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT key, scope, outcome, requests, joules FROM key_totals
                 ORDER BY key, scope, outcome",
            )
            .map_err(|e| self.sql(e))?;
        let rows = stmt
            .query_map([], |row| {
                Ok(KeyTotal {
                    key: row.get(0)?,
                    scope: super::scopes::from_text(&row.get::<_, String>(1)?),
                    outcome: row.get(2)?,
                    requests: u64::try_from(row.get::<_, i64>(3)?).unwrap_or(0),
                    joules: row.get(4)?,
                })
            })
            .map_err(|e| self.sql(e))?
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| self.sql(e));
        rows
    }

    /// What `key` was charged for the records that ended in `[from, to)`.
    pub fn key_spent(&self, key: &str, from: f64, to: f64) -> Result<f64, StoreError> {
        self.conn
            .query_row(
                "SELECT TOTAL(key_joules) FROM inference WHERE key = ?1 AND end >= ?2 AND end < ?3",
                params![key, from, to],
                |row| row.get(0),
            )
            .map_err(|e| self.sql(e))
    }

    /// What `key` was charged in money for the records that ended in `[from, to)`.
    pub fn key_cost_spent(&self, key: &str, from: f64, to: f64) -> Result<f64, StoreError> {
        self.conn
            .query_row(
                "SELECT TOTAL(key_cost) FROM inference WHERE key = ?1 AND end >= ?2 AND end < ?3",
                params![key, from, to],
                |row| row.get(0),
            )
            .map_err(|e| self.sql(e))
    }

    /// The records `q` selects, grouped by `group`, scope and currency, groups in order.
    pub fn usage(&self, q: &UsageQuery, group: Group) -> Result<Usage, StoreError> {
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT end, key, client, model, scope, prompt_tokens, completion_tokens,
                        energy_joules, net_energy_joules, key_joules, currency, cost, key_cost,
                        carbon_g
                 FROM inference
                 WHERE end >= ?1 AND end < ?2
                   AND (?3 IS NULL OR key = ?3) AND (?4 IS NULL OR client = ?4)
                   AND (?5 IS NULL OR model = ?5)
                 ORDER BY end DESC LIMIT ?6",
            )
            .map_err(|e| self.sql(e))?;
        let limit = i64::try_from(MAX_USAGE_RECORDS + 1).unwrap_or(i64::MAX);
        let mut rows = stmt
            .query(params![q.from, q.to, q.key, q.client, q.model, limit])
            .map_err(|e| self.sql(e))?;
        let mut groups: BTreeMap<(String, String, Option<String>), UsageRow> = BTreeMap::new();
        let mut read = 0usize;
        let mut truncated = false;
        while let Some(row) = rows.next().map_err(|e| self.sql(e))? {
            if read == MAX_USAGE_RECORDS {
                truncated = true;
                break;
            }
            read += 1;
            let end: f64 = row.get(0).map_err(|e| self.sql(e))?;
            let text = |k: usize| row.get::<_, Option<String>>(k);
            let label = match group {
                Group::Day => Period::Day.label(end),
                Group::Week => Period::Week.label(end),
                Group::Month => Period::Month.label(end),
                Group::Key => text(1).map_err(|e| self.sql(e))?,
                Group::Client => text(2).map_err(|e| self.sql(e))?,
                Group::Model => text(3).map_err(|e| self.sql(e))?,
                Group::All => Some("all".to_string()),
            }
            .unwrap_or_default();
            let scope = text(4).map_err(|e| self.sql(e))?.unwrap_or_default();
            let tokens = |k: usize| {
                row.get::<_, Option<i64>>(k)
                    .map(|n| n.and_then(|n| u64::try_from(n).ok()).unwrap_or(0))
            };
            let joules = |k: usize| row.get::<_, Option<f64>>(k);
            let prompt = tokens(5).map_err(|e| self.sql(e))?;
            let completion = tokens(6).map_err(|e| self.sql(e))?;
            let energy = joules(7).map_err(|e| self.sql(e))?;
            let net = joules(8).map_err(|e| self.sql(e))?;
            let charged = joules(9).map_err(|e| self.sql(e))?;
            let currency = text(10).map_err(|e| self.sql(e))?;
            let cost = joules(11).map_err(|e| self.sql(e))?;
            let key_cost = joules(12).map_err(|e| self.sql(e))?;
            let carbon = joules(13).map_err(|e| self.sql(e))?;
            let g = groups
                .entry((label.clone(), scope.clone(), currency.clone()))
                .or_insert_with(|| UsageRow {
                    group: label,
                    scope: super::scopes::from_text(&scope),
                    currency,
                    ..UsageRow::default()
                });
            g.cost += cost.unwrap_or(0.0);
            g.key_cost += key_cost.unwrap_or(0.0);
            g.carbon_g += carbon.unwrap_or(0.0);
            g.requests += 1;
            g.prompt_tokens = g.prompt_tokens.saturating_add(prompt);
            g.completion_tokens = g.completion_tokens.saturating_add(completion);
            match energy {
                Some(e) => g.energy_joules += e,
                None => g.unmeasured += 1,
            }
            g.net_energy_joules += net.unwrap_or(0.0);
            g.key_joules += charged.unwrap_or(0.0);
        }
        Ok(Usage {
            rows: groups.into_values().collect(),
            truncated,
        })
    }
}

#[cfg(test)]
mod tests;
