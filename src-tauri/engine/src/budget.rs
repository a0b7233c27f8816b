//! Daily and monthly budgets, in kWh or money. Crossing one gives an alert once per period
//! (the period's key is stored, so a restart does not repeat it).
//!
//! A proxy key's budget gives a soft alert once per window, when what it spent reaches
//! [`KEY_SOFT_SHARE`] of it (before its requests are refused), so that its user hears of it in
//! time.
//!
//! A budget is one figure, so it counts the machine's energy across scopes
//! ([`AcrossScopes`](wattbar_ledger::store::AcrossScopes)): a day split between the plug and the
//! sensors reaches its budget as a day on one of them would.

use crate::keys::KeyView;
use serde::Serialize;
use wattbar_core::Preferences;
use wattbar_ledger::ledger::{Ledger, LedgerTotals};

/// The share of a key's budget spent that gives its soft alert.
pub const KEY_SOFT_SHARE: f64 = 0.8;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BudgetAlert {
    /// `daily-kwh`, `daily-cost`, `monthly-kwh`, `monthly-cost`, `key-energy` or `key-money`.
    pub kind: &'static str,
    /// The proxy key, for `key-energy`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
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
        let wear = if prefs.budgets_count_wear {
            wear_of(ledger, &day, &month, prefs.currency.as_str())
        } else {
            Wear::default()
        };
        let mut fresh = Vec::new();
        for alert in crossed(prefs, totals, wear) {
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

    /// Soft alerts for the keys that spent [`KEY_SOFT_SHARE`] of their budget, each once per
    /// key and window: the ledger marks each as given.
    pub fn observe_keys(&mut self, keys: &[KeyView], now: f64, ledger: &mut Ledger) {
        let mut fresh = Vec::new();
        let budgets = keys.iter().flat_map(|k| {
            [
                (k, "key-energy", "", k.status.as_ref()),
                (k, "key-money", ":money", k.money_status.as_ref()),
            ]
        });
        for (k, kind, mark, status) in budgets {
            let Some(s) = status else { continue };
            if !(s.budget_joules > 0.0 && s.spent_joules >= KEY_SOFT_SHARE * s.budget_joules) {
                continue;
            }
            let share = 100.0 * s.spent_joules / s.budget_joules;
            let message = if kind == "key-energy" {
                format!(
                    "Key {} has spent {share:.0} % of its budget: {:.0} J of {:.0} J until it \
                     resets.",
                    k.name, s.spent_joules, s.budget_joules
                )
            } else {
                format!(
                    "Key {} has spent {share:.0} % of its money budget: {:.4} of {}.",
                    k.name, s.spent_joules, s.budget_joules
                )
            };
            let mark = format!("key:{}{mark}:{}", k.name, s.window_start);
            match ledger.first_alert(&mark, now) {
                Ok(true) => fresh.push(BudgetAlert {
                    kind,
                    key: Some(k.name.clone()),
                    limit: s.budget_joules,
                    used: s.spent_joules,
                    message,
                }),
                Ok(false) => {}
                Err(e) => tracing::warn!("could not record a key's alert: {e}"),
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

/// The battery's wear today and this month, in `currency`, as committed: what the cost budgets
/// add when `budgets_count_wear` is on. A failed read adds nothing and is logged.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Wear {
    pub today: f64,
    pub month: f64,
}

fn wear_of(ledger: &Ledger, day: &str, month: &str, currency: &str) -> Wear {
    let store = ledger.store();
    let sum = |first: &str| match store.wear_between(first, day) {
        Ok(worn) => worn
            .iter()
            .filter(|w| w.currency == currency && w.wear.is_finite())
            .map(|w| w.wear)
            .sum(),
        Err(e) => {
            tracing::warn!("could not read the battery's wear for the budgets: {e}");
            0.0
        }
    };
    Wear {
        today: sum(day),
        month: sum(&format!("{month}-01")),
    }
}

/// Budgets crossed by these totals, the cost budgets with `wear` added (zero unless
/// `budgets_count_wear`).
pub fn crossed(prefs: &Preferences, totals: &LedgerTotals, wear: Wear) -> Vec<BudgetAlert> {
    let currency = prefs.currency.as_str();
    let (mut today, mut month) = (totals.today.across_scopes(), totals.month.across_scopes());
    today.cost += wear.today;
    month.cost += wear.month;
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
                key: None,
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
        let none = Wear::default();
        assert!(crossed(&prefs, &totals(1.99, 29.0), none).is_empty());
        let alerts = crossed(&prefs, &totals(2.0, 31.0), none);
        let kinds: Vec<&str> = alerts.iter().map(|a| a.kind).collect();
        assert_eq!(kinds, ["daily-kwh", "monthly-cost"]);
        assert_eq!(
            alerts[1].message,
            "Budget reached: 31.000 EUR used this month, of 30 EUR."
        );
        assert!(crossed(&Preferences::default(), &totals(100.0, 100.0), none).is_empty());
    }

    #[test]
    fn a_month_of_29_eur_on_the_grid_and_1_50_of_wear_reaches_a_30_eur_budget() {
        let prefs = Preferences {
            monthly_budget_cost: Some(30.0),
            ..Preferences::default()
        };
        let wear = Wear {
            today: 0.2,
            month: 1.5,
        };
        let alerts = crossed(&prefs, &totals(0.0, 29.0), wear);
        assert_eq!(alerts.len(), 1);
        assert_eq!(
            alerts[0].message,
            "Budget reached: 30.500 EUR used this month, of 30 EUR."
        );
    }

    #[test]
    fn a_key_that_spent_four_fifths_of_its_budget_is_said_once_per_window() {
        use wattbar_core::keys::Status;
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let (mut ledger, _) = Ledger::open(&dir.path().join("wattbar.db"), 1_000.0, "EUR")
            .unwrap_or_else(|e| panic!("{e}"));
        let key = |spent: f64, window_start: f64| KeyView {
            name: "lab".into(),
            shown: "wb_1234".into(),
            budget: Some("1kJ/day".into()),
            money: None,
            scope: None,
            clamp: false,
            energy_line: false,
            created: 0.0,
            status: Some(Status {
                budget_joules: 1000.0,
                spent_joules: spent,
                held_joules: 0.0,
                remaining_joules: 1000.0 - spent,
                window_start,
                resets_at: window_start + 86_400.0,
            }),
            money_status: None,
        };
        let mut budgets = Budgets::default();
        // 799 J of 1 kJ: not yet; 800 J: said; 950 J in the same window: not again.
        budgets.observe_keys(&[key(799.0, 0.0)], 1_000.0, &mut ledger);
        assert_eq!(budgets.seq(), 0);
        budgets.observe_keys(&[key(800.0, 0.0)], 1_001.0, &mut ledger);
        assert_eq!(budgets.seq(), 1);
        assert_eq!(budgets.alerts()[0].key.as_deref(), Some("lab"));
        assert!(budgets.alerts()[0].message.contains("80 %"));
        budgets.observe_keys(&[key(950.0, 0.0)], 1_002.0, &mut ledger);
        assert_eq!(budgets.seq(), 1);
        // The next day's window says it again.
        budgets.observe_keys(&[key(900.0, 86_400.0)], 87_000.0, &mut ledger);
        assert_eq!(budgets.seq(), 2);
    }
}
