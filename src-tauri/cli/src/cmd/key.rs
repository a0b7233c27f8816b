//! `wattbar-cli key add|list|remove|rotate`: through the running engine's API, or, with none
//! running, by taking the data folder's lock and changing the keys file itself. `wattbar-cli
//! usage`: the usage ledger, read from the records the ledger committed.

use crate::args::{KeyCmd, UsageGroup};
use anyhow::{bail, Result};
use wattbar_engine::home::lock::EngineLock;
use wattbar_engine::home::paths;
use wattbar_engine::keys::{stored, Keys, NewKey};
use wattbar_engine::store::keys::{Group, UsageQuery};
use wattbar_engine::unix_now;

pub fn key(cmd: KeyCmd) -> Result<()> {
    if let Some(client) = crate::client::running()? {
        let reply = match cmd {
            KeyCmd::Add {
                name,
                budget,
                scope,
                clamp,
                energy_line,
            } => client.post(
                "/v1/keys",
                Some(&serde_json::json!({
                    "name": name, "budget": budget, "scope": scope, "clamp": clamp,
                    "energy_line": energy_line,
                })),
            )?,
            KeyCmd::List => client.get("/v1/keys")?,
            KeyCmd::Remove { name } => client.delete(&format!("/v1/keys/{}", path_part(&name)?))?,
            KeyCmd::Rotate { name } => {
                client.post(&format!("/v1/keys/{}/rotate", path_part(&name)?), None)?
            }
        };
        crate::out!("{reply}")?;
        return Ok(());
    }
    let dir = paths::data_dir()?;
    let _lock = EngineLock::acquire(&dir, None)?;
    let now = unix_now();
    let store = crate::ledger::open_if_any()?;
    let committed = |name: &str, from: f64, to: f64| match &store {
        Some(s) => s
            .key_spent(name, from, to)
            .unwrap_or(wattbar_core::keys::allowance::MAX_JOULES),
        None => 0.0,
    };
    let keys = Keys::open(Some(stored::keys_path(&dir)), now, &committed)?;
    let reply = match cmd {
        KeyCmd::Add {
            name,
            budget,
            scope,
            clamp,
            energy_line,
        } => {
            let scope = match scope.as_deref() {
                None => None,
                Some(s) => match wattbar_core::Scope::named(s) {
                    Some(s) => Some(s),
                    None => bail!("scope {s:?} is not wall, system or components"),
                },
            };
            let secret = keys.add(
                NewKey {
                    name: name.clone(),
                    budget,
                    scope,
                    clamp,
                    energy_line,
                },
                now,
                &committed,
            )?;
            serde_json::json!({
                "name": name, "secret": secret,
                "message": "the secret is shown this once: keep it now",
            })
        }
        KeyCmd::List => serde_json::json!({ "keys": keys.list(now) }),
        KeyCmd::Remove { name } => {
            keys.remove(&name)?;
            serde_json::json!({ "removed": name })
        }
        KeyCmd::Rotate { name } => {
            let secret = keys.rotate(&name, now)?;
            serde_json::json!({
                "name": name, "secret": secret,
                "message": "the old secret is refused from now on; the new one is shown this once",
            })
        }
    };
    crate::out!("{reply}")?;
    Ok(())
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
    group: UsageGroup,
) -> Result<()> {
    let now = unix_now();
    let from = crate::args::parse_time(since, now)?;
    let group = match group {
        UsageGroup::Day => Group::Day,
        UsageGroup::Week => Group::Week,
        UsageGroup::Month => Group::Month,
        UsageGroup::Key => Group::Key,
        UsageGroup::Client => Group::Client,
        UsageGroup::Model => Group::Model,
        UsageGroup::All => Group::All,
    };
    let q = UsageQuery {
        key,
        client,
        model,
        from,
        to: now + 1.0,
    };
    let usage = match crate::ledger::open_if_any()? {
        Some(store) => store.usage(&q, group)?,
        None => wattbar_engine::store::keys::Usage::default(),
    };
    crate::out!(
        "{}",
        serde_json::json!({ "group": group, "from": q.from, "to": q.to, "usage": usage })
    )?;
    Ok(())
}
