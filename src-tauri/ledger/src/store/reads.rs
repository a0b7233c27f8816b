//! What readers ask of the ledger: totals by calendar and lifetime, sessions, history and the
//! last low-power state.

use super::{
    local_day_month, scopes, CostRow, HistoryPoint, SessionRecord, Step, Store, StoreError, Total,
};
use rusqlite::{params, OptionalExtension};
use wattbar_core::Scope;

impl Store {
    /// The last recorded low-power state; off when none was ever recorded.
    pub fn low_power(&self) -> Result<wattbar_core::LowPowerState, StoreError> {
        let row: Option<(f64, bool, String)> = self
            .conn
            .query_row(
                "SELECT t, enabled, reason FROM low_power ORDER BY id DESC LIMIT 1",
                [],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .optional()
            .map_err(|e| self.sql(e))?;
        Ok(match row {
            Some((t, enabled, reason)) => wattbar_core::LowPowerState {
                enabled,
                since: Some(t),
                reason: wattbar_core::Reason::parse(&reason),
            },
            None => wattbar_core::LowPowerState::off(),
        })
    }

    /// Lifetime headline energy in `scope`, its cost in `currency`, other currencies and scopes
    /// listed apart.
    pub fn lifetime(&self, currency: &str, scope: Option<Scope>) -> Result<Total, StoreError> {
        let mut rows: Vec<CostRow> = self
            .lifetime_by_scope()?
            .into_iter()
            .map(|(s, joules)| (s, String::new(), joules, 0.0))
            .collect();
        // Money from the months' rows: energy is already counted above.
        rows.extend(self.cost_rows(
            &format!(
                "SELECT {}, currency, 0.0, SUM(cost) FROM monthly GROUP BY 1, currency
                     ORDER BY 1, currency",
                self.scope_column()
            ),
            None,
        )?);
        Ok(Total::new(rows, scope, currency))
    }

    /// `(scope, currency, joules, cost)` rows of a query that takes `key` as its one parameter,
    /// if any.
    fn cost_rows(&self, sql: &str, key: Option<&str>) -> Result<Vec<CostRow>, StoreError> {
        let mut stmt = self.conn.prepare_cached(sql).map_err(|e| self.sql(e))?;
        let map = |r: &rusqlite::Row<'_>| {
            Ok((
                scopes::from_text(&r.get::<_, String>(0)?),
                r.get(1)?,
                r.get(2)?,
                r.get(3)?,
            ))
        };
        let rows = match key {
            Some(k) => stmt.query_map(params![k], map),
            None => stmt.query_map([], map),
        }
        .map_err(|e| self.sql(e))?;
        rows.collect::<Result<Vec<_>, _>>().map_err(|e| self.sql(e))
    }

    /// Lifetime joules per breakdown domain (cpu, gpu, wall, …); the headline's is
    /// [`lifetime_by_scope`](Self::lifetime_by_scope).
    pub fn lifetime_by_domain(&self) -> Result<Vec<(String, f64)>, StoreError> {
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT domain, joules FROM lifetime WHERE domain != 'system' ORDER BY domain",
            )
            .map_err(|e| self.sql(e))?;
        let rows = stmt
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .map_err(|e| self.sql(e))?;
        rows.collect::<Result<Vec<_>, _>>().map_err(|e| self.sql(e))
    }

    pub fn day(
        &self,
        unix: f64,
        currency: &str,
        scope: Option<Scope>,
    ) -> Result<Total, StoreError> {
        let (day, _) = local_day_month(unix);
        Ok(self
            .recorded_day(&day, currency, scope)?
            .unwrap_or_else(|| Total::new(Vec::new(), scope, currency)))
    }

    /// The local day `day` (`YYYY-MM-DD`), or `None` when nothing was recorded that day.
    pub fn recorded_day(
        &self,
        day: &str,
        currency: &str,
        scope: Option<Scope>,
    ) -> Result<Option<Total>, StoreError> {
        let total = self.calendar("daily", "day", day, currency, scope)?;
        Ok(total.1.then_some(total.0))
    }

    pub fn month(
        &self,
        unix: f64,
        currency: &str,
        scope: Option<Scope>,
    ) -> Result<Total, StoreError> {
        let (_, month) = local_day_month(unix);
        Ok(self
            .calendar("monthly", "month", &month, currency, scope)?
            .0)
    }

    /// The calendar total of `table` where `key` is `value`, and whether any row was recorded.
    fn calendar(
        &self,
        table: &str,
        key: &str,
        value: &str,
        currency: &str,
        scope: Option<Scope>,
    ) -> Result<(Total, bool), StoreError> {
        let rows = self.cost_rows(
            &format!(
                "SELECT {}, currency, joules, cost FROM {table} WHERE {key} = ?1
                 ORDER BY 1, currency",
                self.scope_column()
            ),
            Some(value),
        )?;
        let recorded = !rows.is_empty();
        Ok((Total::new(rows, scope, currency), recorded))
    }

    /// When the first session began, Unix seconds: where the lifetime totals start. The first
    /// by id, not the earliest start, so that a wall clock set back later cannot move it.
    pub fn first_session_start(&self) -> Result<Option<f64>, StoreError> {
        self.conn
            .query_row("SELECT start FROM sessions ORDER BY id LIMIT 1", [], |r| {
                r.get(0)
            })
            .optional()
            .map_err(|e| self.sql(e))
    }

    /// The time of the newest sample kept (samples are kept a day), Unix seconds.
    pub fn newest_sample(&self) -> Result<Option<f64>, StoreError> {
        self.conn
            .query_row("SELECT MAX(t) FROM samples", [], |r| r.get(0))
            .map_err(|e| self.sql(e))
    }

    /// The newest session, running or not.
    pub fn latest_session(&self) -> Result<Option<SessionRecord>, StoreError> {
        let id: Option<i64> = self
            .conn
            .query_row("SELECT MAX(id) FROM sessions", [], |r| r.get(0))
            .map_err(|e| self.sql(e))?;
        match id {
            Some(id) => self.session(id),
            None => Ok(None),
        }
    }

    /// A session as stored.
    pub fn session(&self, id: i64) -> Result<Option<SessionRecord>, StoreError> {
        self.conn
            .query_row(
                "SELECT start, end, joules, cost, currency FROM sessions WHERE id = ?1",
                params![id],
                |r| {
                    Ok(SessionRecord {
                        start: r.get(0)?,
                        end: r.get(1)?,
                        joules: r.get(2)?,
                        cost: r.get(3)?,
                        currency: r.get(4)?,
                    })
                },
            )
            .optional()
            .map_err(|e| self.sql(e))
    }

    /// `(t, mean watts, max watts, joules)` buckets in `[from, to)`, oldest first.
    pub fn history(&self, from: f64, to: f64, step: Step) -> Result<Vec<HistoryPoint>, StoreError> {
        let mut stmt = self
            .conn
            .prepare_cached(&format!(
                "SELECT t, n, sum_watts, max_watts, joules, {} FROM {} WHERE t >= ?1 AND t < ?2
                 ORDER BY t, 6",
                self.scope_column(),
                step.table()
            ))
            .map_err(|e| self.sql(e))?;
        let rows = stmt
            .query_map(params![from.floor() as i64, to.ceil() as i64], |r| {
                let n: i64 = r.get(1)?;
                let sum: f64 = r.get(2)?;
                Ok(HistoryPoint {
                    t: r.get::<_, i64>(0)? as f64,
                    mean_watts: (n > 0).then(|| sum / n as f64),
                    max_watts: r.get(3)?,
                    joules: r.get(4)?,
                    scope: scopes::from_text(&r.get::<_, String>(5)?),
                })
            })
            .map_err(|e| self.sql(e))?;
        rows.collect::<Result<Vec<_>, _>>().map_err(|e| self.sql(e))
    }
}
