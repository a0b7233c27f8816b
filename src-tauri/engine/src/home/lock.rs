//! One engine per data folder: an exclusive lock on `<data folder>/engine.lock`, held for the
//! engine's life.
//!
//! Rule: whoever writes the ledger holds the lock: the tray app's engine, `wattbar-cli serve`
//! or `watch`, and the one-shot `reset-session` when no engine runs. A second engine on the same
//! folder is refused at once with the holder's pid and API address, which the lock file names,
//! so that a client can go to it instead. The lock is the operating system's (`flock` on Unix):
//! it goes with the process, even after a kill -9, so a stale file never blocks anyone.
//!
//! Asking who holds a folder ([`EngineLock::holder`]) takes a shared lock for a moment (flock
//! cannot be asked without taking it); an engine starting in that moment tries again for up to
//! [`PROBE_GRACE`], so a window polling at start never turns the tray away.

use crate::error::Error;
use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};

pub const LOCK_FILE: &str = "engine.lock";
/// How long [`EngineLock::acquire`] tries again while the lock is held, which a probe's moment
/// never outlasts and a running engine always does.
pub const PROBE_GRACE: std::time::Duration = std::time::Duration::from_millis(200);

/// Who holds a data folder, as its lock file says.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Holder {
    pub pid: Option<u32>,
    /// The holder's HTTP API, `host:port`, when it serves one.
    pub api: Option<String>,
}

impl Holder {
    fn parse(text: &str) -> Holder {
        let mut holder = Holder::default();
        for line in text.lines() {
            match line.split_once('=') {
                Some(("pid", v)) => holder.pid = v.trim().parse().ok(),
                Some(("api", v)) if !v.trim().is_empty() => holder.api = Some(v.trim().into()),
                _ => {}
            }
        }
        holder
    }
}

/// The held lock; dropping it releases the folder.
#[derive(Debug)]
pub struct EngineLock {
    file: File,
    path: PathBuf,
}

impl EngineLock {
    /// Takes the lock on `dir`, or says who holds it ([`Error::Locked`]).
    pub fn acquire(dir: &Path, api: Option<&str>) -> Result<EngineLock, Error> {
        let path = dir.join(LOCK_FILE);
        let io = |source| Error::Io {
            path: path.clone(),
            source,
        };
        crate::home::paths::create_private_dir(dir).map_err(io)?;
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(io)?;
        let started = std::time::Instant::now();
        let locked = loop {
            match file.try_lock() {
                Err(TryLockError::WouldBlock) if started.elapsed() < PROBE_GRACE => {
                    std::thread::sleep(std::time::Duration::from_millis(5));
                }
                other => break other,
            }
        };
        match locked {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                let mut text = String::new();
                let _ = file.read_to_string(&mut text);
                let holder = Holder::parse(&text);
                return Err(Error::Locked {
                    dir: dir.to_path_buf(),
                    pid: holder.pid,
                    api: holder.api,
                });
            }
            Err(TryLockError::Error(e)) => return Err(io(e)),
        }
        let mut lock = EngineLock { file, path };
        lock.write(api)?;
        Ok(lock)
    }

    /// Names the API address in the lock file, for clients to find.
    pub fn set_api(&mut self, api: Option<&str>) -> Result<(), Error> {
        self.write(api)
    }

    fn write(&mut self, api: Option<&str>) -> Result<(), Error> {
        let text = format!("pid={}\napi={}\n", std::process::id(), api.unwrap_or(""));
        let path = self.path.clone();
        (|| {
            self.file.set_len(0)?;
            self.file.rewind()?;
            self.file.write_all(text.as_bytes())?;
            self.file.flush()
        })()
        .map_err(|source| Error::Io { path, source })
    }

    /// Who holds `dir` now; `None` when nobody does.
    pub fn holder(dir: &Path) -> Option<Holder> {
        let path = dir.join(LOCK_FILE);
        let mut file = OpenOptions::new().read(true).open(path).ok()?;
        match file.try_lock_shared() {
            Ok(()) => None,
            Err(_) => {
                let mut text = String::new();
                file.read_to_string(&mut text).ok()?;
                Some(Holder::parse(&text))
            }
        }
    }
}
