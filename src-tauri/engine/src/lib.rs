//! wattbar-engine: the sampling loop shared by the tray app and the CLI.
//!
//! Data flows one way: sources feed the [`Chain`](wattbar_core::Chain), the chain gives a
//! snapshot, the snapshot goes to the session integrator and is then published on a tokio
//! `watch` channel as a [`Published`] state. Everything that shows Wattbar's numbers reads that
//! state; changes come back only as [`Command`]s.

pub mod api;
pub mod budget;
pub mod error;
pub mod ledger;
pub mod metrics;
pub mod os_power;
pub mod paths;
pub mod prefs_file;
pub mod sampler;
pub mod setup;
pub mod store;
pub mod token;
pub mod view;

pub use error::Error;
pub use sampler::{
    spawn, unix_now, Command, EngineConfig, EngineHandle, EngineReader, Point, Published,
    RECENT_WINDOW,
};
pub use setup::{build_chain, ChainOptions};
