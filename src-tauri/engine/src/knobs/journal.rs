//! The sweep's lock and its journal of the setting as it was (the rules are in [`super`]).

use super::knob::{Knob, KnobKind};
use crate::error::Error;
use serde::{Deserialize, Serialize};
use std::fs::{File, OpenOptions, TryLockError};
use std::path::{Path, PathBuf};

/// Held for a sweep's life.
pub const LOCK_FILE: &str = "sweep.lock";
/// The setting as it was before the sweep's first change.
pub const JOURNAL_FILE: &str = "knobs.json";
/// The most a journal may hold; more is not one Wattbar wrote.
const MAX_JOURNAL_BYTES: u64 = 4096;

/// What the journal holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Entry {
    knob: KnobKind,
    /// The value to put back.
    original: String,
    /// The sweep's process.
    pid: u32,
    /// When it journalled, Unix seconds.
    since: f64,
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
    move |source| Error::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// The sweep lock, taken at once or `None` where a sweep holds it.
fn try_lock(dir: &Path) -> Result<Option<File>, Error> {
    let path = dir.join(LOCK_FILE);
    crate::home::paths::create_private_dir(dir).map_err(io(dir))?;
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(io(&path))?;
    match file.try_lock() {
        Ok(()) => Ok(Some(file)),
        Err(TryLockError::WouldBlock) => Ok(None),
        Err(TryLockError::Error(e)) => Err(io(&path)(e)),
    }
}

fn read_entry(path: &Path) -> Result<Option<Entry>, Error> {
    let text = match crate::home::paths::read_at_most(path, MAX_JOURNAL_BYTES) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io(path)(e)),
    };
    serde_json::from_str(&text)
        .map(Some)
        .map_err(|e| Error::Parse {
            path: path.to_path_buf(),
            message: format!("not a sweep's journal ({e}); set it aside and check the setting"),
        })
}

/// Writes the entry whole and durably: the file synced, then its folder, so a power loss just
/// after cannot lose it.
fn write_entry(path: &Path, entry: &Entry) -> Result<(), Error> {
    let text = serde_json::to_string(entry).map_err(|e| Error::Parse {
        path: path.to_path_buf(),
        message: e.to_string(),
    })?;
    crate::home::paths::write_whole(path, &text).map_err(io(path))?;
    sync_folder(path)
}

fn sync_folder(path: &Path) -> Result<(), Error> {
    let dir = path.parent().unwrap_or_else(|| Path::new("."));
    File::open(dir).and_then(|d| d.sync_all()).map_err(io(dir))
}

fn remove(path: &Path) -> Result<(), Error> {
    match std::fs::remove_file(path) {
        Ok(()) => sync_folder(path),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(io(path)(e)),
    }
}

/// Puts a journalled setting back, unless a sweep is running; what was done, in words, where
/// anything was. A setting that cannot be put back keeps its journal for the next start.
pub async fn restore_left_over(dir: &Path) -> Option<Result<String, Error>> {
    let path = dir.join(JOURNAL_FILE);
    if !path.exists() {
        return None;
    }
    let _lock = match try_lock(dir) {
        Ok(Some(lock)) => lock,
        Ok(None) => return None,
        Err(e) => return Some(Err(e)),
    };
    put_back_journalled(&path).await.transpose()
}

/// With the lock held: the journal's setting put back and the journal removed, in words;
/// `None` where there was no journal.
async fn put_back_journalled(path: &Path) -> Result<Option<String>, Error> {
    let Some(entry) = read_entry(path)? else {
        return Ok(None);
    };
    let knob = Knob::open(entry.knob).await?;
    let now = knob.current().await?;
    if now != entry.original {
        knob.set(&entry.original).await?;
    }
    remove(path)?;
    Ok(Some(format!(
        "{} is back to {} ({now} before): a sweep (pid {}) ended without putting it back",
        entry.knob.describe(),
        entry.original,
        entry.pid
    )))
}

/// A sweep under way: its lock held, the setting as it was journalled. [`Sweep::restore`]
/// puts it back; a sweep that ends without (a panic, a kill) leaves the journal for the next
/// start.
pub struct Sweep {
    _lock: File,
    journal: PathBuf,
    knob: Knob,
    original: String,
}

impl Sweep {
    /// Takes the folder's sweep lock (refused where a sweep holds it), puts back what an
    /// earlier sweep left, and journals the setting as it is now.
    pub async fn begin(dir: &Path, kind: KnobKind) -> Result<(Sweep, Option<String>), Error> {
        let lock = try_lock(dir)?.ok_or_else(|| {
            Error::Refused(format!(
                "another sweep is running on {}: one at a time, as its settings would mix",
                dir.display()
            ))
        })?;
        let journal = dir.join(JOURNAL_FILE);
        let left_over = put_back_journalled(&journal).await?;
        let knob = Knob::open(kind).await?;
        let original = knob.current().await?;
        write_entry(
            &journal,
            &Entry {
                knob: kind,
                original: original.clone(),
                pid: std::process::id(),
                since: crate::unix_now(),
            },
        )?;
        Ok((
            Sweep {
                _lock: lock,
                journal,
                knob,
                original,
            },
            left_over,
        ))
    }

    /// The value the sweep started from.
    pub fn original(&self) -> &str {
        &self.original
    }

    pub fn knob(&self) -> &Knob {
        &self.knob
    }

    /// Puts the setting back and removes the journal; what was done, in words.
    pub async fn restore(self) -> Result<String, Error> {
        let now = self.knob.current().await?;
        if now != self.original {
            self.knob.set(&self.original).await?;
        }
        remove(&self.journal)?;
        Ok(if now == self.original {
            format!(
                "{} is {}, as it was",
                self.knob.kind().describe(),
                self.original
            )
        } else {
            format!(
                "{} is back to {} (from {now})",
                self.knob.kind().describe(),
                self.original
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_journal_is_read_back_as_written_and_a_foreign_file_refused() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join(JOURNAL_FILE);
        assert_eq!(read_entry(&path).ok(), Some(None));
        let entry = Entry {
            knob: KnobKind::Powermode,
            original: "balanced".into(),
            pid: 42,
            since: 1.5,
        };
        write_entry(&path, &entry).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(read_entry(&path).ok(), Some(Some(entry)));
        std::fs::write(&path, "{\"knob\": \"volume\"}").unwrap_or_else(|e| panic!("{e}"));
        assert!(read_entry(&path).is_err());
        std::fs::write(&path, "x".repeat(MAX_JOURNAL_BYTES as usize + 1))
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(read_entry(&path).is_err());
    }

    #[test]
    fn the_lock_admits_one_holder() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let first = try_lock(dir.path()).unwrap_or_else(|e| panic!("{e}"));
        assert!(first.is_some());
        assert!(matches!(try_lock(dir.path()), Ok(None)));
        drop(first);
        assert!(matches!(try_lock(dir.path()), Ok(Some(_))));
    }
}
