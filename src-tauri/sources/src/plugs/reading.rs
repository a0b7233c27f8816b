//! What a plug's answer says, whoever made the device: a [`PlugReading`] of its channels.

use crate::error::Error;
use serde::Serialize;
use serde_json::Value;

/// Who made the answer: the parser that reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Vendor {
    /// Shelly Gen1 REST: `GET /status`.
    ShellyGen1,
    /// Shelly Gen2 and later, HTTP RPC: `Shelly.GetStatus`, `Switch.GetStatus`, `EM.GetStatus`…
    ShellyGen2,
    /// Tasmota: `Status 8` (or 10), `StatusSNS.ENERGY`.
    Tasmota,
    /// TP-Link Kasa legacy emeter: `{"emeter":{"get_realtime":{}}}`.
    Kasa,
    /// TP-Link Tapo (SMART protocol): `get_energy_usage`; no lifetime counter.
    Tapo,
    /// Home Assistant REST: `GET /api/states/<entity>`.
    HomeAssistant,
}

impl Vendor {
    /// The vendor a person names (as [`Vendor::as_str`] writes it).
    pub fn named(name: &str) -> Option<Vendor> {
        [
            Vendor::ShellyGen1,
            Vendor::ShellyGen2,
            Vendor::Tasmota,
            Vendor::Kasa,
            Vendor::Tapo,
            Vendor::HomeAssistant,
        ]
        .into_iter()
        .find(|v| v.as_str() == name)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Vendor::ShellyGen1 => "shelly-gen1",
            Vendor::ShellyGen2 => "shelly-gen2",
            Vendor::Tasmota => "tasmota",
            Vendor::Kasa => "kasa",
            Vendor::Tapo => "tapo",
            Vendor::HomeAssistant => "home-assistant",
        }
    }
}

/// One metered channel of a device (an outlet, a relay, a phase, a clamp).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Channel {
    /// The device's own name for it: `switch:0`, `em1:1`, `emeters[2]`, `slot:0`.
    pub id: String,
    /// Active power now, signed: negative is export. `None` where the device gives none.
    pub watts: Option<f64>,
    /// Imported energy counter.
    pub energy_joules: Option<f64>,
    /// Exported (returned) energy counter, where the device keeps one.
    pub returned_joules: Option<f64>,
}

/// What a device's answer says.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PlugReading {
    pub vendor: Vendor,
    /// Draw now: the channels' sum where it is draw; `None` when it is export or not given.
    pub watts: Option<f64>,
    /// What the channels send back now, where they sum to export.
    pub export_watts: Option<f64>,
    /// Imported-energy counter over the channels; `None` where any metered channel lacks one.
    pub energy_joules: Option<f64>,
    /// Exported-energy counter over the channels that keep one.
    pub returned_joules: Option<f64>,
    /// The counter's step (Tasmota counts kWh to a few decimals), for the bound.
    pub energy_resolution_joules: Option<f64>,
    /// When the counter began (Tasmota's `TotalStartTime`): another value means a reset.
    pub counter_since: Option<String>,
    pub channels: Vec<Channel>,
}

impl PlugReading {
    /// Sums `channels` into a reading; a device with no channel that measures anything has no
    /// meter (`why` says what it answered instead).
    pub(super) fn from_channels(
        vendor: Vendor,
        channels: Vec<Channel>,
        why_unmetered: impl FnOnce() -> String,
    ) -> Result<PlugReading, Error> {
        // A counter below zero, or a figure past what a float holds, is no reading: unknown,
        // never believed (a sum with it would be too).
        let channels: Vec<Channel> = channels
            .into_iter()
            .map(|c| Channel {
                watts: c.watts.filter(|w| w.is_finite()),
                energy_joules: c.energy_joules.filter(|j| j.is_finite() && *j >= 0.0),
                returned_joules: c.returned_joules.filter(|j| j.is_finite() && *j >= 0.0),
                ..c
            })
            .collect();
        let metered: Vec<&Channel> = channels
            .iter()
            .filter(|c| c.watts.is_some() || c.energy_joules.is_some())
            .collect();
        if metered.is_empty() {
            return Err(Error::Unavailable(why_unmetered()));
        }
        let powered: Vec<f64> = metered.iter().filter_map(|c| c.watts).collect();
        let net = (!powered.is_empty()).then(|| powered.iter().sum::<f64>());
        let energy = metered.iter().map(|c| c.energy_joules).sum::<Option<f64>>();
        let returned: Vec<f64> = metered.iter().filter_map(|c| c.returned_joules).collect();
        Ok(PlugReading {
            vendor,
            watts: net.filter(|w| *w >= 0.0),
            export_watts: net.filter(|w| *w < 0.0).map(|w| -w),
            energy_joules: energy,
            returned_joules: (!returned.is_empty()).then(|| returned.iter().sum()),
            energy_resolution_joules: None,
            counter_since: None,
            channels,
        })
    }
}

impl PlugReading {
    /// This reading with what no meter says left unknown: a counter below zero and any figure
    /// past what a float holds (1e308 kWh in joules). Whatever the vendor's parser.
    pub(super) fn believable(self) -> PlugReading {
        let count = |j: Option<f64>| j.filter(|j| j.is_finite() && *j >= 0.0);
        let power = |w: Option<f64>| w.filter(|w| w.is_finite() && *w >= 0.0);
        PlugReading {
            watts: power(self.watts),
            export_watts: power(self.export_watts),
            energy_joules: count(self.energy_joules),
            returned_joules: count(self.returned_joules),
            energy_resolution_joules: count(self.energy_resolution_joules),
            ..self
        }
    }

    /// The reading of the channels named `ids` alone (`switch:0`, `em1:1`), summed; all of
    /// them when none is named. A name the device does not have is an error that lists the
    /// ones it has.
    pub fn only(self, ids: &[String]) -> Result<PlugReading, Error> {
        if ids.is_empty() {
            return Ok(self);
        }
        if let Some(missing) = ids
            .iter()
            .find(|id| !self.channels.iter().any(|c| &c.id == *id))
        {
            let have: Vec<&str> = self.channels.iter().map(|c| c.id.as_str()).collect();
            return Err(Error::Unavailable(format!(
                "the wall meter has no channel {missing:?}; it has {}",
                have.join(", ")
            )));
        }
        let vendor = self.vendor;
        let (resolution, since) = (self.energy_resolution_joules, self.counter_since.clone());
        let chosen: Vec<Channel> = self
            .channels
            .into_iter()
            .filter(|c| ids.contains(&c.id))
            .collect();
        let mut reading = PlugReading::from_channels(vendor, chosen, || {
            format!(
                "the wall meter's channels {} measure nothing",
                ids.join(", ")
            )
        })?;
        reading.energy_resolution_joules = resolution;
        reading.counter_since = since;
        Ok(reading)
    }
}

pub(super) fn malformed(message: impl Into<String>) -> Error {
    Error::Parse {
        what: "plug answer",
        line: None,
        message: message.into(),
    }
}

/// A finite number at `key`.
pub(super) fn number(value: &Value, key: &str) -> Option<f64> {
    value
        .get(key)
        .and_then(Value::as_f64)
        .filter(|x| x.is_finite())
}

pub(super) const JOULES_PER_WH: f64 = 3600.0;
pub(super) const JOULES_PER_KWH: f64 = 3_600_000.0;
