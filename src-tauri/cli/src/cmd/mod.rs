//! One module per command of `wattbar-cli` (the inspection commands and the two model tables
//! share one each): what the command does, from its arguments to what it prints.

pub mod best;
pub mod calibrate;
pub mod cell;
pub mod export;
pub mod fleet;
pub mod inspect;
pub mod key;
pub mod llm;
pub mod low_power;
pub mod profile;
pub mod report;
pub mod reset_session;
pub mod run;
pub mod serve;
pub mod service;
pub mod top;
pub mod totals;
pub mod version;
pub mod watch;
