//! Which Wattbar this is. The version has one source, the workspace's `Cargo.toml` (the bundles
//! read it there too); every program prints [`LONG_VERSION`] for `--version`.

/// The workspace's version, as `0.1.0`.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The version with the commit it was built from: `0.1.0 (commit 1a2b3c4d5e6f)`.
pub const LONG_VERSION: &str = env!("WATTBAR_LONG_VERSION");
