//! The keys the inference proxy issues, and the one book of what each may still spend.
//!
//! Rules:
//! - [`Keys`] is the one owner of every key's account ([`wattbar_core::keys::Account`]): the
//!   proxy takes holds through it, the engine settles them when it makes the record, and the
//!   API reads where each key stands. Its lock is held for a map lookup or an add, never across
//!   I/O but the keys file's write on add, remove and rotate.
//! - A secret is known by its SHA-256 alone ([`stored`]); a removed or rotated key's secret
//!   finds nothing from the moment the call returns.
//! - A request's key and client are attached to its record id when it starts ([`Tab`]); the
//!   engine takes them back when it makes the record, so that the record names them and its key
//!   is charged: its energy where measured in the key's scope, else what was held (unknown is
//!   not free). A request that never reached the model gives its hold back.
//! - A key may also have a money budget, in the preferences' currency: its own account, held
//!   and charged at the price in force when the request began (the joules held or charged ×
//!   that price). A request goes on only when it fits both.
//! - A key's accounts start their window from what the ledger committed for it (after a
//!   restart, or a key made again under a name that spent): a budget never grows back.

mod book;
pub mod stored;

pub use book::spent_in;
use book::{money_per_joule, Book, Entry, Open};

use crate::error::Error;
use serde::Serialize;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use stored::StoredKey;
use wattbar_core::inference::Record;
use wattbar_core::keys::{Account, Allowance, Amount, Exceeded, Hold, Status};

/// What a key is asked to be when made.
#[derive(Debug, Clone, Default)]
pub struct NewKey {
    pub name: String,
    pub budget: Option<String>,
    pub money: Option<String>,
    pub scope: Option<wattbar_core::Scope>,
    pub clamp: bool,
    pub energy_line: bool,
}

/// A key as lists show it: never its secret.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct KeyView {
    pub name: String,
    /// The secret's first characters.
    pub shown: String,
    pub budget: Option<String>,
    #[serde(default)]
    pub money: Option<String>,
    pub scope: Option<wattbar_core::Scope>,
    pub clamp: bool,
    pub energy_line: bool,
    pub created: f64,
    /// Where its energy budget stands; `None` without one.
    pub status: Option<Status>,
    /// Where its money budget stands, in the preferences' currency; `None` without one.
    #[serde(default)]
    pub money_status: Option<Status>,
}

/// Which of a key's budgets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Unit {
    Joules,
    Money,
}

/// Why a request was refused: the budget it would have crossed.
#[derive(Debug, Clone, PartialEq)]
pub struct Refused {
    pub unit: Unit,
    /// In `unit`.
    pub exceeded: Exceeded,
    /// What remains of it now, in joules at the request's price.
    pub remaining_joules: f64,
}

/// What a request holds on its key: joules, money, and the price the money was held at.
#[derive(Debug, Default)]
pub struct Held {
    energy: Option<Hold>,
    money: Option<Hold>,
    price_per_kwh: f64,
}

impl Held {
    /// The joules held; `None` where the key has no energy budget.
    pub fn joules(&self) -> Option<f64> {
        self.energy.as_ref().map(Hold::joules)
    }
}

/// A key a request was let in with.
#[derive(Debug, Clone, PartialEq)]
pub struct Admitted {
    pub name: String,
    pub clamp: bool,
    pub energy_line: bool,
    /// Whether it has a budget to hold against.
    pub budgeted: bool,
}

/// The shared book of keys; clones share it.
#[derive(Clone, Default)]
pub struct Keys(Arc<Mutex<Book>>);

/// What the ledger committed for a key in a window: `(name, unit, from, to) → joules` (or money).
pub type CommittedSpend<'a> = &'a dyn Fn(&str, Unit, f64, f64) -> f64;

impl Keys {
    /// The keys kept at `path` (none: kept in memory only), their accounts at `now` starting
    /// from what `committed` says each spent in its window.
    pub fn open(
        path: Option<PathBuf>,
        now: f64,
        committed: CommittedSpend<'_>,
    ) -> Result<Keys, Error> {
        let stored = match &path {
            Some(p) => stored::load(p)?,
            None => Vec::new(),
        };
        let keys = stored
            .into_iter()
            .map(|s| Entry::new(s, now, committed))
            .collect();
        Ok(Keys(Arc::new(Mutex::new(Book {
            path,
            keys,
            open: HashMap::new(),
        }))))
    }

    fn book(&self) -> MutexGuard<'_, Book> {
        // A panic while holding the lock leaves the book as it was between two calls.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether any key is kept.
    pub fn any(&self) -> bool {
        !self.book().keys.is_empty()
    }

    /// The key whose secret is `secret`; `None` for any other text.
    pub fn admit(&self, secret: &str) -> Option<Admitted> {
        if !secret.starts_with(stored::SECRET_PREFIX) {
            return None;
        }
        let digest = stored::digest(secret);
        let book = self.book();
        book.keys
            .iter()
            .find(|e| e.stored.sha256 == digest)
            .map(|e| Admitted {
                name: e.stored.name.clone(),
                clamp: e.stored.clamp,
                energy_line: e.stored.energy_line,
                budgeted: e.account.is_some() || e.money.is_some(),
            })
    }

    /// Holds `joules` (and their cost at `price_per_kwh`) on `key`'s budgets at `now`; nothing
    /// for a key without a budget (or gone since it was admitted, which the record then names
    /// without a charge). Refused where either budget would be crossed, holding nothing.
    pub fn hold(
        &self,
        key: &str,
        joules: f64,
        price_per_kwh: f64,
        now: f64,
    ) -> Result<Held, Box<Refused>> {
        let mut book = self.book();
        let Some(entry) = book.keys.iter_mut().find(|e| e.stored.name == key) else {
            return Ok(Held::default());
        };
        let per_joule = money_per_joule(price_per_kwh);
        let energy = match entry.account.as_mut() {
            None => None,
            Some(a) => Some(a.hold(joules, now).map_err(|e| {
                let remaining = e.budget_joules - e.spent_joules - e.held_joules;
                Box::new(Refused {
                    unit: Unit::Joules,
                    exceeded: e,
                    remaining_joules: remaining.max(0.0),
                })
            })?),
        };
        let money = match entry.money.as_mut() {
            None => None,
            Some(m) => match m.hold(joules * per_joule, now) {
                Ok(h) => Some(h),
                Err(e) => {
                    if let (Some(h), Some(a)) = (energy, entry.account.as_mut()) {
                        a.release(h);
                    }
                    let left = (e.budget_joules - e.spent_joules - e.held_joules).max(0.0);
                    let remaining = if per_joule > 0.0 {
                        left / per_joule
                    } else {
                        f64::INFINITY
                    };
                    let energy_left = entry
                        .account
                        .as_mut()
                        .map_or(f64::INFINITY, |a| a.status(now).remaining_joules);
                    return Err(Box::new(Refused {
                        unit: Unit::Money,
                        exceeded: e,
                        remaining_joules: remaining.min(energy_left),
                    }));
                }
            },
        };
        Ok(Held {
            energy,
            money,
            price_per_kwh,
        })
    }

    /// Where `key`'s energy budget stands at `now`; `None` without one.
    pub fn status(&self, key: &str, now: f64) -> Option<Status> {
        self.book().account(key).map(|a| a.status(now))
    }

    /// Gives `held` back to `key`: its request never went on.
    pub fn release(&self, key: &str, held: Held) {
        self.book().release(key, held);
    }

    /// Attaches a request's key, client and holds to its record id.
    pub fn attach(&self, record_id: u64, key: Option<String>, client: Option<String>, held: Held) {
        if key.is_none() && client.is_none() {
            return;
        }
        self.book()
            .open
            .insert(record_id, Open { key, client, held });
    }

    /// The request of `record_id` made no record: its holds go back.
    pub fn abandon(&self, record_id: u64) {
        let mut book = self.book();
        if let Some(Open {
            key: Some(key),
            held,
            ..
        }) = book.open.remove(&record_id)
        {
            book.release(&key, held);
        }
    }

    /// Names each record's key and client and charges its key (the engine, as it makes them).
    pub fn settle(&self, records: &mut [Record]) {
        let mut book = self.book();
        for r in records.iter_mut() {
            let Some(open) = book.open.remove(&r.id) else {
                continue;
            };
            r.client = open.client.or_else(|| open.key.clone());
            let Some(key) = open.key else {
                continue;
            };
            let entry = book.keys.iter_mut().find(|e| e.stored.name == key);
            let scope = entry.as_ref().and_then(|e| e.stored.scope);
            let measured = r
                .energy_joules
                .filter(|_| scope.is_none() || scope == r.scope)
                .filter(|j| j.is_finite());
            let Held {
                energy,
                money,
                price_per_kwh,
            } = open.held;
            let held = energy
                .as_ref()
                .map(Hold::joules)
                .or_else(|| {
                    money
                        .as_ref()
                        .map(|m| m.joules() / money_per_joule(price_per_kwh))
                })
                .filter(|j| j.is_finite());
            let charged = measured.or(held).unwrap_or(0.0).max(0.0);
            // At the price its holds were taken at; a key that held nothing pays the record's.
            let cost = if energy.is_some() || money.is_some() {
                Some(charged * money_per_joule(price_per_kwh))
            } else {
                r.cost
                    .zip(r.energy_joules)
                    .filter(|(_, j)| *j > 0.0)
                    .map(|(c, j)| c / j * charged)
            };
            if let Some(e) = entry {
                if let (Some(hold), Some(account)) = (energy, e.account.as_mut()) {
                    account.settle(hold, charged, r.end);
                }
                if let (Some(hold), Some(account)) = (money, e.money.as_mut()) {
                    account.settle(hold, cost.unwrap_or(f64::NAN), r.end);
                }
            }
            r.key = Some(key);
            r.key_joules = Some(charged);
            r.key_cost = cost;
        }
    }

    /// Every key, as lists show it, at `now`.
    pub fn list(&self, now: f64) -> Vec<KeyView> {
        let mut book = self.book();
        book.keys
            .iter_mut()
            .map(|e| KeyView {
                name: e.stored.name.clone(),
                shown: e.stored.shown.clone(),
                budget: e.stored.budget.clone(),
                money: e.stored.money.clone(),
                scope: e.stored.scope,
                clamp: e.stored.clamp,
                energy_line: e.stored.energy_line,
                created: e.stored.created,
                status: e.account.as_mut().map(|a| a.status(now)),
                money_status: e.money.as_mut().map(|a| a.status(now)),
            })
            .collect()
    }

    /// Makes key `new` at `now`, kept before this returns; its secret, shown this once.
    /// `committed` says what a key of that name spent in the window already.
    pub fn add(
        &self,
        new: NewKey,
        now: f64,
        committed: CommittedSpend<'_>,
    ) -> Result<String, Error> {
        stored::check_name(&new.name).map_err(Error::Refused)?;
        let secret = stored::new_secret()?;
        let key = StoredKey {
            name: new.name,
            sha256: stored::digest(&secret),
            shown: stored::shown(&secret),
            budget: new.budget,
            money: new.money,
            scope: new.scope,
            clamp: new.clamp,
            energy_line: new.energy_line,
            created: now,
        };
        key.allowance().map_err(Error::Invalid)?;
        key.money_allowance().map_err(Error::Invalid)?;
        let mut book = self.book();
        if book.keys.iter().any(|e| e.stored.name == key.name) {
            return Err(Error::Refused(format!(
                "a key named {:?} exists: remove or rotate it",
                key.name
            )));
        }
        if book.keys.len() >= stored::MAX_KEYS {
            return Err(Error::Refused(format!(
                "{} keys are kept already",
                stored::MAX_KEYS
            )));
        }
        book.keys.push(Entry::new(key, now, committed));
        if let Err(e) = book.save() {
            book.keys.pop();
            return Err(e);
        }
        Ok(secret)
    }

    /// Removes key `name`: its secret is refused from now on; its records keep its name.
    pub fn remove(&self, name: &str) -> Result<(), Error> {
        let mut book = self.book();
        let at = book.position(name)?;
        let entry = book.keys.remove(at);
        if let Err(e) = book.save() {
            book.keys.insert(at, entry);
            return Err(e);
        }
        Ok(())
    }

    /// Gives key `name` a new secret at `now`; the old one is refused from now on. Its spend
    /// and budget stay.
    pub fn rotate(&self, name: &str, now: f64) -> Result<String, Error> {
        let secret = stored::new_secret()?;
        let mut book = self.book();
        let at = book.position(name)?;
        let before = book.keys[at].stored.clone();
        let s = &mut book.keys[at].stored;
        s.sha256 = stored::digest(&secret);
        s.shown = stored::shown(&secret);
        s.created = now;
        if let Err(e) = book.save() {
            book.keys[at].stored = before;
            return Err(e);
        }
        Ok(secret)
    }
}

#[cfg(test)]
mod tests;
