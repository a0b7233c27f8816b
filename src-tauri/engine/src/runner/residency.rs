//! Following the models a server holds: each interval goes to [`Residency`] with the set the
//! proxy last read; the costs readers see are rebuilt then. What low-power mode unloaded is
//! recorded and said once, as a low-power event.
//!
//! Rule: nothing is done (no local-day lookup, no rebuild) until the proxy has read a set once:
//! a machine without a model server pays nothing for this.

use super::Engine;
use crate::recorder::Write;
use std::sync::Arc;
use wattbar_core::inference::resident::{Step, Unload};
use wattbar_core::inference::Interval;

impl Engine {
    /// Hands `interval` (ended at the latest sample) to residency; `busy`: a request was in
    /// flight during it.
    pub(super) fn follow_residency(&mut self, interval: &Interval, busy: bool, week_seconds: f64) {
        let now = self.clock.elapsed();
        let loaded = self.inference.requests.loaded(now);
        let resident = &mut self.resident;
        if loaded.is_none() && !resident.followed {
            return;
        }
        resident.followed = loaded.is_some();
        let (day, _) = wattbar_ledger::store::local_day_month(interval.unix_end);
        let price = self.meter.accounting.price_per_kwh(week_seconds);
        resident.residency.push(Step {
            interval,
            loaded,
            busy,
            day: &day,
            price_per_kwh: price,
        });
        let (sets, days) = resident.residency.take_changes();
        if !sets.is_empty() || !days.is_empty() {
            self.recorder.write(Write::Residency { sets, days });
        }
        resident.costs = Arc::from(resident.residency.costs(price));
    }

    /// Records an unload the proxy reported and says it once.
    pub(super) fn unloaded(&mut self, u: &Unload) {
        self.recorder.write(Write::Unload(u.clone()));
        self.low_power.announce(unload_message(u));
    }
}

/// One sentence for a notification.
pub(crate) fn unload_message(u: &Unload) -> String {
    let list = |v: &[String]| v.join(", ");
    let mut said = match (u.unloaded.is_empty(), &u.error) {
        (false, _) => format!(
            "Low-power mode unloaded {} from {}",
            list(&u.unloaded),
            u.server
        ),
        (true, Some(_)) => format!("Low-power mode could not unload models from {}", u.server),
        (true, None) => format!("Low-power mode: no idle model to unload at {}", u.server),
    };
    if !u.kept.is_empty() {
        said.push_str(&format!("; kept {} (a request is using it)", list(&u.kept)));
    }
    if let Some(e) = &u.error {
        said.push_str(&format!(": {e}"));
    }
    said.push('.');
    said
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unload_is_said_in_one_sentence_naming_what_was_kept_and_why() {
        let u = Unload {
            t: 0.0,
            server: "http://127.0.0.1:11434".into(),
            unloaded: vec!["gemma3:latest".into(), "qwen3:1b".into()],
            kept: vec!["llama3".into()],
            error: None,
        };
        assert_eq!(
            unload_message(&u),
            "Low-power mode unloaded gemma3:latest, qwen3:1b from http://127.0.0.1:11434; kept \
             llama3 (a request is using it)."
        );
        let failed = Unload {
            unloaded: Vec::new(),
            kept: Vec::new(),
            error: Some("it has no /api/ps".into()),
            ..u
        };
        assert_eq!(
            unload_message(&failed),
            "Low-power mode could not unload models from http://127.0.0.1:11434: it has no /api/ps."
        );
    }
}
