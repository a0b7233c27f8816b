//! Scopes in the ledger (v12): what the headline covered (`wall`, `system`, `components`) is kept
//! with every sample and rollup, so that energy of two scopes is never added, as money in two
//! currencies never is.
//!
//! - `samples.scope`; `minutes`, `hours`, `daily` and `monthly` are keyed by scope too; the
//!   headline's lifetime is `lifetime_scopes(scope, joules)`. Rows written before v12 did not
//!   say what they covered: they keep the empty scope, read as `None`, never guessed.
//! - `scope_changes(t, from_scope, to_scope)`: each change of the headline's scope (a plug
//!   added, unplugged or back), so that history can say when the figure began to mean another
//!   thing.

use super::{Store, StoreError};
use rusqlite::params;
use serde::Serialize;
use wattbar_core::Scope;

pub(super) const MIGRATION: &str = r#"
ALTER TABLE samples ADD COLUMN scope TEXT;
CREATE TABLE minutes_v12 (t INTEGER NOT NULL, scope TEXT NOT NULL, n INTEGER NOT NULL,
                          sum_watts REAL NOT NULL, max_watts REAL, joules REAL NOT NULL,
                          PRIMARY KEY (t, scope));
INSERT INTO minutes_v12 SELECT t, '', n, sum_watts, max_watts, joules FROM minutes;
DROP TABLE minutes;
ALTER TABLE minutes_v12 RENAME TO minutes;
CREATE TABLE hours_v12 (t INTEGER NOT NULL, scope TEXT NOT NULL, n INTEGER NOT NULL,
                        sum_watts REAL NOT NULL, max_watts REAL, joules REAL NOT NULL,
                        PRIMARY KEY (t, scope));
INSERT INTO hours_v12 SELECT t, '', n, sum_watts, max_watts, joules FROM hours;
DROP TABLE hours;
ALTER TABLE hours_v12 RENAME TO hours;
CREATE TABLE daily_v12 (day TEXT NOT NULL, scope TEXT NOT NULL, currency TEXT NOT NULL,
                        joules REAL NOT NULL, cost REAL NOT NULL, PRIMARY KEY (day, scope, currency));
INSERT INTO daily_v12 SELECT day, '', currency, joules, cost FROM daily;
DROP TABLE daily;
ALTER TABLE daily_v12 RENAME TO daily;
CREATE TABLE monthly_v12 (month TEXT NOT NULL, scope TEXT NOT NULL, currency TEXT NOT NULL,
                          joules REAL NOT NULL, cost REAL NOT NULL,
                          PRIMARY KEY (month, scope, currency));
INSERT INTO monthly_v12 SELECT month, '', currency, joules, cost FROM monthly;
DROP TABLE monthly;
ALTER TABLE monthly_v12 RENAME TO monthly;
CREATE TABLE lifetime_scopes (scope TEXT PRIMARY KEY, joules REAL NOT NULL);
INSERT INTO lifetime_scopes SELECT '', joules FROM lifetime WHERE domain = 'system';
DELETE FROM lifetime WHERE domain = 'system';
CREATE TABLE scope_changes (t REAL NOT NULL, from_scope TEXT NOT NULL, to_scope TEXT NOT NULL);
CREATE INDEX scope_changes_t ON scope_changes(t);
"#;

/// The first schema that keeps scopes.
const SINCE: i64 = 12;

/// How a scope is stored: its name, or empty for none.
pub fn to_text(scope: Option<Scope>) -> &'static str {
    scope.map_or("", Scope::as_str)
}

/// A stored scope; an empty or unknown one (a newer build's) is `None`.
pub fn from_text(text: &str) -> Option<Scope> {
    Scope::named(text)
}

/// One change of the headline's scope, at `t` (Unix seconds).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, serde::Deserialize)]
pub struct ScopeChange {
    pub t: f64,
    pub from: Scope,
    pub to: Scope,
}

impl Store {
    /// Whether this ledger keeps scopes: one written before v12 and opened read-only (so not
    /// migrated) does not; its figures all read as of no known scope.
    pub(super) fn keeps_scopes(&self) -> bool {
        self.version >= SINCE
    }

    /// The scope column of the calendar and rollup tables, as the open schema has it.
    pub(super) fn scope_column(&self) -> &'static str {
        if self.keeps_scopes() {
            "scope"
        } else {
            "''"
        }
    }

    /// The changes of scope in `[from, to)`, oldest first.
    pub fn scope_changes(&self, from: f64, to: f64) -> Result<Vec<ScopeChange>, StoreError> {
        if !self.keeps_scopes() {
            return Ok(Vec::new());
        }
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT t, from_scope, to_scope FROM scope_changes WHERE t >= ?1 AND t < ?2
                 ORDER BY t",
            )
            .map_err(|e| self.sql(e))?;
        let rows = stmt
            .query_map(params![from, to], |r| {
                Ok((
                    r.get::<_, f64>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                ))
            })
            .map_err(|e| self.sql(e))?;
        let mut changes = Vec::new();
        for row in rows {
            let (t, from, to) = row.map_err(|e| self.sql(e))?;
            if let (Some(from), Some(to)) = (from_text(&from), from_text(&to)) {
                changes.push(ScopeChange { t, from, to });
            }
        }
        Ok(changes)
    }

    /// The scope of the newest sample that had one, else of the newest hour (samples are kept a
    /// day), else the newest change's: what the headline covered when this ledger was last
    /// written.
    pub fn last_scope(&self) -> Result<Option<Scope>, StoreError> {
        if !self.keeps_scopes() {
            return Ok(None);
        }
        let text: Option<String> = self
            .conn
            .query_row(
                "SELECT COALESCE(
                   (SELECT scope FROM samples WHERE scope IS NOT NULL ORDER BY t DESC LIMIT 1),
                   (SELECT scope FROM hours WHERE scope != '' ORDER BY t DESC LIMIT 1),
                   (SELECT to_scope FROM scope_changes ORDER BY t DESC LIMIT 1))",
                [],
                |r| r.get(0),
            )
            .map_err(|e| self.sql(e))?;
        Ok(text.as_deref().and_then(from_text))
    }

    /// The headline's lifetime energy per scope (`None`: recorded before scopes were kept).
    pub fn lifetime_by_scope(&self) -> Result<Vec<(Option<Scope>, f64)>, StoreError> {
        let sql = if self.keeps_scopes() {
            "SELECT scope, joules FROM lifetime_scopes ORDER BY scope"
        } else {
            "SELECT '', joules FROM lifetime WHERE domain = 'system'"
        };
        let mut stmt = self.conn.prepare_cached(sql).map_err(|e| self.sql(e))?;
        let rows = stmt
            .query_map([], |r| {
                Ok((from_text(&r.get::<_, String>(0)?), r.get::<_, f64>(1)?))
            })
            .map_err(|e| self.sql(e))?;
        rows.collect::<Result<Vec<_>, _>>().map_err(|e| self.sql(e))
    }
}

/// Keeps one change of scope; `conn` is the batch's transaction.
pub(super) fn put_change(conn: &rusqlite::Connection, c: &ScopeChange) -> rusqlite::Result<()> {
    conn.prepare_cached("INSERT INTO scope_changes (t, from_scope, to_scope) VALUES (?1, ?2, ?3)")?
        .execute(params![c.t, c.from.as_str(), c.to.as_str()])?;
    Ok(())
}

#[cfg(test)]
mod tests;
