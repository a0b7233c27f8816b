//! Which Wattbar this is. The version has one source, the workspace's `Cargo.toml` (the bundles
//! read it there too); every program prints [`LONG_VERSION`] for `--version`.

/// The workspace's version, as `0.1.0`.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The version with the commit it was built from: `0.1.0 (commit 1a2b3c4d5e6f)`.
pub const LONG_VERSION: &str = env!("WATTBAR_LONG_VERSION");

pub mod update;

/// The keys a check trusts: [`update::RELEASE_KEYS`]; a debug build also trusts the one in
/// `WATTBAR_UPDATE_TEST_KEY` (base64), so the tests can sign manifests of their own. A release
/// build never reads it.
pub fn trusted_keys() -> Vec<String> {
    let mut keys: Vec<String> = update::RELEASE_KEYS
        .iter()
        .map(|k| (*k).to_owned())
        .collect();
    if cfg!(debug_assertions) {
        if let Ok(k) = std::env::var("WATTBAR_UPDATE_TEST_KEY") {
            keys.push(k);
        }
    }
    keys
}
