//! Wattbar's ledger: the SQLite file that keeps what the engine measured ([`store`]: the schema,
//! its migrations, the writes and the queries) and the engine's one writer ([`ledger`]: batches
//! in transactions), and readers' bounded read-only handle ([`reader`]).
//!
//! Rule: no sampling, no HTTP, no async runtime: the engine writes through [`ledger::Ledger`],
//! readers query a [`store::Store`] opened read-only through a [`reader::Reader`].

pub mod ledger;
pub mod reader;
pub mod store;

use std::path::Path;

/// Makes `dir` and its missing parents readable by this user only (0700): the folder holds the
/// API token and the ledger.
pub fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir)
}
