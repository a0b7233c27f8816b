//! The ledger as readers see it: the API, the app's windows and `wattbar-cli`. The engine's
//! [`Ledger`](wattbar_ledger::ledger::Ledger) is the only writer.
//!
//! Rules:
//! - Read-only: the file is opened with SQLite's read-only flag, so no reader can write it.
//! - One connection, opened at the first query and kept, shared by every clone: a query does
//!   not pay for opening the file and reading its schema again.
//! - Bounded: at most [`MAX_JOBS`] queries wait or run at once, each on tokio's blocking pool,
//!   never on an async worker. One more is refused at once with [`Error::Busy`] (the API answers
//!   503 with `Retry-After`), so that a client asking for reports in a loop cannot pile up
//!   threads and memory.
//! - A ledger from a newer Wattbar is refused by name ([`StoreError::Newer`]); a ledger not
//!   written yet is no error: the query answers `None`.
//!
//! [`StoreError::Newer`]: wattbar_ledger::store::StoreError::Newer

use crate::error::Error;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use tokio::sync::Semaphore;
use wattbar_ledger::store::Store;

/// Queries waiting or running at once; the next is refused.
pub const MAX_JOBS: usize = 4;

/// A read-only handle on one ledger file; clones share its connection and its bound.
#[derive(Clone)]
pub struct LedgerReader {
    inner: Arc<Inner>,
}

struct Inner {
    path: PathBuf,
    connection: Mutex<Option<Store>>,
    jobs: Arc<Semaphore>,
}

impl LedgerReader {
    pub fn new(path: PathBuf) -> Self {
        LedgerReader::with_jobs(path, MAX_JOBS)
    }

    /// A reader that lets at most `jobs` queries wait or run at once.
    pub fn with_jobs(path: PathBuf, jobs: usize) -> Self {
        LedgerReader {
            inner: Arc::new(Inner {
                path,
                connection: Mutex::new(None),
                jobs: Arc::new(Semaphore::new(jobs.min(Semaphore::MAX_PERMITS))),
            }),
        }
    }

    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// Runs `query` on the ledger on tokio's blocking pool. `Ok(None)`: no ledger written yet.
    /// [`Error::Busy`] when [`MAX_JOBS`] queries are already waiting or running.
    pub async fn read<T, F>(&self, query: F) -> Result<Option<T>, Error>
    where
        T: Send + 'static,
        F: FnOnce(&Store) -> Result<T, Error> + Send + 'static,
    {
        let permit = Arc::clone(&self.inner.jobs)
            .try_acquire_owned()
            .map_err(|_| Error::Busy)?;
        let inner = Arc::clone(&self.inner);
        tokio::task::spawn_blocking(move || {
            let answer = inner.run(query);
            drop(permit);
            answer
        })
        .await
        .map_err(|e| Error::Refused(format!("the ledger query failed: {e}")))?
    }

    /// [`read`](Self::read) on the calling thread, for a caller with no runtime (the CLI).
    pub fn read_blocking<T>(
        &self,
        query: impl FnOnce(&Store) -> Result<T, Error>,
    ) -> Result<Option<T>, Error> {
        let _permit = self.inner.jobs.try_acquire().map_err(|_| Error::Busy)?;
        self.inner.run(query)
    }
}

impl Inner {
    fn run<T>(&self, query: impl FnOnce(&Store) -> Result<T, Error>) -> Result<Option<T>, Error> {
        let mut connection = self.connection.lock().unwrap_or_else(|e| e.into_inner());
        let store = match connection.take() {
            Some(store) => store,
            None if !self.path.exists() => return Ok(None),
            None => Store::open_read_only(&self.path)?,
        };
        let answer = query(&store);
        *connection = Some(store);
        answer.map(Some)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wattbar_ledger::store::{Row, StoreError};

    fn row(t: f64) -> Row {
        Row {
            t,
            seconds: 1.0,
            watts: Some(300.0),
            joules: 300.0,
            cost: 0.0,
            by_domain: Vec::new(),
            currency: "EUR".into(),
        }
    }

    #[tokio::test]
    async fn a_ledger_not_written_yet_answers_nothing_then_what_the_writer_wrote() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join(wattbar_ledger::store::DB_FILE);
        let reader = LedgerReader::new(path.clone());
        let before = reader.read(|s| Ok(s.lifetime("EUR")?.joules)).await;
        assert!(matches!(before, Ok(None)), "{:?}", before.err());
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
        let lifetime = reader.read(|s| Ok(s.lifetime("EUR")?.joules)).await;
        assert_eq!(lifetime.ok().flatten(), Some(180_000.0));
        // The kept connection sees the next batch too.
        writer
            .write_batch(session, &[row(1_700_000_601.0)], 180_300.0, 0.0)
            .unwrap_or_else(|e| panic!("{e}"));
        let lifetime = reader.read(|s| Ok(s.lifetime("EUR")?.joules)).await;
        assert_eq!(lifetime.ok().flatten(), Some(180_300.0));
    }

    #[tokio::test]
    async fn a_reader_cannot_write() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join(wattbar_ledger::store::DB_FILE);
        drop(Store::open(&path, 1_700_000_000.0).unwrap_or_else(|e| panic!("{e}")));
        let mut reader = Store::open_read_only(&path).unwrap_or_else(|e| panic!("{e}"));
        let written = reader.start_session(1_700_000_000.0, "EUR");
        assert!(
            matches!(written, Err(StoreError::Sql { .. })),
            "a read-only connection wrote"
        );
    }

    #[tokio::test]
    async fn past_its_bound_a_query_is_refused_at_once_and_the_next_one_runs() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join(wattbar_ledger::store::DB_FILE);
        drop(Store::open(&path, 1_700_000_000.0).unwrap_or_else(|e| panic!("{e}")));
        let reader = LedgerReader::with_jobs(path, 1);
        // The one job holds the connection until told to let go.
        let (release, held) = std::sync::mpsc::channel::<()>();
        let (started_tx, started) = tokio::sync::oneshot::channel();
        let slow = {
            let reader = reader.clone();
            tokio::spawn(async move {
                reader
                    .read(move |_| {
                        let _ = started_tx.send(());
                        let _ = held.recv();
                        Ok(1)
                    })
                    .await
            })
        };
        started.await.unwrap_or_else(|e| panic!("{e}"));
        let refused = reader.read(|_| Ok(2)).await;
        assert!(matches!(refused, Err(Error::Busy)), "{refused:?}");
        let _ = release.send(());
        let first = slow.await.unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(first.ok().flatten(), Some(1));
        assert_eq!(reader.read(|_| Ok(3)).await.ok().flatten(), Some(3));
    }
}
