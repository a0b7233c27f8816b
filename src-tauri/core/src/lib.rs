//! wattbar-core: the pure heart of Wattbar.
//!
//! Units, readings, the [`Source`] trait, the priority [`Chain`], the energy [`Integrator`] and
//! the preference schema with cost. Nothing here does I/O, reads a clock or knows about Tauri:
//! callers pass in the time ([`Stamp`]) and the bytes.

pub mod battery;
pub mod calibration;
pub mod chain;
pub mod counter;
pub mod energy;
pub mod error;
pub mod eval;
pub mod formula;
pub mod inference;
pub mod keys;
pub mod meter;
pub mod pin;
pub mod policy;
pub mod prefs;
pub mod pricing;
pub mod programs;
pub mod reading;
pub mod scope;
pub mod secret;
pub mod session;
pub mod slots;
pub mod sweep;
pub mod tariff;
pub mod units;

pub use calibration::{Fit, Learner, Pair, Refusal, Window};
pub use chain::{Chain, Part, Snapshot, SourceStatus, Unavailable};
pub use energy::{Gap, Integrator, DEFAULT_GAP_THRESHOLD, MAX_POWER_WATTS};
pub use error::Error;
pub use policy::{LowPowerAction, LowPowerState, Policy, PolicyConfig, Reason, Transition};
pub use prefs::{Currency, MqttPref, OtlpPref, Preferences};
pub use pricing::{Priced, Pricing, SlotPart};
pub use reading::{Battery, Domain, Quality, Reading, Source, Stamp};
pub use scope::{Coverage, Scope};
pub use session::{Added, Session, SessionTotals};
pub use tariff::{Price, TariffRule, Tariffs};
pub use units::{Joules, Watts, JOULES_PER_KWH};
