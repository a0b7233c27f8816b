//! Smart plugs and meters: what a device's own answer says the machine behind it draws at the
//! wall. One pure parser per vendor turns a saved or fetched answer into a [`PlugReading`].
//!
//! Rules:
//! - Counters first: [`PlugReading::energy_joules`] is the device's imported-energy counter,
//!   summed over its channels, in joules whatever unit the vendor counts in (Wh, W·min, kWh).
//!   Instant power is the reading beside it.
//! - Export is never draw: channels keep their sign, and a device whose channels sum to export
//!   has no `watts`, only [`PlugReading::export_watts`].
//! - A device that answers without a meter (a relay, a switch with no `apower`, a Tasmota with
//!   no `ENERGY`, a Kasa "module not support", a Shelly 1's declared load) is
//!   [`Error::Unavailable`] with that reason, never 0 W.
//! - An error answer (Shelly's 404 "No handler", a 401 digest challenge) is
//!   [`Error::Unavailable`] with the device's own words.

mod fetch;
mod homeassistant;
mod kasa;
pub mod kasa_tcp;
mod parse;
mod reading;
mod shelly;
mod source;
mod tasmota;

pub use fetch::{PlugClient, WallMeter, TIMEOUT};
pub use parse::{detect, parse_plug, parse_plug_as};
pub use reading::{Channel, PlugReading, Vendor};
pub use source::{WallMeterSource, MIN_POLL, SOURCE_ID};
