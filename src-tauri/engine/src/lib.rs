//! wattbar-engine: the engine shared by the tray app and the CLI, in parts.
//!
//! Data flows one way: sources feed the [`Chain`](wattbar_core::Chain), the chain gives a
//! snapshot, the [`stages`] observe it in turn ([`stages::meter`] turns it into energy, cost and
//! carbon through [`accounting`]), [`recorder`] writes it to the ledger, and the [`runner`]
//! publishes the result on a tokio `watch` channel as a [`PublishedState`] state ([`published`]).
//! Everything that shows Wattbar's numbers reads that state through a [`handle`]; changes come
//! back only as [`Command`]s. [`time`] holds the engine's clock and its one timed wait, [`home`]
//! the data folder's files (its lock makes the engine the only one of its folder).

pub mod accounting;
pub mod advice;
pub mod budget;
pub mod command;
pub mod error;
pub mod handle;
pub mod home;
pub mod inbox;
pub mod inference;
pub mod keys;
pub mod knobs;
pub mod ledger_reader;
pub mod logging;
pub mod os_power;
pub mod programs;
pub mod published;
pub mod recorder;
pub mod report;
pub mod ring;
pub mod runner;
pub mod server_metrics;
pub mod setup;
pub mod stages;
pub mod time;
/// The ledger ([`wattbar_ledger`]): its schema and queries, and the engine's one writer.
pub use wattbar_ledger::{ledger, store};

pub use command::Command;
pub use error::Error;
pub use handle::{EngineHandle, EngineReader, Found};
pub use published::{Point, PublishedState, RECENT_WINDOW};
pub use runner::{spawn, EngineConfig, DEFAULT_BATCH_INTERVAL};
pub use setup::{build_chain, ChainOptions};
pub use time::clock::unix_now;
