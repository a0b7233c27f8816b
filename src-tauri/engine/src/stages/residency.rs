//! What the models a server holds cost: each interval goes to [`Residency`] with the set the
//! proxy last read, and the costs readers see are rebuilt then. What low-power mode unloaded is
//! said once, as a low-power event ([`unload_message`]).
//!
//! Rule: nothing is done (no local-day lookup, no rebuild) until the proxy has read a set once:
//! a machine without a model server pays nothing for this.

use std::sync::Arc;
use wattbar_core::inference::resident::{
    Loaded, Residency, ResidencyInterval, ResidentCost, ResidentDay, SetBaseline, Unload,
};
use wattbar_core::inference::Interval;

/// The stage: the residency ledger of loaded sets and the costs readers see.
pub(crate) struct Resident {
    residency: Residency,
    /// The proxy had read the loaded models at the last sample.
    followed: bool,
    /// What each resident model costs, as of the last sample.
    costs: Arc<[ResidentCost]>,
}

/// What an interval changed, for the ledger.
pub(crate) struct Changed {
    pub sets: Vec<SetBaseline>,
    pub days: Vec<ResidentDay>,
}

impl Resident {
    pub fn new(residency: Residency, price_per_kwh: f64) -> Self {
        // What the store kept is shown from the start, before the proxy reads the loaded models.
        let costs = Arc::from(residency.costs(price_per_kwh));
        Resident {
            residency,
            followed: false,
            costs,
        }
    }

    /// Observes `interval` (ended at the latest sample), with the models the server holds
    /// (`loaded`, where the proxy read them), `busy`: a request was in flight during it, and the
    /// price in force. What it changed comes back for the ledger.
    pub fn observe(
        &mut self,
        interval: &Interval,
        loaded: Option<&[Loaded]>,
        busy: bool,
        price_per_kwh: f64,
    ) -> Option<Changed> {
        if loaded.is_none() && !self.followed {
            return None;
        }
        self.followed = loaded.is_some();
        let (day, _) = wattbar_ledger::store::local_day_month(interval.unix_end);
        self.residency.push(ResidencyInterval {
            interval,
            loaded,
            busy,
            day: &day,
            price_per_kwh,
        });
        let (sets, days) = self.residency.take_changes();
        self.costs = Arc::from(self.residency.costs(price_per_kwh));
        (!sets.is_empty() || !days.is_empty()).then_some(Changed { sets, days })
    }

    /// What each resident model costs, for readers.
    pub fn costs(&self) -> Arc<[ResidentCost]> {
        Arc::clone(&self.costs)
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
