//! The machine's settings a sweep turns (`profile --sweep`), and the promise to put them back.
//!
//! Rules:
//! - One sweep at a time per data folder: `<data folder>/sweep.lock`, the operating system's lock
//!   (`flock`), held for the sweep's life and gone with its process, even after a kill -9.
//! - Before the first change the setting as it was is journalled in `<data folder>/knobs.json`
//!   (written whole, synced, the folder synced), so nothing can change it unrecorded.
//! - The sweep puts it back itself on success, on an error, on Ctrl+C and on SIGTERM, and then
//!   removes the journal. After a kill -9 or a power loss the journal is still there: the next
//!   start of any Wattbar program ([`restore_left_over`]: the tray, every `wattbar-cli` command)
//!   takes the lock, puts the setting back, says so and removes the journal. While a sweep runs
//!   (its lock held) nobody touches its journal.
//! - A setting that cannot be read or changed says why and what privilege it needs.

mod gpu;
mod journal;
mod knob;
mod rapl;
mod values;

pub use gpu::{GpuClock, GpuLimit};
pub use journal::{restore_left_over, Sweep, JOURNAL_FILE, LOCK_FILE};
pub use knob::{Knob, KnobKind};
pub use rapl::RaplLimit;
