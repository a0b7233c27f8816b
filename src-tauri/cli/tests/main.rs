//! `wattbar-cli` as a user runs it, one module per command or feature, linked as one test binary.

mod calibrate;
mod common;
mod counters;
mod fleet;
mod home_assistant;
mod homebrew;
mod ledger;
mod llm_proxy;
mod llm_real_server;
mod llm_responses;
mod macos_app;
mod mqtt;
mod mqtt_hostile;
mod otlp;
mod outbound;
mod plug_energy;
mod profile;
mod programs;
mod run;
mod serve;
mod server_metrics;
mod service;
mod steady_state;
mod version;
mod wall;
mod watch;
