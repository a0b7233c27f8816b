//! Every process's CPU time, for energy per program: `/proc` under a root on Linux (and under
//! a fake root anywhere, for tests); on macOS, `sysinfo`'s process table with the kernel's own
//! per-process energy where it can be read ([`crate::macos::procs`]).

use crate::error::Error;
use crate::linux::procs::LinuxTable;
use std::path::Path;
use wattbar_core::programs::TableRead;

pub enum ProcessTable {
    Linux(LinuxTable),
    /// Reads given in advance, one per call (a replay, for tests and benches); then none.
    Replay(std::collections::VecDeque<TableRead>),
    #[cfg(target_os = "macos")]
    Mac(crate::macos::procs::MacTable),
}

impl ProcessTable {
    /// This machine's processes where `root` is `/`; the `/proc` tree under `root` otherwise.
    pub fn new(root: &Path) -> Self {
        #[cfg(target_os = "macos")]
        if root == Path::new("/") {
            return ProcessTable::Mac(crate::macos::procs::MacTable::new());
        }
        ProcessTable::Linux(LinuxTable::new(root))
    }

    pub fn read(&mut self) -> Result<TableRead, Error> {
        match self {
            ProcessTable::Linux(t) => t.read(),
            ProcessTable::Replay(reads) => reads
                .pop_front()
                .ok_or_else(|| Error::Transient("the replayed process reads are over".into())),
            #[cfg(target_os = "macos")]
            ProcessTable::Mac(t) => t.read(),
        }
    }
}
