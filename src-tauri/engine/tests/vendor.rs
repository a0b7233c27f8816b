//! The dashboard's committed uPlot (`ui/vendor/`) is the version `package-lock.json` locks, byte
//! for byte. The engine serves `ui/`, so the check lives here.
//!
//! The chain of trust: npm installs `node_modules/uplot` only if its tarball matches the lock's
//! `integrity`, and records what it installed in `node_modules/.package-lock.json`; the committed
//! files must then equal the installed ones. Without `node_modules` nothing can be compared, and
//! the test fails rather than pass unchecked: `scripts/setup` (which CI runs first) installs it.

use std::path::{Path, PathBuf};

/// The committed files and where each comes from in the npm package.
const FILES: [(&str, &str); 3] = [
    ("uPlot.iife.min.js", "dist/uPlot.iife.min.js"),
    ("uPlot.min.css", "dist/uPlot.min.css"),
    ("LICENSE", "LICENSE"),
];

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn json(path: &Path) -> serde_json::Value {
    serde_json::from_slice(&read(path)).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `(version, integrity)` of uPlot in a package-lock file.
fn locked_uplot(lock: &Path) -> (String, String) {
    let entry = &json(lock)["packages"]["node_modules/uplot"];
    let field = |name: &str| {
        entry[name]
            .as_str()
            .unwrap_or_else(|| panic!("{}: no uplot {name}", lock.display()))
            .to_string()
    };
    (field("version"), field("integrity"))
}

#[test]
fn the_committed_uplot_is_the_locked_version() {
    let repo = repo();
    let (version, integrity) = locked_uplot(&repo.join("package-lock.json"));
    let vendor = repo.join("ui/vendor");
    for (name, _) in FILES {
        let bytes = read(&vendor.join(name));
        assert!(!bytes.is_empty(), "ui/vendor/{name} is empty");
    }
    let js = String::from_utf8(read(&vendor.join("uPlot.iife.min.js")))
        .unwrap_or_else(|e| panic!("ui/vendor/uPlot.iife.min.js: {e}"));
    assert!(
        js.starts_with(&format!(
            "/*! https://github.com/leeoniya/uPlot (v{version}) */"
        )),
        "ui/vendor/uPlot.iife.min.js is not uPlot {version}: {:?}",
        js.get(..80)
    );
    assert!(
        js.contains("var uPlot="),
        "ui/vendor/uPlot.iife.min.js does not define the global uPlot the dashboard uses"
    );
    let readme = String::from_utf8_lossy(&read(&vendor.join("README.md"))).to_string();
    assert!(
        readme.contains(&format!("**{version}**")),
        "ui/vendor/README.md does not name the locked version {version}"
    );

    let installed = repo.join("node_modules/uplot");
    assert!(
        installed.is_dir(),
        "{} is missing: run scripts/setup (npm ci) so that ui/vendor can be compared with the \
         locked uPlot {version}",
        installed.display()
    );
    let installed_version = json(&installed.join("package.json"))["version"]
        .as_str()
        .map(str::to_string);
    assert_eq!(
        installed_version.as_deref(),
        Some(version.as_str()),
        "node_modules/uplot is not the locked version: run npm ci"
    );
    let (_, installed_integrity) = locked_uplot(&repo.join("node_modules/.package-lock.json"));
    assert_eq!(
        installed_integrity, integrity,
        "node_modules/uplot was not installed from the locked tarball: run npm ci"
    );
    for (name, source) in FILES {
        assert!(
            read(&vendor.join(name)) == read(&installed.join(source)),
            "ui/vendor/{name} differs from node_modules/uplot/{source} (uPlot {version}): \
             copy it as ui/vendor/README.md says"
        );
    }
}
