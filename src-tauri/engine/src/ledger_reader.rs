//! The ledger's read-only [`Reader`](wattbar_ledger::reader::Reader) for async callers: each
//! query runs on tokio's blocking pool, never on an async worker, and past the reader's bound
//! is refused at once with [`Error::Busy`] (the API answers 503 with `Retry-After`).

use crate::error::Error;
use std::path::{Path, PathBuf};
use wattbar_ledger::reader::Reader;
use wattbar_ledger::store::Store;

pub use wattbar_ledger::reader::MAX_JOBS;

/// A read-only handle on one ledger file; clones share its connection and its bound.
#[derive(Clone, Debug)]
pub struct LedgerReader(Reader);

impl LedgerReader {
    pub fn new(path: PathBuf) -> Self {
        LedgerReader(Reader::new(path))
    }

    /// A reader that lets at most `jobs` queries wait or run at once.
    pub fn with_jobs(path: PathBuf, jobs: usize) -> Self {
        LedgerReader(Reader::with_jobs(path, jobs))
    }

    pub fn path(&self) -> &Path {
        self.0.path()
    }

    /// Runs `query` on the ledger on tokio's blocking pool. `Ok(None)`: no ledger written yet.
    pub async fn read<T, F>(&self, query: F) -> Result<Option<T>, Error>
    where
        T: Send + 'static,
        F: FnOnce(&Store) -> Result<T, Error> + Send + 'static,
    {
        let permit = self.0.permit().ok_or(Error::Busy)?;
        tokio::task::spawn_blocking(move || permit.run(query))
            .await
            .map_err(|e| Error::Refused(format!("the ledger query failed: {e}")))?
    }

    /// [`read`](Self::read) on the calling thread, for a caller with no runtime (the CLI).
    pub fn read_blocking<T>(
        &self,
        query: impl FnOnce(&Store) -> Result<T, Error>,
    ) -> Result<Option<T>, Error> {
        self.0.permit().ok_or(Error::Busy)?.run(query)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
