//! The stages of a sample, each a type that owns its state and observes each interval; the
//! engine's loop ([`crate::runner`]) calls them by name, in this order:
//!
//! 1. [`meter`]: the snapshot calibrated ([`calibration`]) and accounted, and the interval since
//!    the sample before, which every later stage observes;
//! 2. [`programs`]: the interval's CPU and GPU energy shared among the programs;
//! 3. [`inference`]: the interval kept with the requests open during it;
//! 4. [`residency`]: what the models a server holds cost while they wait;
//! 5. the model servers' own counters ([`crate::server_metrics`]), once a window;
//! 6. [`low_power`]: the draw against the policy;
//! 7. then the requests that ended are settled ([`inference`]), and [`rest`] sets the pace.
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
