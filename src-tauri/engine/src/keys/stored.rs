//! The keys file: each key's name, the SHA-256 of its secret, its budget and settings, beside
//! the ledger. The secret itself is shown once, when made, and kept nowhere.
//!
//! Limits, checked before the file is parsed: at most [`MAX_FILE_BYTES`], at most [`MAX_KEYS`]
//! keys; a name is 1–[`MAX_NAME_CHARS`] of `A–Z a–z 0–9 . _ -`. The file is the user's alone
//! (0600, refused when others may read it), written whole or not at all, and never logged.

use crate::error::Error;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use wattbar_core::keys::Allowance;
use wattbar_core::Scope;

/// Where the keys are kept, in the data folder.
pub const KEYS_FILE: &str = "keys.secret.json";
/// Largest keys file read.
pub const MAX_FILE_BYTES: u64 = crate::home::paths::MAX_KEPT_FILE_BYTES;
/// Most keys kept.
pub const MAX_KEYS: usize = 1000;
/// Longest key (and client) name.
pub const MAX_NAME_CHARS: usize = 64;
/// What every secret starts with, so that a leaked one is recognised for what it is.
pub const SECRET_PREFIX: &str = "wb_";
/// Random bytes in a secret: 256 bits.
const SECRET_BYTES: usize = 32;
/// How much of a secret is kept in the clear to tell keys apart (`wb_` and 4 hex digits).
const SHOWN_CHARS: usize = 7;

/// One key as kept.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredKey {
    pub name: String,
    /// Hex SHA-256 of the secret.
    pub sha256: String,
    /// The secret's first characters, to tell keys apart in a list.
    pub shown: String,
    /// Energy per window, as written (`50kJ/day`); `None`: not limited, only counted.
    pub budget: Option<String>,
    /// Money per window in the preferences' currency, as written (`0.50/day`); `None`: none.
    #[serde(default)]
    pub money: Option<String>,
    /// The scope whose joules the budget counts; `None`: what each record measured.
    pub scope: Option<Scope>,
    /// Lower a request's token cap to fit what remains, rather than refuse it.
    #[serde(default)]
    pub clamp: bool,
    /// Send the energy line in every answer, as if each request asked for its receipt.
    #[serde(default)]
    pub energy_line: bool,
    /// When it was made or last rotated, Unix seconds.
    pub created: f64,
}

impl StoredKey {
    /// The budget, parsed; `None` without one.
    pub fn allowance(&self) -> Result<Option<Allowance>, wattbar_core::Error> {
        self.budget.as_deref().map(Allowance::energy).transpose()
    }

    /// The money budget, parsed; `None` without one.
    pub fn money_allowance(&self) -> Result<Option<Allowance>, wattbar_core::Error> {
        self.money.as_deref().map(Allowance::money).transpose()
    }
}

/// Whether `name` may name a key or a client.
pub fn check_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.chars().count() <= MAX_NAME_CHARS
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{:?} is not a name: 1 to {MAX_NAME_CHARS} of A-Z, a-z, 0-9, '.', '_' and '-'",
            name.chars().take(MAX_NAME_CHARS + 1).collect::<String>()
        ))
    }
}

/// A new secret: `wb_` and 64 hex digits from the system's random source.
pub fn new_secret() -> Result<String, Error> {
    let mut bytes = [0u8; SECRET_BYTES];
    getrandom::fill(&mut bytes).map_err(|e| Error::Refused(format!("no random source: {e}")))?;
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    Ok(format!("{SECRET_PREFIX}{hex}"))
}

/// What is kept of `secret`: its SHA-256, in hex. A secret is 256 random bits, so a plain hash
/// is as hard to reverse as the secret is to guess.
pub fn digest(secret: &str) -> String {
    Sha256::digest(secret.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The clear part of `secret` kept to tell keys apart.
pub fn shown(secret: &str) -> String {
    secret.chars().take(SHOWN_CHARS).collect()
}

/// The keys file in `data_dir`.
pub fn keys_path(data_dir: &Path) -> PathBuf {
    data_dir.join(KEYS_FILE)
}

/// The keys kept at `path`; none where there is no file.
pub fn load(path: &Path) -> Result<Vec<StoredKey>, Error> {
    let io = |source: std::io::Error| Error::Io {
        path: path.to_path_buf(),
        source,
    };
    let parse = |message: String| Error::Parse {
        path: path.to_path_buf(),
        message,
    };
    if let Err(e) = std::fs::metadata(path) {
        return match e.kind() {
            std::io::ErrorKind::NotFound => Ok(Vec::new()),
            _ => Err(io(e)),
        };
    }
    if let Some(mode) = crate::home::secrets::open_to_others(path).map_err(io)? {
        return Err(parse(format!(
            "other users may read it (mode {mode:o}): `chmod 600` it, and rotate the keys if \
             they could have"
        )));
    }
    let text = crate::home::paths::read_at_most(path, MAX_FILE_BYTES).map_err(io)?;
    let keys: Vec<StoredKey> =
        serde_json::from_str(&text).map_err(|e| parse(format!("not a keys file: {e}")))?;
    if keys.len() > MAX_KEYS {
        return Err(parse(format!("{} keys, over {MAX_KEYS}", keys.len())));
    }
    for k in &keys {
        check_name(&k.name).map_err(&parse)?;
        k.allowance()
            .and_then(|_| k.money_allowance())
            .map_err(|e| parse(format!("key {}: {e}", k.name)))?;
    }
    Ok(keys)
}

/// Keeps `keys` at `path`, whole or not at all, readable by its user alone.
pub fn save(path: &Path, keys: &[StoredKey]) -> Result<(), Error> {
    let text = serde_json::to_string_pretty(keys).map_err(|e| Error::Parse {
        path: path.to_path_buf(),
        message: e.to_string(),
    })?;
    crate::home::paths::write_whole(path, &text).map_err(|source| Error::Io {
        path: path.to_path_buf(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_is_256_random_bits_kept_only_as_its_hash() {
        let a = new_secret().unwrap_or_else(|e| panic!("{e}"));
        let b = new_secret().unwrap_or_else(|e| panic!("{e}"));
        assert_ne!(a, b);
        assert_eq!(a.len(), 3 + 64);
        assert!(a.starts_with("wb_"));
        // SHA-256 of "abc", from FIPS 180-2's example.
        assert_eq!(
            digest("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(shown(&a).len(), 7);
    }

    #[test]
    fn names_are_short_and_plain() {
        assert!(check_name("aider").is_ok());
        assert!(check_name("lab-01.gpu_a").is_ok());
        for bad in ["", "a b", "naïve", "x\n", &"n".repeat(65)] {
            assert!(check_name(bad).is_err(), "{bad:?}");
        }
    }

    #[cfg(unix)]
    #[test]
    fn a_keys_file_is_private_bounded_and_refused_when_others_may_read_it() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = keys_path(dir.path());
        assert_eq!(load(&path).map(|k| k.len()).ok(), Some(0));
        let key = StoredKey {
            name: "lab".into(),
            sha256: digest("wb_x"),
            shown: "wb_x".into(),
            budget: Some("50kJ/day".into()),
            money: None,
            scope: None,
            clamp: false,
            energy_line: false,
            created: 1.0,
        };
        save(&path, std::slice::from_ref(&key)).unwrap_or_else(|e| panic!("{e}"));
        let mode = std::fs::metadata(&path)
            .map(|m| m.permissions().mode() & 0o777)
            .unwrap_or_default();
        assert_eq!(mode, 0o600);
        assert_eq!(load(&path).ok(), Some(vec![key]));
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644))
            .unwrap_or_else(|e| panic!("{e}"));
        let refused = load(&path).map_err(|e| e.to_string()).err();
        assert!(refused.is_some_and(|m| m.contains("chmod 600")));
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))
            .unwrap_or_else(|e| panic!("{e}"));
        let big = std::fs::File::create(&path).and_then(|f| f.set_len(MAX_FILE_BYTES + 1));
        big.unwrap_or_else(|e| panic!("{e}"));
        let refused = load(&path).map_err(|e| e.to_string()).err();
        assert!(refused.is_some_and(|m| m.contains("1048576 bytes it may hold")));
    }
}
