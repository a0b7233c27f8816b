//! Energy and money totals as stored, each scope and currency kept apart, and the one named way
//! to cross scopes where an output needs one figure ([`Total::across_scopes`]).

use serde::Serialize;
use wattbar_core::Scope;

/// An amount of money in one currency.
#[derive(Debug, Clone, PartialEq, Default, Serialize, serde::Deserialize)]
pub struct Money {
    pub currency: String,
    pub amount: f64,
}

/// Totals for `wattbar-cli totals` and the UI. Neither money in two currencies nor energy of two
/// scopes is ever added: `joules` and `cost` are what was measured in `scope` (the headline's
/// now), `cost` in `currency` (the one asked for); what was paid in other currencies is listed
/// apart in `other_costs`, and what was measured in other scopes in `other_scopes` (each with
/// its own costs; `scope: None` there is energy recorded before scopes were kept).
#[derive(Debug, Clone, PartialEq, Default, Serialize, serde::Deserialize)]
pub struct Total {
    pub joules: f64,
    pub kwh: f64,
    pub cost: f64,
    pub currency: String,
    pub other_costs: Vec<Money>,
    #[serde(default)]
    pub scope: Option<Scope>,
    #[serde(default)]
    pub other_scopes: Vec<Total>,
}

/// One stored calendar or lifetime row: its scope (`None`: recorded before scopes were kept),
/// currency, energy and cost.
pub type CostRow = (Option<Scope>, String, f64, f64);

impl Total {
    /// No energy, in the same scope and currency.
    pub fn emptied(&self) -> Total {
        Total::new(Vec::new(), self.scope, &self.currency)
    }

    /// Adds `joules` measured in `scope` that cost `cost` in `currency`: to this total when
    /// both are its own, else kept apart.
    pub fn add(&mut self, joules: f64, scope: Option<Scope>, currency: &str, cost: f64) {
        if scope != self.scope {
            if joules == 0.0 && cost == 0.0 {
                return;
            }
            let i = match self.other_scopes.iter().position(|t| t.scope == scope) {
                Some(i) => i,
                None => {
                    self.other_scopes
                        .push(Total::new(Vec::new(), scope, &self.currency));
                    self.other_scopes.len() - 1
                }
            };
            self.other_scopes[i].add(joules, scope, currency, cost);
            return;
        }
        self.joules += joules;
        self.kwh = self.joules / wattbar_core::JOULES_PER_KWH;
        if currency == self.currency {
            self.cost += cost;
        } else if cost != 0.0 {
            match self.other_costs.iter_mut().find(|m| m.currency == currency) {
                Some(m) => m.amount += cost,
                None => self.other_costs.push(Money {
                    currency: currency.to_string(),
                    amount: cost,
                }),
            }
        }
    }

    /// From stored rows, in `scope` with `cost` in `currency`.
    pub(crate) fn new(rows: Vec<CostRow>, scope: Option<Scope>, currency: &str) -> Self {
        let mut total = Total {
            currency: currency.to_string(),
            scope,
            ..Total::default()
        };
        for (s, c, joules, cost) in rows {
            total.add(joules, s, &c, cost);
        }
        total
    }

    /// The same figures seen from `scope`: its own as the total, every other scope apart.
    pub fn in_scope(&self, scope: Option<Scope>) -> Total {
        if scope == self.scope {
            return self.clone();
        }
        Total::new(self.rows(), scope, &self.currency)
    }

    /// Every (scope, currency, joules, cost) figure this total holds, in no particular order;
    /// a currency's money comes with no joules where the energy is counted in another row.
    pub fn rows(&self) -> Vec<CostRow> {
        let mut rows = vec![(self.scope, self.currency.clone(), self.joules, self.cost)];
        for m in &self.other_costs {
            rows.push((self.scope, m.currency.clone(), 0.0, m.amount));
        }
        for other in &self.other_scopes {
            rows.extend(other.rows());
        }
        rows
    }

    /// All the energy in `scope`, here or among the other scopes.
    pub fn joules_in(&self, scope: Option<Scope>) -> f64 {
        if scope == self.scope {
            return self.joules;
        }
        self.other_scopes
            .iter()
            .filter(|t| t.scope == scope)
            .map(|t| t.joules)
            .sum()
    }
}

/// The machine's energy in one figure, for an output that cannot list scopes (the menu's Today
/// line, a budget, Home Assistant's energy sensor, an OTLP sum, a fleet's total): the headline's
/// energy with each interval counted in the one scope it was measured in, summed. The headline
/// measures one thing at a time, so each joule is counted once; the figure is labelled with every
/// scope it holds, since a joule at the wall and one of the CPU package are not the same quantity.
#[derive(Debug, Clone, PartialEq, Default, Serialize, serde::Deserialize)]
pub struct AcrossScopes {
    pub joules: f64,
    pub kwh: f64,
    /// In the total's own currency; money paid in others is not converted.
    pub cost: f64,
    /// The scopes in it, the headline's first; `None` is energy recorded before scopes were kept.
    pub scopes: Vec<Option<Scope>>,
}

impl Total {
    /// See [`AcrossScopes`].
    pub fn across_scopes(&self) -> AcrossScopes {
        let mut a = AcrossScopes {
            joules: self.joules,
            cost: self.cost,
            scopes: (self.joules > 0.0 || self.other_scopes.is_empty())
                .then_some(self.scope)
                .into_iter()
                .collect(),
            ..AcrossScopes::default()
        };
        for other in &self.other_scopes {
            a.joules += other.joules;
            if other.currency == self.currency {
                a.cost += other.cost;
            }
            if other.joules > 0.0 && !a.scopes.contains(&other.scope) {
                a.scopes.push(other.scope);
            }
        }
        a.kwh = a.joules / wattbar_core::JOULES_PER_KWH;
        a
    }
}
