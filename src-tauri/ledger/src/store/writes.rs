//! What the engine writes: sessions, batches, pruning and alerts given; each write one
//! transaction. A batch holds everything the engine measured and decided since the last one:
//! samples and their rollups, the session's totals, the idle baseline, residency, energy per
//! program, inference records, unloads, low-power changes and the record ids reserved.

use super::batch::BatchSums;
use super::resident::BatchExtras;
use super::{
    domains, intervals, sql_at, Row, Step, Store, StoreError, MINUTES_KEEP_SECONDS,
    RAW_KEEP_SECONDS,
};
use rusqlite::params;

impl Store {
    /// Starts a session. Sessions a crash left open are ended, each by its id, at its last
    /// sample: the caller holds the data folder's lock, so no other engine is running them.
    pub fn start_session(&mut self, now_unix: f64, currency: &str) -> Result<i64, StoreError> {
        let path = self.path.clone();
        let tx = self.conn.transaction().map_err(|e| sql_at(&path, e))?;
        let id = (|| {
            end_orphans(&tx, None)?;
            tx.execute(
                "INSERT INTO sessions (start, currency) VALUES (?1, ?2)",
                params![now_unix, currency],
            )?;
            let id = tx.last_insert_rowid();
            tx.commit()?;
            Ok(id)
        })()
        .map_err(|e| sql_at(&path, e))?;
        Ok(id)
    }

    /// `wattbar-cli reset-session` with no engine running (the caller holds the lock): ends the
    /// sessions left open, each by id, and records an empty session from `now_unix`, so that the
    /// session reads 0 until an engine adds energy. Returns how many sessions were ended.
    pub fn reset_session(&mut self, now_unix: f64, currency: &str) -> Result<usize, StoreError> {
        let path = self.path.clone();
        let tx = self.conn.transaction().map_err(|e| sql_at(&path, e))?;
        let ended = (|| {
            let ended = end_orphans(&tx, Some(now_unix))?;
            tx.execute(
                "INSERT INTO sessions (start, end, currency) VALUES (?1, ?1, ?2)",
                params![now_unix, currency],
            )?;
            tx.commit()?;
            Ok(ended)
        })()
        .map_err(|e| sql_at(&path, e))?;
        Ok(ended)
    }

    /// True when session `id` has been ended, by this process or another.
    pub fn session_ended(&self, id: i64) -> Result<bool, StoreError> {
        Ok(self.session(id)?.is_some_and(|s| s.end.is_some()))
    }

    pub fn end_session(&mut self, id: i64, now_unix: f64) -> Result<(), StoreError> {
        self.conn
            .execute(
                "UPDATE sessions SET end = ?2 WHERE id = ?1",
                params![id, now_unix],
            )
            .map_err(|e| self.sql(e))?;
        Ok(())
    }

    /// Writes one batch in one transaction: raw samples, rollups, lifetime, calendar totals and
    /// the running session's totals.
    pub fn write_batch(
        &mut self,
        session_id: i64,
        rows: &[Row],
        session_joules: f64,
        session_cost: f64,
    ) -> Result<(), StoreError> {
        self.write_batch_with(
            session_id,
            rows,
            session_joules,
            session_cost,
            &BatchExtras::default(),
        )
    }

    /// [`write_batch`](Self::write_batch), with a new idle baseline and the residency rows in
    /// the same transaction (one commit, not several).
    pub fn write_batch_with(
        &mut self,
        session_id: i64,
        rows: &[Row],
        session_joules: f64,
        session_cost: f64,
        also: &BatchExtras<'_>,
    ) -> Result<(), StoreError> {
        let path = self.path.clone();
        let mut tx = self.conn.transaction().map_err(|e| sql_at(&path, e))?;
        let result = (|| {
            let mut sample = tx.prepare_cached(
                "INSERT INTO samples (t, watts, joules, scope, start, quality, method,
                                      answer_period, answered_watts, by_domain)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
            )?;
            let rollup_sql = |table: &str| {
                format!(
                    "INSERT INTO {table} (t, scope, n, sum_watts, max_watts, joules)
                     VALUES (?1, ?6, ?2, ?3, ?4, ?5)
                     ON CONFLICT(t, scope) DO UPDATE SET n = n + ?2, sum_watts = sum_watts + ?3,
                       max_watts = CASE WHEN ?4 IS NULL THEN max_watts
                                        WHEN max_watts IS NULL OR ?4 > max_watts THEN ?4
                                        ELSE max_watts END,
                       joules = joules + ?5"
                )
            };
            let mut minute = tx.prepare_cached(&rollup_sql("minutes"))?;
            let mut hour = tx.prepare_cached(&rollup_sql("hours"))?;
            let mut domain_minute = tx.prepare_cached(&domains::upsert_sql(Step::Minute))?;
            let mut domain_hour = tx.prepare_cached(&domains::upsert_sql(Step::Hour))?;
            let mut lifetime = tx.prepare_cached(
                "INSERT INTO lifetime (domain, joules) VALUES (?1, ?2)
                 ON CONFLICT(domain) DO UPDATE SET joules = joules + ?2",
            )?;
            let mut headline = tx.prepare_cached(
                "INSERT INTO lifetime_scopes (scope, joules) VALUES (?1, ?2)
                 ON CONFLICT(scope) DO UPDATE SET joules = joules + ?2",
            )?;
            let mut daily = tx.prepare_cached(
                "INSERT INTO daily (day, scope, currency, joules, cost) VALUES (?1, ?5, ?4, ?2, ?3)
                 ON CONFLICT(day, scope, currency)
                 DO UPDATE SET joules = joules + ?2, cost = cost + ?3",
            )?;
            let mut monthly = tx.prepare_cached(
                "INSERT INTO monthly (month, scope, currency, joules, cost)
                 VALUES (?1, ?5, ?4, ?2, ?3)
                 ON CONFLICT(month, scope, currency)
                 DO UPDATE SET joules = joules + ?2, cost = cost + ?3",
            )?;
            for row in rows {
                let scope = row.scope.map(wattbar_core::Scope::as_str);
                // No measured interval is stored as one of no length, so that NULL keeps
                // meaning a row written before intervals were (see `Store::intervals`).
                let start = row.start.filter(|s| *s <= row.t).unwrap_or(row.t);
                sample.execute(params![
                    row.t,
                    row.watts,
                    row.joules,
                    scope,
                    start,
                    row.quality.map(wattbar_core::Quality::as_str),
                    row.method.map(wattbar_core::meter::Method::as_str),
                    row.answered.map(|a| a.period_seconds),
                    row.answered.map(|a| a.watts),
                    intervals::domains_text(&row.by_domain),
                ])?;
            }
            // Each rollup row once per batch, whatever the number of samples in it.
            let sums = BatchSums::of(rows);
            for (stmt, buckets) in [(&mut minute, &sums.minutes), (&mut hour, &sums.hours)] {
                for ((bucket, scope), b) in buckets {
                    stmt.execute(params![
                        bucket,
                        b.n,
                        b.sum_watts,
                        b.max_watts,
                        b.joules,
                        scope
                    ])?;
                }
            }
            for (stmt, buckets) in [
                (&mut domain_minute, &sums.domain_minutes),
                (&mut domain_hour, &sums.domain_hours),
            ] {
                for ((bucket, domain), (joules, seconds)) in buckets {
                    stmt.execute(params![bucket, domain, joules, seconds])?;
                }
            }
            for (domain, joules) in &sums.lifetime {
                lifetime.execute(params![domain, joules])?;
            }
            for (scope, joules) in &sums.headline {
                headline.execute(params![scope, joules])?;
            }
            for ((day, scope, currency), (joules, cost)) in &sums.daily {
                daily.execute(params![day, joules, cost, currency, scope])?;
            }
            for ((month, scope, currency), (joules, cost)) in &sums.monthly {
                monthly.execute(params![month, joules, cost, currency, scope])?;
            }
            drop((sample, minute, hour, domain_minute, domain_hour));
            drop((lifetime, headline, daily, monthly));
            tx.prepare_cached("UPDATE sessions SET joules = ?2, cost = ?3 WHERE id = ?1")?
                .execute(params![session_id, session_joules, session_cost])?;
            if let Some(b) = also.baseline {
                super::inference::put_baseline(&tx, b)?;
            }
            super::resident::put(&tx, also)?;
            if let Some(rows) = also.program_hours {
                super::programs::put(&tx, rows)?;
            }
            for r in also.records {
                let record = tx.savepoint()?;
                match super::inference::put_record(&record, r) {
                    Ok(()) => record.commit()?,
                    Err(e) => tracing::error!(id = r.id, "an inference record was refused: {e}"),
                }
            }
            for key in also.key_refusals {
                super::keys::count_refused(&tx, key)?;
            }
            for u in also.unloads {
                super::resident::put_unload(&tx, u)?;
            }
            for (state, message) in also.low_power {
                put_low_power(&tx, state, message)?;
            }
            for change in also.scope_changes {
                super::scopes::put_change(&tx, change)?;
            }
            if let Some(l) = also.calibration {
                super::calibration::put(&tx, l)?;
            }
            for day in also.battery_days {
                super::battery::put(&tx, day)?;
            }
            for (day, worn) in also.wear {
                super::wear::put(&tx, day, worn)?;
            }
            super::server_windows::put(&tx, also.server_windows)?;
            super::feeds::put_costs(&tx, &super::feeds::sum(rows))?;
            super::money::put(&tx, rows)?;
            super::feeds::put_slots(&tx, also.feed_slots)?;
            for profile in also.profiles {
                super::profiles::put(&tx, profile)?;
            }
            if let Some(through) = also.reserve_ids_through {
                super::inference::put_reserved_ids(&tx, through)?;
            }
            tx.commit()
        })();
        result.map_err(|e| sql_at(&path, e))
    }

    /// Drops raw samples older than 24 h and minute rollups older than 30 days.
    pub fn prune(&mut self, now_unix: f64) -> Result<(), StoreError> {
        let path = self.path.clone();
        let tx = self.conn.transaction().map_err(|e| sql_at(&path, e))?;
        tx.prepare_cached("DELETE FROM samples WHERE t < ?1")
            .and_then(|mut s| s.execute(params![now_unix - RAW_KEEP_SECONDS]))
            .and_then(|_| tx.prepare_cached("DELETE FROM minutes WHERE t < ?1"))
            .and_then(|mut s| s.execute(params![now_unix - MINUTES_KEEP_SECONDS]))
            .and_then(|_| tx.prepare_cached("DELETE FROM domain_minutes WHERE t < ?1"))
            .and_then(|mut s| s.execute(params![now_unix - MINUTES_KEEP_SECONDS]))
            .and_then(|_| super::programs::prune(&tx, now_unix))
            .and_then(|_| tx.commit())
            .map_err(|e| sql_at(&path, e))
    }

    /// Records that the alert `key` was given; false when it already had been.
    pub fn mark_alert(&mut self, key: &str, now_unix: f64) -> Result<bool, StoreError> {
        let inserted = self
            .conn
            .execute(
                "INSERT OR IGNORE INTO alerts (key, at) VALUES (?1, ?2)",
                params![key, now_unix],
            )
            .map_err(|e| self.sql(e))?;
        Ok(inserted == 1)
    }

    /// Records a change of low-power mode at once, in its own transaction.
    pub fn record_low_power(
        &mut self,
        state: &wattbar_core::LowPowerState,
        message: &str,
    ) -> Result<(), StoreError> {
        put_low_power(&self.conn, state, message).map_err(|e| self.sql(e))
    }
}

/// Keeps one change of low-power mode; `conn` may be the batch's transaction.
fn put_low_power(
    conn: &rusqlite::Connection,
    state: &wattbar_core::LowPowerState,
    message: &str,
) -> rusqlite::Result<()> {
    let reason = state.reason.map(|r| r.as_str()).unwrap_or("manual");
    conn.prepare_cached(
        "INSERT INTO low_power (t, enabled, reason, message) VALUES (?1, ?2, ?3, ?4)",
    )?
    .execute(params![
        state.since.unwrap_or(0.0),
        state.enabled,
        reason,
        message
    ])?;
    Ok(())
}

/// Ends every session still open, one by one by id, at `at` or else at its last sample.
fn end_orphans(tx: &rusqlite::Transaction<'_>, at: Option<f64>) -> rusqlite::Result<usize> {
    let ids: Vec<i64> = tx
        .prepare("SELECT id FROM sessions WHERE end IS NULL")?
        .query_map([], |r| r.get(0))?
        .collect::<Result<_, _>>()?;
    for id in &ids {
        tx.execute(
            "UPDATE sessions SET end = COALESCE(?2, (SELECT MAX(t) FROM samples WHERE t >= start), start)
             WHERE id = ?1",
            params![id, at],
        )?;
    }
    Ok(ids.len())
}
