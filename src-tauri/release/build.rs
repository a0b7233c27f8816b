//! Bakes the commit into `WATTBAR_LONG_VERSION`: `WATTBAR_COMMIT` when the builder gives it (a
//! source tarball has no git), else `git rev-parse` of the checkout. Only this crate reads git, so
//! a new commit rebuilds it and the three programs that print it, nothing else.

use std::path::{Path, PathBuf};
use std::process::Command;

fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8(out.stdout).ok()?.trim().to_owned();
    (!text.is_empty()).then_some(text)
}

fn main() {
    println!("cargo:rerun-if-env-changed=WATTBAR_COMMIT");
    let here = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    let commit = match std::env::var("WATTBAR_COMMIT") {
        Ok(c) if !c.trim().is_empty() => Some(c.trim().to_owned()),
        _ => {
            // Rebuild when HEAD moves: HEAD itself, the branch it names, and packed refs. Only
            // files that exist are named: cargo reruns a script on every build for a missing one.
            if let Some(git_dir) = git(&here, &["rev-parse", "--absolute-git-dir"]) {
                let git_dir = PathBuf::from(git_dir);
                let branch = git(&here, &["symbolic-ref", "-q", "HEAD"]);
                let watched = [
                    Some("HEAD".to_owned()),
                    Some("packed-refs".to_owned()),
                    branch,
                ];
                for file in watched.into_iter().flatten().map(|f| git_dir.join(f)) {
                    if file.is_file() {
                        println!("cargo:rerun-if-changed={}", file.display());
                    }
                }
            }
            git(&here, &["rev-parse", "--short=12", "HEAD"])
        }
    };
    let version = std::env::var("CARGO_PKG_VERSION").unwrap_or_default();
    let long = match commit {
        Some(c) => format!("{version} (commit {c})"),
        None => format!("{version} (commit unknown: built outside a git checkout)"),
    };
    println!("cargo:rustc-env=WATTBAR_LONG_VERSION={long}");
}
