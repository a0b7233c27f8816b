//! Daily and monthly budgets, in kWh or money. Crossing one gives an alert once per period
//! (the period's key is stored, so a restart does not repeat it).
//!
//! A budget is one figure, so it counts the machine's energy across scopes
//! ([`AcrossScopes`](wattbar_ledger::store::AcrossScopes)): a day split between the plug and the
//! sensors reaches its budget as a day on one of them would.

use serde::Serialize;
use wattbar_core::Preferences;
use wattbar_ledger::ledger::{Ledger, LedgerTotals};

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BudgetAlert {
    /// `daily-kwh`, `daily-cost`, `monthly-kwh` or `monthly-cost`.
    pub kind: &'static str,
    pub limit: f64,
    pub used: f64,
    /// What the notification says.
    pub message: String,
}

/// The budgets as a stage: it observes the totals after each batch written, and keeps the
/// alerts it gave last.
#[derive(Debug, Default)]
pub struct Budgets {
    alerts: Vec<BudgetAlert>,
    /// Increases with each new set of alerts.
    seq: u64,
}

impl Budgets {
    /// Alerts for budgets `totals` crossed at `now`, each once per local day or month: the
    /// ledger marks each as given.
    pub fn observe(
        &mut self,
        totals: &LedgerTotals,
        now: f64,
        prefs: &Preferences,
        ledger: &mut Ledger,
    ) {
        let (day, month) = wattbar_ledger::store::local_day_month(now);
        let mut fresh = Vec::new();
        for alert in crossed(prefs, totals) {
            let period = if alert.kind.starts_with("daily") {
                &day
            } else {
                &month
            };
            match ledger.first_alert(&format!("{}:{period}", alert.kind), now) {
                Ok(true) => fresh.push(alert),
                Ok(false) => {}
                Err(e) => tracing::warn!("could not record a budget alert: {e}"),
            }
        }
        if !fresh.is_empty() {
            for a in &fresh {
                tracing::info!("{}", a.message);
            }
            self.alerts = fresh;
            self.seq += 1;
        }
    }

    pub fn alerts(&self) -> &[BudgetAlert] {
        &self.alerts
    }

    pub fn seq(&self) -> u64 {
        self.seq
    }
}

/// Budgets crossed by these totals. `day` and `month` name the current local periods.
pub fn crossed(prefs: &Preferences, totals: &LedgerTotals) -> Vec<BudgetAlert> {
    let currency = prefs.currency.as_str();
    let (today, month) = (totals.today.across_scopes(), totals.month.across_scopes());
    let checks = [
        (
            "daily-kwh",
            prefs.daily_budget_kwh,
            today.kwh,
            "today",
            "kWh",
        ),
        (
            "daily-cost",
            prefs.daily_budget_cost,
            today.cost,
            "today",
            currency,
        ),
        (
            "monthly-kwh",
            prefs.monthly_budget_kwh,
            month.kwh,
            "this month",
            "kWh",
        ),
        (
            "monthly-cost",
            prefs.monthly_budget_cost,
            month.cost,
            "this month",
            currency,
        ),
    ];
    checks
        .into_iter()
        .filter_map(|(kind, limit, used, when, unit)| {
            let limit = limit?;
            (used >= limit).then(|| BudgetAlert {
                kind,
                limit,
                used,
                message: format!(
                    "Budget reached: {used:.3} {unit} used {when}, of {limit} {unit}."
                ),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use wattbar_ledger::store::Total;

    fn totals(today_kwh: f64, month_cost: f64) -> LedgerTotals {
        LedgerTotals {
            today: Total {
                joules: today_kwh * 3.6e6,
                kwh: today_kwh,
                ..Total::default()
            },
            month: Total {
                cost: month_cost,
                ..Total::default()
            },
            lifetime: Total::default(),
        }
    }

    #[test]
    fn only_the_budgets_set_and_reached_give_alerts() {
        let prefs = Preferences {
            daily_budget_kwh: Some(2.0),
            monthly_budget_cost: Some(30.0),
            ..Preferences::default()
        };
        assert!(crossed(&prefs, &totals(1.99, 29.0)).is_empty());
        let alerts = crossed(&prefs, &totals(2.0, 31.0));
        let kinds: Vec<&str> = alerts.iter().map(|a| a.kind).collect();
        assert_eq!(kinds, ["daily-kwh", "monthly-cost"]);
        assert_eq!(
            alerts[1].message,
            "Budget reached: 31.000 EUR used this month, of 30 EUR."
        );
        assert!(crossed(&Preferences::default(), &totals(100.0, 100.0)).is_empty());
    }
}
