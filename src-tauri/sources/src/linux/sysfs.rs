//! Reading sysfs attributes and `/proc` files as Linux writes them.
//!
//! Limits: an attribute is at most a page (4 KiB) as the kernel writes it; one is read up to
//! [`MAX_ATTR_BYTES`] and a longer one (a tree given by `WATTBAR_SYSFS_ROOT`) is refused. A
//! `/proc` table is read up to [`MAX_PROC_FILE_BYTES`]; a command line's first
//! [`MAX_CMDLINE_BYTES`] are kept.

use std::path::Path;

/// The most of one attribute read.
pub const MAX_ATTR_BYTES: u64 = 64 * 1024;

/// The most of a `/proc` table read (`/proc/net/tcp` of about 400,000 sockets).
pub const MAX_PROC_FILE_BYTES: u64 = 64 << 20;
/// The most of `/proc/PID/cmdline` kept: a program's name and its first arguments.
pub const MAX_CMDLINE_BYTES: u64 = 64 * 1024;

/// Sysfs text as Linux writes it: read lossily, NUL padding and whitespace trimmed.
pub fn clean(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes)
        .trim_matches(|c: char| c == '\0' || c.is_whitespace())
        .to_string()
}

/// An attribute's bytes, up to [`MAX_ATTR_BYTES`].
pub fn read_attr_bytes(path: &Path) -> std::io::Result<Vec<u8>> {
    crate::capped::read_bytes_at_most(path, MAX_ATTR_BYTES)
}

/// A sysfs attribute, cleaned; `None` when it cannot be read (or is over [`MAX_ATTR_BYTES`]).
pub fn read_attr(path: &Path) -> Option<String> {
    read_attr_bytes(path).ok().map(|b| clean(&b))
}

/// A `/proc` table's text, up to [`MAX_PROC_FILE_BYTES`] (read lossily).
pub fn read_proc_text(path: &Path) -> std::io::Result<String> {
    crate::capped::read_bytes_at_most(path, MAX_PROC_FILE_BYTES)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
}

/// The first [`MAX_CMDLINE_BYTES`] of a process's command line.
pub fn read_cmdline_head(path: &Path) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let mut bytes = Vec::new();
    std::fs::File::open(path)?
        .take(MAX_CMDLINE_BYTES)
        .read_to_end(&mut bytes)?;
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_attribute_over_64_kib_is_not_read() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join("energy_uj");
        std::fs::write(&path, "1".repeat(70_000)).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(read_attr(&path), None);
        std::fs::write(&path, "123456\n").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(read_attr(&path).as_deref(), Some("123456"));
        assert_eq!(read_attr(Path::new("/dev/zero")), None);
    }
}
