//! The ledger as readers see it: the API, the app's windows and `wattbar-cli`. The engine's
//! [`Ledger`](crate::ledger::Ledger) is the only writer.
//!
//! Rules:
//! - Read-only: the file is opened with SQLite's read-only flag, so no reader can write it.
//! - One connection, opened at the first query and kept, shared by every clone: a query does
//!   not pay for opening the file and reading its schema again.
//! - Bounded: at most [`MAX_JOBS`] queries hold a [`Permit`] at once; one more is refused at once
//!   (`None`), so that a client asking for reports in a loop cannot pile up threads and memory.
//!   The caller picks the thread a permit's query runs on (an async caller, a blocking pool).
//! - A ledger from a newer Wattbar is refused by name ([`StoreError::Newer`]); a ledger not
//!   written yet is no error: the query answers `None`.

use crate::store::{Store, StoreError};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// Queries waiting or running at once; the next is refused.
pub const MAX_JOBS: usize = 4;

/// A read-only handle on one ledger file; clones share its connection and its bound.
#[derive(Clone)]
pub struct Reader {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Reader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reader")
            .field("path", &self.inner.path)
            .finish_non_exhaustive()
    }
}

struct Inner {
    path: PathBuf,
    connection: Mutex<Option<Store>>,
    jobs: AtomicUsize,
    max_jobs: usize,
}

/// One of a reader's bounded places: the right to run one query.
pub struct Permit {
    inner: Arc<Inner>,
}

impl Reader {
    pub fn new(path: PathBuf) -> Self {
        Reader::with_jobs(path, MAX_JOBS)
    }

    /// A reader that lets at most `jobs` queries wait or run at once.
    pub fn with_jobs(path: PathBuf, jobs: usize) -> Self {
        Reader {
            inner: Arc::new(Inner {
                path,
                connection: Mutex::new(None),
                jobs: AtomicUsize::new(0),
                max_jobs: jobs,
            }),
        }
    }

    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// A place for one query, or `None` when [`MAX_JOBS`] queries hold one already.
    pub fn permit(&self) -> Option<Permit> {
        let max = self.inner.max_jobs;
        self.inner
            .jobs
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < max).then_some(n + 1)
            })
            .ok()
            .map(|_| Permit {
                inner: Arc::clone(&self.inner),
            })
    }
}

impl Permit {
    /// Runs `query` on the kept connection, on the calling thread. `Ok(None)`: no ledger
    /// written yet.
    pub fn run<T, E: From<StoreError>>(
        self,
        query: impl FnOnce(&Store) -> Result<T, E>,
    ) -> Result<Option<T>, E> {
        let inner = &self.inner;
        let mut connection = inner.connection.lock().unwrap_or_else(|e| e.into_inner());
        let store = match connection.take() {
            Some(store) => store,
            None if !inner.path.exists() => return Ok(None),
            None => Store::open_read_only(&inner.path)?,
        };
        let answer = query(&store);
        *connection = Some(store);
        answer.map(Some)
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        self.inner.jobs.fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{Row, DB_FILE};

    fn row(t: f64) -> Row {
        Row {
            t,
            seconds: 1.0,
            start: None,
            watts: Some(300.0),
            joules: 300.0,
            cost: 0.0,
            by_domain: Vec::new(),
            currency: "EUR".into(),
            scope: Some(wattbar_core::Scope::Components),
            quality: None,
            method: None,
            answered: None,
            slots: Vec::new(),
        }
    }

    fn lifetime(reader: &Reader) -> Result<Option<f64>, StoreError> {
        let permit = reader.permit().unwrap_or_else(|| panic!("no place"));
        permit.run(|s| {
            Ok(s.lifetime("EUR", Some(wattbar_core::Scope::Components))?
                .joules)
        })
    }

    #[test]
    fn a_ledger_not_written_yet_answers_nothing_then_what_the_writer_wrote() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join(DB_FILE);
        let reader = Reader::new(path.clone());
        assert!(matches!(lifetime(&reader), Ok(None)));
        let (mut writer, _) = Store::open(&path, 1_700_000_000.0).unwrap_or_else(|e| panic!("{e}"));
        let session = writer
            .start_session(1_700_000_000.0, "EUR")
            .unwrap_or_else(|e| panic!("{e}"));
        let rows: Vec<Row> = (1..=600)
            .map(|i| row(1_700_000_000.0 + f64::from(i)))
            .collect();
        writer
            .write_batch(session, &rows, 180_000.0, 0.0)
            .unwrap_or_else(|e| panic!("{e}"));
        // 300 W × 600 s = 180 kJ.
        assert_eq!(lifetime(&reader).ok().flatten(), Some(180_000.0));
        // The kept connection sees the next batch too.
        writer
            .write_batch(session, &[row(1_700_000_601.0)], 180_300.0, 0.0)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(lifetime(&reader).ok().flatten(), Some(180_300.0));
    }

    #[test]
    fn a_reader_cannot_write() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join(DB_FILE);
        drop(Store::open(&path, 1_700_000_000.0).unwrap_or_else(|e| panic!("{e}")));
        let mut reader = Store::open_read_only(&path).unwrap_or_else(|e| panic!("{e}"));
        let written = reader.start_session(1_700_000_000.0, "EUR");
        assert!(
            matches!(written, Err(StoreError::Sql { .. })),
            "a read-only connection wrote"
        );
    }

    #[test]
    fn past_its_bound_a_place_is_refused_until_one_is_given_back() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let reader = Reader::with_jobs(dir.path().join(DB_FILE), 2);
        let first = reader.permit();
        let second = reader.clone().permit();
        assert!(first.is_some() && second.is_some());
        assert!(reader.permit().is_none(), "a third place was given");
        drop(first);
        let third = reader.permit();
        assert!(third.is_some(), "a place given back was not given again");
        let answered: Result<Option<u8>, StoreError> =
            third.unwrap_or_else(|| panic!("no place")).run(|_| Ok(3));
        // No ledger written yet: no answer, and no error.
        assert!(matches!(answered, Ok(None)));
        assert!(reader.permit().is_some());
    }
}
