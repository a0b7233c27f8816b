//! The book behind [`Keys`]: each key's stored entry and accounts, the requests open against
//! them, and the keys file written whole on each change.

use super::*;

pub(super) struct Entry {
    pub(super) stored: StoredKey,
    pub(super) account: Option<Account>,
    pub(super) money: Option<Account>,
}

/// A request's key, client and holds, by its record id.
pub(super) struct Open {
    pub(super) key: Option<String>,
    pub(super) client: Option<String>,
    pub(super) held: Held,
}

#[derive(Default)]
pub(super) struct Book {
    pub(super) path: Option<PathBuf>,
    pub(super) keys: Vec<Entry>,
    pub(super) open: HashMap<u64, Open>,
}

impl Entry {
    /// Key `stored` with its accounts at `now`, each from what the ledger committed in its
    /// window.
    pub(super) fn new(stored: StoredKey, now: f64, committed: CommittedSpend<'_>) -> Entry {
        let account_of = |a: Option<Allowance>, unit: Unit| {
            let a = a?;
            let amount = match a.amount {
                Amount::Joules(j) => j,
                Amount::Money(m) => m,
            };
            let (from, to) = a.period.window(now)?;
            Account::new(
                amount,
                a.period,
                committed(&stored.name, unit, from, to),
                now,
            )
        };
        Entry {
            account: account_of(stored.allowance().ok().flatten(), Unit::Joules),
            money: account_of(stored.money_allowance().ok().flatten(), Unit::Money),
            stored,
        }
    }
}

/// What `store` committed for key `name` in `[from, to)`, in `unit`. Where it cannot be read,
/// the most any budget allows: a budget that cannot be known spent is taken as spent.
pub fn spent_in(
    store: &wattbar_ledger::store::Store,
    name: &str,
    unit: Unit,
    from: f64,
    to: f64,
) -> f64 {
    let read = match unit {
        Unit::Joules => store.key_spent(name, from, to),
        Unit::Money => store.key_cost_spent(name, from, to),
    };
    read.unwrap_or_else(|e| {
        tracing::error!("key {name}'s spend could not be read, so none is left: {e}");
        match unit {
            Unit::Joules => wattbar_core::keys::allowance::MAX_JOULES,
            Unit::Money => wattbar_core::keys::allowance::MAX_MONEY,
        }
    })
}

/// Money per joule at `price_per_kwh`; 0 for a price that is not a number.
pub(super) fn money_per_joule(price_per_kwh: f64) -> f64 {
    if price_per_kwh.is_finite() {
        price_per_kwh / 3.6e6
    } else {
        0.0
    }
}

impl Book {
    /// Gives `held` back to key `name`.
    pub(super) fn release(&mut self, name: &str, held: Held) {
        if let Some(e) = self.keys.iter_mut().find(|e| e.stored.name == name) {
            if let (Some(h), Some(a)) = (held.energy, e.account.as_mut()) {
                a.release(h);
            }
            if let (Some(h), Some(a)) = (held.money, e.money.as_mut()) {
                a.release(h);
            }
        }
    }

    /// Key `name`'s account; `None` for a key without a budget, or none of that name.
    pub(super) fn account(&mut self, name: &str) -> Option<&mut Account> {
        self.keys
            .iter_mut()
            .find(|e| e.stored.name == name)
            .and_then(|e| e.account.as_mut())
    }

    pub(super) fn position(&self, name: &str) -> Result<usize, Error> {
        self.keys
            .iter()
            .position(|e| e.stored.name == name)
            .ok_or_else(|| Error::Refused(format!("no key is named {name:?}")))
    }

    pub(super) fn save(&self) -> Result<(), Error> {
        match &self.path {
            Some(path) => {
                let keys: Vec<StoredKey> = self.keys.iter().map(|e| e.stored.clone()).collect();
                stored::save(path, &keys)
            }
            None => Ok(()),
        }
    }
}
