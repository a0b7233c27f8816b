//! The bearer token that guards the API's writes: 32 random bytes as hex, created on first use in
//! the data folder with mode 0600 (readable by its user only). `wattbar-cli token` prints it.

use crate::error::Error;
use std::io::Write;
use std::path::{Path, PathBuf};

pub const TOKEN_FILE: &str = "api-token";
const TOKEN_BYTES: usize = 32;

pub fn token_path(data_dir: &Path) -> PathBuf {
    data_dir.join(TOKEN_FILE)
}

/// Reads the token, creating it when absent. A file that holds no token is an error rather than
/// silently replaced: someone may have put it there.
pub fn load_or_create(data_dir: &Path) -> Result<String, Error> {
    let path = token_path(data_dir);
    let io = |source| Error::Io {
        path: path.clone(),
        source,
    };
    match std::fs::read_to_string(&path) {
        Ok(text) => {
            let token = text.trim();
            if token.len() < 32 || !token.bytes().all(|b| b.is_ascii_alphanumeric()) {
                return Err(Error::Parse {
                    path: path.clone(),
                    message: "not a Wattbar API token; delete it to have a new one made".into(),
                });
            }
            Ok(token.to_string())
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            std::fs::create_dir_all(data_dir).map_err(io)?;
            let mut bytes = [0u8; TOKEN_BYTES];
            getrandom::fill(&mut bytes).map_err(|e| io(std::io::Error::other(e.to_string())))?;
            let token: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
            let mut file = create_private(&path).map_err(io)?;
            file.write_all(format!("{token}\n").as_bytes())
                .and_then(|()| file.sync_all())
                .map_err(io)?;
            Ok(token)
        }
        Err(e) => Err(io(e)),
    }
}

#[cfg(unix)]
fn create_private(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
}

#[cfg(not(unix))]
fn create_private(path: &Path) -> std::io::Result<std::fs::File> {
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
}

/// Compares in time independent of where the strings differ (`subtle`'s constant-time equality;
/// only the length, which is public, ends it early).
pub fn matches(expected: &str, given: &str) -> bool {
    use subtle::ConstantTimeEq;
    expected.as_bytes().ct_eq(given.as_bytes()).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_token_is_made_once_private_and_then_reused() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let first = load_or_create(dir.path()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(first.len(), 64);
        let again = load_or_create(dir.path()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(first, again);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(token_path(dir.path()))
                .map(|m| m.permissions().mode() & 0o777)
                .unwrap_or(0);
            assert_eq!(mode, 0o600);
        }
        let other = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let second = load_or_create(other.path()).unwrap_or_else(|e| panic!("{e}"));
        assert_ne!(first, second, "tokens are random");
    }

    #[test]
    fn a_file_that_is_not_a_token_is_refused_not_replaced() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(token_path(dir.path()), "secret").unwrap_or_else(|e| panic!("{e}"));
        assert!(matches!(
            load_or_create(dir.path()),
            Err(Error::Parse { .. })
        ));
        assert_eq!(
            std::fs::read_to_string(token_path(dir.path()))
                .ok()
                .as_deref(),
            Some("secret")
        );
    }

    #[test]
    fn comparison_needs_every_byte() {
        assert!(matches("abcd", "abcd"));
        assert!(!matches("abcd", "abce"));
        assert!(!matches("abcd", "abc"));
    }
}
