//! Reading a file whole, within a stated size: never more than the limit and one byte is read,
//! whatever the file says its size is (a FIFO, `/dev/zero`, a file still growing, a fake tree).

use std::io::Read;
use std::path::Path;

/// The bytes of the file at `path`, refused (`FileTooLarge`, naming `max_bytes`) where it holds
/// more.
pub fn read_bytes_at_most(path: &Path, max_bytes: u64) -> std::io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    std::fs::File::open(path)?
        .take(max_bytes.saturating_add(1))
        .read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max_bytes {
        return Err(std::io::Error::new(
            std::io::ErrorKind::FileTooLarge,
            format!("more than the {max_bytes} bytes it may hold"),
        ));
    }
    Ok(bytes)
}

/// [`read_bytes_at_most`] as text; bytes that are not UTF-8 are `InvalidData`.
pub fn read_at_most(path: &Path, max_bytes: u64) -> std::io::Result<String> {
    String::from_utf8(read_bytes_at_most(path, max_bytes)?)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
}
