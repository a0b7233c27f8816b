//! The stages of a sample, each a type that owns its state and observes each interval. The
//! engine's [`Engine::sample`](crate::runner) runs them in the order of this table, which is a
//! contract: each row reads only what the rows above it gave.
//!
//! | # | stage | reads | gives | must come after |
//! |---|---|---|---|---|
//! | 1 | [`prices`] | the wall clock; the feeds' answers | slots to keep (ledger); the pricing in force | nothing: the interval that ends now is priced at the slot in force now |
//! | 2 | the chain, then [`meter`] ([`calibration`]) | the sources' snapshot | the sample: its interval, the step (scope change), the row; a calibration learned (ledger) | 1: the pricing is set before the interval is accounted |
//! | 3 | the price in force | the meter's accounting | price per kWh for every later row | 2, and before 11 (`meter.keep` takes the sample) |
//! | 4 | [`programs`] | the interval | each program's share of its CPU and GPU energy | 2 |
//! | 5 | [`inference`] | the interval | the interval kept with the requests open in it; whether a local request is busy | 2 |
//! | 6 | [`residency`] | the interval, the loaded models, 5's busy, 3's price | the resident models' idle cost (ledger) | 5 |
//! | 7 | the model servers ([`crate::server_metrics`]), once a window | 5's intervals, the idle baseline, what the proxy saw, 4's GPU per process | server windows (ledger) | 4 and 5 |
//! | 8 | [`low_power`] | the headline watts, the battery, 3's price | a transition (said, acted on) | 2 and 3 |
//! | 9 | [`wear`], then the recorder: the scope change, the batteries' health, then the row | 2's step and snapshot, the preferences | the battery's energy and wear (ledger); ledger rows; a battery's day | 2; the scope change is written before the row it begins |
//! | 10 | [`programs`]' read, when due | the process table, the proxy's upstream port | programs' joules (ledger); the model servers listening (to 7) | 9 |
//! | 11 | [`meter`]'s keep | the sample | the session's totals | every row that reads the sample |
//! | 12 | [`inference`]'s settle | the requests that ended, 3's price, the carbon in force | records (ledger), each key charged | 11 |
//! | 13 | [`rest`] | the headline's method, 12's busy | the pace of the next sample | 12 |
//! | 14 | the batch, when due | what the rows above queued | one transaction | last |
//!
//! Rule: a stage knows no command, no reader and no other stage's state; what it gives the
//! ledger or another stage comes back from its method as a value (of the taker's type where
//! the taker defines one, as [`inference`] gives the servers' stage a `ProxySeen`), and the
//! engine carries it.

pub mod calibration;
pub(crate) mod inference;
pub mod low_power;
pub mod meter;
pub mod prices;
pub(crate) mod programs;
pub(crate) mod residency;
pub mod rest;
pub mod wear;
