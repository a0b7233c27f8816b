//! Secret files in the data folder, readable by their user alone: the bearer token that guards
//! the API's writes (32 random bytes as hex, created on first use with mode 0600; `wattbar-cli
//! token` prints it, and `serve` checks it), and a secret read from a file, which is refused
//! while others may read it.

use crate::error::Error;
use std::io::Write;
use std::path::{Path, PathBuf};

pub const TOKEN_FILE: &str = "api-token";
const TOKEN_BYTES: usize = 32;

pub fn token_path(data_dir: &Path) -> PathBuf {
    data_dir.join(TOKEN_FILE)
}

/// Reads the token, creating it when absent. A file that holds no token is an error rather than
/// silently replaced: someone may have put it there. A token other users could read is replaced
/// by a new one, with a warning, as they may have read it (ssh refuses such a key for the same
/// reason).
pub fn load_or_create(data_dir: &Path) -> Result<String, Error> {
    let path = token_path(data_dir);
    let io = |source| Error::Io {
        path: path.clone(),
        source,
    };
    match super::paths::read_at_most(&path, super::paths::MAX_KEPT_FILE_BYTES) {
        Ok(text) => {
            let token = text.trim();
            if token.len() < 32 || !token.bytes().all(|b| b.is_ascii_alphanumeric()) {
                return Err(Error::Parse {
                    path: path.clone(),
                    message: "not a Wattbar API token; delete it to have a new one made".into(),
                });
            }
            let Some(mode) = open_to_others(&path).map_err(io)? else {
                return Ok(token.to_string());
            };
            tracing::warn!(
                "{}: other users could read the API token (mode {mode:o}): a new one was made, \
                 readable by this user only; give clients the new one (`wattbar-cli token`)",
                path.display()
            );
            std::fs::remove_file(&path).map_err(io)?;
            create(data_dir, &path).map_err(io)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => create(data_dir, &path).map_err(io),
        Err(e) => Err(io(e)),
    }
}

/// Where a broker's password is kept by default.
pub const MQTT_PASSWORD_FILE: &str = "mqtt-password";

/// A secret a person put in a file of its own (a broker's password): its first line, as typed.
/// A file others may read is refused, as ssh refuses such a key: the secret may be known.
pub fn read_secret_file(path: &Path) -> Result<String, Error> {
    let io = |source| Error::Io {
        path: path.to_path_buf(),
        source,
    };
    let text = super::paths::read_at_most(path, super::paths::MAX_KEPT_FILE_BYTES).map_err(io)?;
    if let Some(mode) = open_to_others(path).map_err(io)? {
        return Err(Error::Parse {
            path: path.to_path_buf(),
            message: format!(
                "other users may read it (mode {mode:o}): `chmod 600` it, and change the \
                 password if they could have"
            ),
        });
    }
    let secret = text.lines().next().unwrap_or_default().to_string();
    if secret.is_empty() {
        return Err(Error::Parse {
            path: path.to_path_buf(),
            message: "it is empty: its first line is the password".into(),
        });
    }
    Ok(secret)
}

fn create(data_dir: &Path, path: &Path) -> std::io::Result<String> {
    crate::home::paths::create_private_dir(data_dir)?;
    let mut bytes = [0u8; TOKEN_BYTES];
    getrandom::fill(&mut bytes).map_err(|e| std::io::Error::other(e.to_string()))?;
    let token: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    let mut file = create_private(path)?;
    file.write_all(format!("{token}\n").as_bytes())?;
    file.sync_all()?;
    Ok(token)
}

/// The file's mode when its group or others may read or write it.
#[cfg(unix)]
pub(crate) fn open_to_others(path: &Path) -> std::io::Result<Option<u32>> {
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(path)?.permissions().mode() & 0o777;
    Ok((mode & 0o077 != 0).then_some(mode))
}

#[cfg(not(unix))]
pub(crate) fn open_to_others(_: &Path) -> std::io::Result<Option<u32>> {
    Ok(None)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(unix)]
    #[test]
    fn a_secret_file_others_can_read_is_refused_without_its_secret() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join(MQTT_PASSWORD_FILE);
        std::fs::write(&path, "s3cret pass\nignored\n").unwrap_or_else(|e| panic!("{e}"));
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644))
            .unwrap_or_else(|e| panic!("{e}"));
        let refused = read_secret_file(&path).map_err(|e| e.to_string());
        let message = refused.err().unwrap_or_default();
        assert!(
            message.contains("chmod 600") && !message.contains("s3cret"),
            "{message}"
        );
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(read_secret_file(&path).ok().as_deref(), Some("s3cret pass"));
    }

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

    #[cfg(unix)]
    #[test]
    fn a_token_others_can_read_is_replaced_by_a_private_one() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let leaked = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
        let path = token_path(dir.path());
        std::fs::write(&path, leaked).unwrap_or_else(|e| panic!("{e}"));
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644))
            .unwrap_or_else(|e| panic!("{e}"));
        let token = load_or_create(dir.path()).unwrap_or_else(|e| panic!("{e}"));
        assert_ne!(token, leaked);
        assert_eq!(token.len(), 64);
        let mode = std::fs::metadata(&path).map(|m| m.permissions().mode() & 0o777);
        assert_eq!(mode.ok(), Some(0o600));
        assert_eq!(load_or_create(dir.path()).ok(), Some(token));
    }

    #[cfg(unix)]
    #[test]
    fn a_new_data_folder_is_private() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let data = dir.path().join("a/wattbar");
        load_or_create(&data).unwrap_or_else(|e| panic!("{e}"));
        let mode = std::fs::metadata(&data).map(|m| m.permissions().mode() & 0o777);
        assert_eq!(mode.ok(), Some(0o700));
    }
}
