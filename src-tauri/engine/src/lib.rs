//! wattbar-engine: the engine shared by the tray app and the CLI, in parts.
//!
//! Data flows one way: sources feed the [`Chain`](wattbar_core::Chain), the chain gives a
//! snapshot, [`accounting`] turns it into energy, cost and carbon, [`recorder`] writes it to the
//! ledger, and [`engine`] publishes the result on a tokio `watch` channel as a [`Published`]
//! state ([`handle`]). Everything that shows Wattbar's numbers reads that state; changes come
//! back only as [`Command`]s. [`clock`] holds the engine's time, [`lock`] makes it the only
//! engine of its data folder, [`low_power`] runs the policy and its advice.

pub mod accounting;
pub mod api;
pub mod budget;
pub mod clock;
pub mod command;
pub mod engine;
pub mod error;
pub mod handle;
pub mod inbox;
pub mod inference;
pub mod ledger;
pub mod lock;
pub mod low_power;
pub mod metrics;
pub mod os_power;
pub mod paths;
pub mod prefs_file;
pub mod recorder;
pub mod report;
pub mod setup;
pub mod store;
pub mod token;
pub mod view;

pub use clock::unix_now;
pub use command::Command;
pub use engine::{spawn, EngineConfig, DEFAULT_BATCH_INTERVAL};
pub use error::Error;
pub use handle::{EngineHandle, EngineReader, Point, Published, RECENT_WINDOW};
pub use setup::{build_chain, ChainOptions};
