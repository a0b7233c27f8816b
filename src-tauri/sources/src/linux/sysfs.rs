//! Reading sysfs attributes as Linux writes them.

use std::path::Path;

/// Sysfs text as Linux writes it: read lossily, NUL padding and whitespace trimmed.
pub fn clean(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes)
        .trim_matches(|c: char| c == '\0' || c.is_whitespace())
        .to_string()
}

/// A sysfs attribute, cleaned; `None` when it cannot be read.
pub fn read_attr(path: &Path) -> Option<String> {
    std::fs::read(path).ok().map(|b| clean(&b))
}
