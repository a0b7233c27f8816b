//! The Homebrew formula (`packaging/homebrew/wattbar.rb.in`), rendered by `scripts/render-formula`
//! from a source tarball that `git archive` makes of this checkout, as a release would.

use crate::common::repo_root;
use sha2::Digest;
use std::process::Command;

fn git(args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(repo_root())
        .output()
        .unwrap_or_else(|e| panic!("git: {e}"));
    assert!(out.status.success(), "git {args:?}: {out:?}");
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

fn render(tarball: &std::path::Path, url: &str) -> std::process::Output {
    Command::new(repo_root().join("scripts/render-formula"))
        .arg(tarball)
        .arg(url)
        .output()
        .unwrap_or_else(|e| panic!("render-formula: {e}"))
}

#[test]
fn the_formula_of_a_source_tarball_names_its_sha256_version_commit_and_a_loopback_service() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let version = env!("CARGO_PKG_VERSION");
    let tarball = dir.path().join(format!("wattbar-{version}.tar.gz"));
    let prefix = format!("--prefix=wattbar-{version}/");
    let out = tarball.display().to_string();
    git(&["archive", "--format=tar.gz", &prefix, "-o", &out, "HEAD"]);
    let url = format!("https://example.org/releases/wattbar-{version}.tar.gz");

    let rendered = render(&tarball, &url);
    assert!(rendered.status.success(), "{rendered:?}");
    let formula = String::from_utf8_lossy(&rendered.stdout).into_owned();
    let bytes = std::fs::read(&tarball).unwrap_or_else(|e| panic!("{e}"));
    let sha: String = sha2::Sha256::digest(&bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let commit = git(&["rev-parse", "--short=12", "HEAD"]);
    for line in [
        format!("  url \"{url}\""),
        format!("  sha256 \"{sha}\""),
        format!("  version \"{version}\""),
        format!("    ENV[\"WATTBAR_COMMIT\"] = \"{commit}\""),
        "    system \"cargo\", \"install\", *std_cargo_args(path: \"src-tauri/cli\")".into(),
        "    run [opt_bin/\"wattbar-cli\", \"serve\", \"--listen\", \"127.0.0.1:9471\"]".into(),
    ] {
        assert!(formula.lines().any(|l| l == line), "{line}\n{formula}");
    }
    assert!(!formula.contains('@'), "a placeholder is left:\n{formula}");
    // The crate it installs is in the tarball, where the formula says.
    let listed = Command::new("tar")
        .arg("-tzf")
        .arg(&tarball)
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    let listed = String::from_utf8_lossy(&listed.stdout);
    assert!(listed
        .lines()
        .any(|l| l == format!("wattbar-{version}/src-tauri/cli/Cargo.toml")));

    // Ruby reads it.
    let file = dir.path().join("wattbar.rb");
    std::fs::write(&file, &formula).unwrap_or_else(|e| panic!("{e}"));
    let ruby = Command::new("ruby")
        .arg("-c")
        .arg(&file)
        .output()
        .unwrap_or_else(|e| panic!("ruby: {e}"));
    assert!(ruby.status.success(), "{ruby:?}");
}

#[test]
fn a_tarball_without_a_commit_or_a_url_that_is_not_one_is_refused() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let plain = dir.path().join("plain.tar.gz");
    let made = Command::new("tar")
        .arg("-czf")
        .arg(&plain)
        .arg("-C")
        .arg(repo_root())
        .arg("Cargo.toml")
        .status()
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(made.success());
    let out = render(&plain, "https://example.org/x.tar.gz");
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("holds no commit id"));

    let out = render(&plain, "file:///tmp/x.tar.gz");
    assert_eq!(out.status.code(), Some(2), "{out:?}");
}
