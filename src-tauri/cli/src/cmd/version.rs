//! `wattbar-cli version [--check]`: this program's version and commit and, when asked, whether a
//! newer release exists, from the signed manifest at the preference `update_manifest_url` (off by
//! default) or `--manifest`. Nothing is downloaded or replaced: the answer says how to update.

use anyhow::{anyhow, Result};
use wattbar_release::update::{self, Verdict};

pub fn version(check: bool, manifest: Option<String>, json: bool) -> Result<()> {
    if !check {
        if json {
            println!(
                "{}",
                serde_json::json!({"version": wattbar_release::VERSION, "long_version": wattbar_release::LONG_VERSION})
            );
        } else {
            println!("wattbar-cli {}", wattbar_release::LONG_VERSION);
        }
        return Ok(());
    }
    let url = match manifest {
        Some(url) => url,
        None => crate::engine::read_prefs()?
            .update_manifest_url
            .ok_or_else(|| {
                anyhow!(
                "the update check is off: set the preference update_manifest_url to the release \
                 manifest's URL (in Preferences, or PUT /v1/preferences), or give --manifest URL"
            )
            })?,
    };
    let keys = wattbar_release::trusted_keys();
    let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
    let seen_file = wattbar_engine::home::paths::data_dir()?.join(update::SEEN_FILE);
    let latest = update::fetch(
        &url,
        &keys,
        wattbar_engine::unix_now(),
        update::seen(&seen_file).as_deref(),
    )?;
    if let Err(e) = update::remember(&seen_file, &latest) {
        eprintln!(
            "wattbar-cli: cannot keep the version seen in {}: {e}",
            seen_file.display()
        );
    }
    let verdict = update::compare(wattbar_release::VERSION, latest)?;
    let exe = std::env::current_exe().unwrap_or_default();
    let how = update::how_to_update(&exe);
    let (newer, latest) = match &verdict {
        Verdict::Newer { latest } => (true, latest),
        Verdict::UpToDate { latest } => (false, latest),
    };
    if json {
        println!(
            "{}",
            serde_json::json!({
                "version": wattbar_release::VERSION,
                "latest": latest.version,
                "released": latest.released,
                "notes": latest.notes,
                "newer": newer,
                "update_with": newer.then_some(&how),
            })
        );
    } else if newer {
        let released = latest
            .released
            .as_deref()
            .map_or_else(String::new, |r| format!(", released {r}"));
        println!(
            "a newer release exists: {}{released} (this is {}). Update with: {how}",
            latest.version,
            wattbar_release::VERSION
        );
    } else {
        println!(
            "up to date: {} is the latest release",
            wattbar_release::VERSION
        );
    }
    Ok(())
}
