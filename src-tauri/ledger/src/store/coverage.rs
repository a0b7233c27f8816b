//! What LLM energy covers, in the ledger (v17): each inference record, model server window, idle
//! baseline and resident set's baseline keeps the scope of its energy and the parts it covers,
//! and a model server's sums are kept per scope, so that joules of the wall and of the CPU
//! package are never added.
//!
//! - `scope`: `wall`, `system`, `components`, or NULL where not known; `covers`: the parts,
//!   comma-separated (`cpu-package,dram`), NULL for none.
//! - `server_totals` is keyed by `(server, model, scope, covers)` (a server's own share of a GPU
//!   is other parts than the headline's) and `inference_models` by `(model, scope)`, the scope
//!   and parts `''` where not known. Rows from before did not say what their
//!   energy covered: they keep the empty scope, never guessed.
//! - Samples already keep their scope (v12): intervals read back from them carry it, without
//!   the parts. An idle baseline kept before v17 takes the scope most of the samples of its
//!   span still kept had (samples are kept a day); an older one stays unknown, and nets nothing
//!   until it is taken again.

use wattbar_core::{Coverage, Scope};

pub(super) const MIGRATION: &str = r#"
ALTER TABLE inference ADD COLUMN scope TEXT;
ALTER TABLE inference ADD COLUMN covers TEXT;
ALTER TABLE server_windows ADD COLUMN scope TEXT;
ALTER TABLE server_windows ADD COLUMN covers TEXT;
ALTER TABLE inference_baseline ADD COLUMN scope TEXT;
ALTER TABLE inference_baseline ADD COLUMN covers TEXT;
ALTER TABLE resident_baselines ADD COLUMN scope TEXT;
ALTER TABLE resident_baselines ADD COLUMN covers TEXT;
CREATE TABLE server_totals_v17 (server TEXT NOT NULL, model TEXT NOT NULL, scope TEXT NOT NULL,
                                covers TEXT NOT NULL, prompt_tokens REAL NOT NULL,
                                completion_tokens REAL NOT NULL, energy_joules REAL NOT NULL,
                                PRIMARY KEY (server, model, scope, covers));
INSERT INTO server_totals_v17
  SELECT server, model, '', '', prompt_tokens, completion_tokens, energy_joules
  FROM server_totals;
DROP TABLE server_totals;
ALTER TABLE server_totals_v17 RENAME TO server_totals;
CREATE TABLE inference_models_v17 (
    model TEXT NOT NULL, scope TEXT NOT NULL, requests INTEGER NOT NULL, ok INTEGER NOT NULL,
    cancelled INTEGER NOT NULL, error INTEGER NOT NULL, remote INTEGER NOT NULL,
    partial INTEGER NOT NULL, prompt_tokens INTEGER NOT NULL, completion_tokens INTEGER NOT NULL,
    energy_joules REAL NOT NULL, last REAL NOT NULL,
    jpt_joules REAL NOT NULL, jpt_tokens REAL NOT NULL, net_joules REAL NOT NULL,
    net_tokens REAL NOT NULL, tps REAL NOT NULL, tps_n REAL NOT NULL,
    eff_tokens REAL NOT NULL, eff_joules REAL NOT NULL, PRIMARY KEY (model, scope));
INSERT INTO inference_models_v17
  SELECT model, '', requests, ok, cancelled, error, remote, partial, prompt_tokens,
         completion_tokens, energy_joules, last, jpt_joules, jpt_tokens, net_joules, net_tokens,
         tps, tps_n, eff_tokens, eff_joules
  FROM inference_models;
DROP TABLE inference_models;
ALTER TABLE inference_models_v17 RENAME TO inference_models;
UPDATE inference_baseline SET scope = (
  SELECT s.scope FROM samples s
  WHERE s.t BETWEEN inference_baseline.from_t AND inference_baseline.to_t AND s.scope != ''
  GROUP BY s.scope ORDER BY COUNT(*) DESC LIMIT 1);
UPDATE resident_baselines SET scope = (
  SELECT s.scope FROM samples s
  WHERE s.t BETWEEN resident_baselines.from_t AND resident_baselines.to_t AND s.scope != ''
  GROUP BY s.scope ORDER BY COUNT(*) DESC LIMIT 1);
"#;

/// A scope as stored: its name, NULL where not known.
pub(super) fn scope_column(scope: Option<Scope>) -> Option<&'static str> {
    scope.map(Scope::as_str)
}

/// Parts as stored: comma-separated, NULL for none.
pub(super) fn covers_column(covers: &[String]) -> Option<String> {
    (!covers.is_empty()).then(|| covers.join(","))
}

/// A stored scope; NULL, empty or unknown (a newer build's) is `None`.
pub(super) fn scope_of(text: Option<String>) -> Option<Scope> {
    text.as_deref().and_then(super::scopes::from_text)
}

/// Stored parts; NULL is none.
pub(super) fn covers_of(text: Option<String>) -> Vec<String> {
    text.map(|t| {
        t.split(',')
            .filter(|p| !p.is_empty())
            .map(str::to_string)
            .collect()
    })
    .unwrap_or_default()
}

/// A stored coverage: `None` where the scope is not known.
pub(super) fn coverage_of(scope: Option<String>, covers: Option<String>) -> Option<Coverage> {
    Some(Coverage {
        scope: scope_of(scope)?,
        covers: covers_of(covers),
    })
}

/// The `(scope, covers)` columns of `coverage`.
pub(super) fn columns(coverage: Option<&Coverage>) -> (Option<&'static str>, Option<String>) {
    (
        scope_column(coverage.map(|c| c.scope)),
        coverage.and_then(|c| covers_column(&c.covers)),
    )
}
