//! `wattbar-cli key add|list|remove|rotate`: through the running engine's API, or, with none
//! running, by taking the data folder's lock and changing the keys file itself. `wattbar-cli
//! usage`: the usage ledger, read from the records the ledger committed.

use crate::args::{AddKey, KeyCmd};
use anyhow::{bail, Result};
use serde_json::{json, Value};
use wattbar_engine::home::lock::EngineLock;
use wattbar_engine::home::paths;
use wattbar_engine::keys::{stored, Keys, NewKey};
use wattbar_engine::store::keys::{Group, Usage, UsageQuery};
use wattbar_engine::unix_now;

const SHOWN_ONCE: &str = "the secret is shown this once: keep it now";
const ROTATED: &str = "the old secret is refused from now on; the new one is shown this once";

pub fn key(cmd: KeyCmd) -> Result<()> {
    let reply = match crate::client::running()? {
        Some(client) => through_api(&client, cmd)?,
        None => in_the_folder(cmd)?,
    };
    crate::out!("{reply}")?;
    Ok(())
}

fn through_api(client: &crate::client::Client, cmd: KeyCmd) -> Result<Value> {
    Ok(match cmd {
        KeyCmd::Add(add) => {
            let new = new_key(add)?;
            client.post(
                "/v1/keys",
                Some(&json!({
                    "name": new.name, "budget": new.budget, "money": new.money, "scope": new.scope,
                    "clamp": new.clamp, "energy_line": new.energy_line,
                })),
            )?
        }
        KeyCmd::List => client.get("/v1/keys")?,
        KeyCmd::Remove { name } => client.delete(&format!("/v1/keys/{}", path_part(&name)?))?,
        KeyCmd::Rotate { name } => {
            client.post(&format!("/v1/keys/{}/rotate", path_part(&name)?), None)?
        }
    })
}

fn in_the_folder(cmd: KeyCmd) -> Result<Value> {
    let dir = paths::data_dir()?;
    let _lock = EngineLock::acquire(&dir, None)?;
    let now = unix_now();
    let store = crate::ledger::open_if_any()?;
    let committed = |name: &str, unit, from: f64, to: f64| match &store {
        Some(s) => wattbar_engine::keys::spent_in(s, name, unit, from, to),
        None => 0.0,
    };
    let keys = Keys::open(Some(stored::keys_path(&dir)), now, &committed)?;
    Ok(match cmd {
        KeyCmd::Add(add) => {
            let new = new_key(add)?;
            let name = new.name.clone();
            let secret = keys.add(new, now, &committed)?;
            json!({ "name": name, "secret": secret, "message": SHOWN_ONCE })
        }
        KeyCmd::List => json!({ "keys": keys.list(now) }),
        KeyCmd::Remove { name } => {
            keys.remove(&name)?;
            json!({ "removed": name })
        }
        KeyCmd::Rotate { name } => {
            let secret = keys.rotate(&name, now)?;
            json!({ "name": name, "secret": secret, "message": ROTATED })
        }
    })
}

fn new_key(add: AddKey) -> Result<NewKey> {
    let scope = match add.scope.as_deref() {
        None => None,
        Some(s) => match wattbar_core::Scope::named(s) {
            Some(s) => Some(s),
            None => bail!("scope {s:?} is not wall, system or components"),
        },
    };
    Ok(NewKey {
        name: add.name,
        budget: add.budget,
        money: add.money,
        scope,
        clamp: add.clamp,
        energy_line: add.energy_line,
    })
}

/// A key name as a path segment: names are plain, so one that is not is refused here.
fn path_part(name: &str) -> Result<&str> {
    match stored::check_name(name) {
        Ok(()) => Ok(name),
        Err(why) => bail!(why),
    }
}

/// `usage`: requests, tokens and joules per group and scope, from `since` on.
pub fn usage(
    key: Option<String>,
    client: Option<String>,
    model: Option<String>,
    since: &str,
    group: Group,
) -> Result<()> {
    let now = unix_now();
    let q = UsageQuery {
        key,
        client,
        model,
        from: crate::args::parse_time(since, now)?,
        to: now + 1.0,
    };
    let usage = match crate::ledger::open_if_any()? {
        Some(store) => store.usage(&q, group)?,
        None => Usage::default(),
    };
    crate::out!(
        "{}",
        json!({ "group": group, "from": q.from, "to": q.to, "usage": usage })
    )?;
    Ok(())
}
