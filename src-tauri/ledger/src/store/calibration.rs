//! The line learned from the machine's parts to a whole-machine reference (v13):
//! `calibration`, one row, the newest fit: its offset and slope, R², the held-out errors, the
//! number of windows, the load range, the reference's scope, the parts it was learned on and
//! when. Written in the engine's batch; read at start, so a fit learned beside a plug still
//! stands in for it after a restart without one.

use super::{Store, StoreError};
use rusqlite::{params, Connection, OptionalExtension};
use wattbar_core::calibration::{Fit, Learned};
use wattbar_core::Scope;

pub(super) const MIGRATION: &str = r#"
CREATE TABLE calibration (id INTEGER PRIMARY KEY CHECK (id = 1), fitted REAL NOT NULL,
                          reference TEXT NOT NULL, covers TEXT NOT NULL,
                          offset_watts REAL NOT NULL, slope REAL NOT NULL, r2 REAL NOT NULL,
                          heldout_mape REAL NOT NULL, heldout_max_ape REAL NOT NULL,
                          windows INTEGER NOT NULL, components_min_watts REAL NOT NULL,
                          components_max_watts REAL NOT NULL);
"#;

/// The first schema that keeps a fit.
const SINCE: i64 = 13;

/// Keeps `l` as the newest fit; `conn` is the batch's transaction.
pub(super) fn put(conn: &Connection, l: &Learned) -> rusqlite::Result<()> {
    let f = &l.fit;
    conn.prepare_cached(
        "INSERT OR REPLACE INTO calibration (id, fitted, reference, covers, offset_watts, slope,
           r2, heldout_mape, heldout_max_ape, windows, components_min_watts, components_max_watts)
         VALUES (1, ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
    )?
    .execute(params![
        l.fitted_unix,
        l.reference.as_str(),
        l.covers.join(","),
        f.offset_watts,
        f.slope,
        f.r2,
        f.heldout_mape,
        f.heldout_max_ape,
        i64::try_from(f.windows).unwrap_or(i64::MAX),
        f.components_min_watts,
        f.components_max_watts,
    ])?;
    Ok(())
}

impl Store {
    /// The newest fit kept; `None` without one (or in a ledger from before fits were kept).
    pub fn calibration(&self) -> Result<Option<Learned>, StoreError> {
        if self.version < SINCE {
            return Ok(None);
        }
        let row = self
            .conn
            .query_row(
                "SELECT fitted, reference, covers, offset_watts, slope, r2, heldout_mape,
                        heldout_max_ape, windows, components_min_watts, components_max_watts
                 FROM calibration WHERE id = 1",
                [],
                |r| {
                    let reference: String = r.get(1)?;
                    let covers: String = r.get(2)?;
                    Ok((
                        r.get::<_, f64>(0)?,
                        reference,
                        covers,
                        Fit {
                            offset_watts: r.get(3)?,
                            slope: r.get(4)?,
                            r2: r.get(5)?,
                            heldout_mape: r.get(6)?,
                            heldout_max_ape: r.get(7)?,
                            windows: usize::try_from(r.get::<_, i64>(8)?).unwrap_or(0),
                            components_min_watts: r.get(9)?,
                            components_max_watts: r.get(10)?,
                        },
                    ))
                },
            )
            .optional()
            .map_err(|e| self.sql(e))?;
        Ok(row.and_then(|(fitted_unix, reference, covers, fit)| {
            Some(Learned {
                fit,
                reference: Scope::named(&reference)?,
                covers: covers
                    .split(',')
                    .filter(|c| !c.is_empty())
                    .map(String::from)
                    .collect(),
                fitted_unix,
            })
        }))
    }
}

#[cfg(test)]
mod tests {
    use crate::ledger::Ledger;
    use crate::store::{Store, DB_FILE};
    use wattbar_core::calibration::{Fit, Learned};
    use wattbar_core::Scope;

    #[test]
    fn the_newest_fit_survives_a_restart_field_for_field() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join(DB_FILE);
        let learned = |offset: f64, at: f64| Learned {
            fit: Fit {
                offset_watts: offset,
                slope: 1.6,
                r2: 0.98,
                heldout_mape: 0.012,
                heldout_max_ape: 0.03,
                windows: 14,
                components_min_watts: 9.5,
                components_max_watts: 88.0,
            },
            reference: Scope::Wall,
            covers: vec!["cpu-package".into(), "gpu:0".into()],
            fitted_unix: at,
        };
        let (mut ledger, _) =
            Ledger::open(&path, 1_700_000_000.0, "EUR").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(ledger.store().calibration().ok().flatten(), None);
        ledger.record_calibration(learned(24.0, 1_700_000_030.0));
        ledger.record_calibration(learned(25.0, 1_700_000_060.0));
        ledger
            .end(0.0, 0.0, 1_700_000_060.0)
            .unwrap_or_else(|e| panic!("{e}"));
        drop(ledger);
        let store = Store::open_read_only(&path).unwrap_or_else(|e| panic!("{e}"));
        // The newer of the two, as it was.
        assert_eq!(
            store.calibration().ok().flatten(),
            Some(learned(25.0, 1_700_000_060.0))
        );
    }
}
