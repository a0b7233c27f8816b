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
//! - A key's account starts its window from what the ledger committed for it (after a restart,
//!   or a key made again under a name that spent): a budget never grows back.

pub mod stored;

use crate::error::Error;
use serde::Serialize;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use stored::StoredKey;
use wattbar_core::inference::Record;
use wattbar_core::keys::{Account, Exceeded, Hold, Status};

/// What a key is asked to be when made.
#[derive(Debug, Clone, Default)]
pub struct NewKey {
    pub name: String,
    pub budget: Option<String>,
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
    pub scope: Option<wattbar_core::Scope>,
    pub clamp: bool,
    pub energy_line: bool,
    pub created: f64,
    /// Where its budget stands; `None` without one.
    pub status: Option<Status>,
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

struct Entry {
    stored: StoredKey,
    account: Option<Account>,
}

/// A request's key, client and hold, by its record id.
struct Open {
    key: Option<String>,
    client: Option<String>,
    hold: Option<Hold>,
}

#[derive(Default)]
struct Book {
    path: Option<PathBuf>,
    keys: Vec<Entry>,
    open: HashMap<u64, Open>,
}

/// The shared book of keys; clones share it.
#[derive(Clone, Default)]
pub struct Keys(Arc<Mutex<Book>>);

/// What the ledger committed for a key in a window: `(name, from, to) → joules`.
pub type Committed<'a> = &'a dyn Fn(&str, f64, f64) -> f64;

impl Keys {
    /// The keys kept at `path` (none: kept in memory only), their accounts at `now` starting
    /// from what `committed` says each spent in its window.
    pub fn open(path: Option<PathBuf>, now: f64, committed: Committed<'_>) -> Result<Keys, Error> {
        let stored = match &path {
            Some(p) => stored::load(p)?,
            None => Vec::new(),
        };
        let keys = stored
            .into_iter()
            .map(|s| {
                let account = account_of(&s, now, committed);
                Entry { stored: s, account }
            })
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
                budgeted: e.account.is_some(),
            })
    }

    /// Holds `joules` on `key`'s budget at `now`; `Ok(None)` for a key without a budget (or
    /// gone since it was admitted, which the record then names without a charge).
    pub fn hold(&self, key: &str, joules: f64, now: f64) -> Result<Option<Hold>, Exceeded> {
        match self.book().account(key) {
            Some(account) => account.hold(joules, now).map(Some),
            None => Ok(None),
        }
    }

    /// Where `key`'s budget stands at `now`; `None` without one.
    pub fn status(&self, key: &str, now: f64) -> Option<Status> {
        self.book().account(key).map(|a| a.status(now))
    }

    /// Gives `hold` back to `key`: its request never went on.
    pub fn release(&self, key: &str, hold: Hold) {
        if let Some(a) = self.book().account(key) {
            a.release(hold);
        }
    }

    /// Attaches a request's key, client and hold to its record id.
    pub fn attach(
        &self,
        record_id: u64,
        key: Option<String>,
        client: Option<String>,
        hold: Option<Hold>,
    ) {
        if key.is_none() && client.is_none() {
            return;
        }
        self.book()
            .open
            .insert(record_id, Open { key, client, hold });
    }

    /// The request of `record_id` made no record: its hold goes back.
    pub fn abandon(&self, record_id: u64) {
        let mut book = self.book();
        if let Some(Open {
            key: Some(key),
            hold: Some(hold),
            ..
        }) = book.open.remove(&record_id)
        {
            if let Some(a) = book.account(&key) {
                a.release(hold);
            }
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
            let held = open.hold.as_ref().map(Hold::joules);
            let charged = measured.or(held).unwrap_or(0.0).max(0.0);
            if let (Some(hold), Some(account)) = (open.hold, entry.and_then(|e| e.account.as_mut()))
            {
                account.settle(hold, charged, r.end);
            }
            r.key = Some(key);
            r.key_joules = Some(charged);
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
                scope: e.stored.scope,
                clamp: e.stored.clamp,
                energy_line: e.stored.energy_line,
                created: e.stored.created,
                status: e.account.as_mut().map(|a| a.status(now)),
            })
            .collect()
    }

    /// Makes key `new` at `now`, kept before this returns; its secret, shown this once.
    /// `committed` says what a key of that name spent in the window already.
    pub fn add(&self, new: NewKey, now: f64, committed: Committed<'_>) -> Result<String, Error> {
        stored::check_name(&new.name).map_err(Error::Refused)?;
        let secret = stored::new_secret()?;
        let key = StoredKey {
            name: new.name,
            sha256: stored::digest(&secret),
            shown: stored::shown(&secret),
            budget: new.budget,
            scope: new.scope,
            clamp: new.clamp,
            energy_line: new.energy_line,
            created: now,
        };
        key.allowance().map_err(Error::Invalid)?;
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
        let account = account_of(&key, now, committed);
        book.keys.push(Entry {
            stored: key,
            account,
        });
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

impl Book {
    /// Key `name`'s account; `None` for a key without a budget, or none of that name.
    fn account(&mut self, name: &str) -> Option<&mut Account> {
        self.keys
            .iter_mut()
            .find(|e| e.stored.name == name)
            .and_then(|e| e.account.as_mut())
    }

    fn position(&self, name: &str) -> Result<usize, Error> {
        self.keys
            .iter()
            .position(|e| e.stored.name == name)
            .ok_or_else(|| Error::Refused(format!("no key is named {name:?}")))
    }

    fn save(&self) -> Result<(), Error> {
        match &self.path {
            Some(path) => {
                let keys: Vec<StoredKey> = self.keys.iter().map(|e| e.stored.clone()).collect();
                stored::save(path, &keys)
            }
            None => Ok(()),
        }
    }
}

/// `key`'s account at `now`, from what the ledger committed in its window; `None` without a
/// budget.
fn account_of(key: &StoredKey, now: f64, committed: Committed<'_>) -> Option<Account> {
    let allowance = key.allowance().ok().flatten()?;
    let joules = allowance.joules()?;
    let (from, to) = allowance.period.window(now)?;
    Account::new(
        joules,
        allowance.period,
        committed(&key.name, from, to),
        now,
    )
}

#[cfg(test)]
mod tests;
