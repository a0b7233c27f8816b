//! Daily and monthly budgets, in kWh or money. Crossing one gives an alert once per period
//! (the period's key is stored, so a restart does not repeat it).
//!
//! A budget is one figure, so it counts the machine's energy across scopes
//! ([`AcrossScopes`](wattbar_ledger::store::AcrossScopes)): a day split between the plug and the
//! sensors reaches its budget as a day on one of them would.

use serde::Serialize;
use wattbar_core::Preferences;
use wattbar_ledger::ledger::LedgerTotals;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BudgetAlert {
    /// `daily-kwh`, `daily-cost`, `monthly-kwh` or `monthly-cost`.
    pub kind: &'static str,
    pub limit: f64,
    pub used: f64,
    /// What the notification says.
    pub message: String,
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
