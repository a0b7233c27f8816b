//! `wattbar-cli --version` and `--help` print and exit, with no engine started.

use crate::common::cli;

#[test]
fn version_and_help_print_and_exit_with_no_engine_started() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let out = cli(dir.path())
        .arg("--version")
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(out.status.success(), "{out:?}");
    // The workspace's version and the commit checked out, which a fresh clone builds.
    let head = std::process::Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    let head = String::from_utf8_lossy(&head.stdout).trim().to_owned();
    assert_eq!(head.len(), 12, "git rev-parse: {head}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        format!("wattbar-cli {} (commit {head})", env!("CARGO_PKG_VERSION"))
    );
    let out = cli(dir.path())
        .arg("--help")
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(out.status.success(), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("Usage: wattbar-cli <COMMAND>"));
    let out = cli(dir.path())
        .arg("--bogus")
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    // Nothing was started: no lock, ledger or token in the data folder.
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .map(|d| d.filter_map(|e| e.ok()).map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "{left:?}");
}
