//! `pmset`: the power source, the battery's charge state and macOS Low Power Mode. State only,
//! never watts, so no readings.
//!
//! `pmset -g batt`:
//! ```text
//! Now drawing from 'AC Power'
//!  -InternalBattery-0 (id=36438115)<TAB>80%; AC attached; not charging present: true
//! ```
//! The name and the percentage are separated by a tab or by spaces. After the percentage come
//! `;`-separated fields: the status (which may itself hold a `;`, as in
//! `AC attached; not charging`), then optionally `H:MM remaining` or `(no estimate)`, and the
//! line ends with `present: true|false`.
//!
//! `pmset -g`: `lowpowermode 0|1` and, on newer Macs, `powermode 0|1|2` (automatic, low, high),
//! in the `Currently in use:` section; `pmset -g custom` prints them per power source
//! (`Battery Power:`, `AC Power:`) instead.

use crate::error::Error;
use crate::sample::Sample;
use serde_json::{json, Map, Value};
use std::time::Duration;
use wattbar_core::Stamp;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PowerSource {
    Ac,
    Battery,
    Ups,
    Other(String),
}

impl PowerSource {
    pub fn as_str(&self) -> &str {
        match self {
            PowerSource::Ac => "AC",
            PowerSource::Battery => "Battery",
            PowerSource::Ups => "UPS",
            PowerSource::Other(s) => s,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChargeState {
    Charging,
    Discharging,
    Charged,
    /// `AC attached; not charging` (e.g. held at a charge limit).
    NotCharging,
    FinishingCharge,
    Other(String),
}

impl ChargeState {
    fn parse(s: &str) -> Self {
        match s {
            "charging" => ChargeState::Charging,
            "discharging" => ChargeState::Discharging,
            "charged" => ChargeState::Charged,
            "finishing charge" => ChargeState::FinishingCharge,
            s if s.ends_with("not charging") => ChargeState::NotCharging,
            s => ChargeState::Other(s.to_string()),
        }
    }

    pub fn as_str(&self) -> &str {
        match self {
            ChargeState::Charging => "charging",
            ChargeState::Discharging => "discharging",
            ChargeState::Charged => "charged",
            ChargeState::NotCharging => "not charging",
            ChargeState::FinishingCharge => "finishing charge",
            ChargeState::Other(s) => s,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct PmsetBattery {
    /// e.g. `InternalBattery-0`.
    pub name: String,
    pub id: Option<u64>,
    pub percent: u8,
    pub state: ChargeState,
    /// `None` with no time field or `(no estimate)`.
    pub remaining: Option<Duration>,
    pub present: Option<bool>,
}

/// `pmset -g batt`.
#[derive(Debug, Clone, PartialEq)]
pub struct PmsetBatt {
    pub source: PowerSource,
    pub batteries: Vec<PmsetBattery>,
}

fn parse_err(what: &'static str, line: Option<usize>, message: impl Into<String>) -> Error {
    Error::Parse {
        what,
        line,
        message: message.into(),
    }
}

/// `H:MM remaining`.
fn remaining(s: &str) -> Option<Duration> {
    let (h, m) = s.strip_suffix("remaining")?.trim().split_once(':')?;
    let h: u64 = h.trim().parse().ok()?;
    let m: u64 = m.trim().parse().ok()?;
    Some(Duration::from_secs(h * 3600 + m * 60))
}

fn parse_battery_line(line: &str, n: usize) -> Result<PmsetBattery, Error> {
    let err = |m: String| parse_err("pmset -g batt", Some(n), m);
    let first_semi = line
        .find(';')
        .ok_or_else(|| err(format!("no `;` in {line:?}")))?;
    let head = &line[..first_semi];
    // The percentage is the last word before the first `;`, after a tab or spaces.
    let pct_start = head.rfind(|c: char| c.is_whitespace()).map_or(0, |i| i + 1);
    let percent: u8 = head[pct_start..]
        .trim()
        .strip_suffix('%')
        .and_then(|p| p.parse().ok())
        .filter(|p| *p <= 100)
        .ok_or_else(|| err(format!("no charge percentage in {head:?}")))?;
    let name_part = head[..pct_start].trim().trim_start_matches('-').trim();
    let (name, id) = match name_part.split_once("(id=") {
        Some((name, rest)) => (
            name.trim().to_string(),
            rest.trim_end_matches(')').trim().parse().ok(),
        ),
        None => (name_part.to_string(), None),
    };

    let mut tail = line[first_semi + 1..].trim();
    let mut present = None;
    if let Some(i) = tail.rfind("present:") {
        present = match tail[i + "present:".len()..].trim() {
            "true" => Some(true),
            "false" => Some(false),
            _ => None,
        };
        tail = tail[..i].trim();
    }
    let mut fields: Vec<&str> = tail
        .split(';')
        .map(str::trim)
        .filter(|f| !f.is_empty())
        .collect();
    let mut time = None;
    if let Some(last) = fields.last() {
        if last.starts_with("(no estimate)") {
            fields.pop();
        } else if let Some(r) = remaining(last) {
            time = Some(r);
            fields.pop();
        }
    }
    if fields.is_empty() {
        return Err(err(format!("no charge status in {line:?}")));
    }
    Ok(PmsetBattery {
        name,
        id,
        percent,
        state: ChargeState::parse(&fields.join("; ")),
        remaining: time,
        present,
    })
}

/// Parses `pmset -g batt`.
pub fn parse_pmset_batt(text: &str) -> Result<PmsetBatt, Error> {
    let mut source = None;
    let mut batteries = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if let Some(rest) = line.strip_prefix("Now drawing from") {
            let name = rest.trim().trim_matches('\'');
            source = Some(match name {
                "AC Power" => PowerSource::Ac,
                "Battery Power" => PowerSource::Battery,
                "UPS Power" => PowerSource::Ups,
                other => PowerSource::Other(other.to_string()),
            });
        } else if line.starts_with('-') {
            batteries.push(parse_battery_line(line, i + 1)?);
        }
    }
    let source = source.ok_or_else(|| {
        parse_err(
            "pmset -g batt",
            Some(1),
            "no `Now drawing from` line: not pmset -g batt output",
        )
    })?;
    Ok(PmsetBatt { source, batteries })
}

impl PmsetBatt {
    pub fn to_sample(&self, _at: Stamp) -> Sample {
        let mut state = Map::new();
        state.insert("power_source".into(), json!(self.source.as_str()));
        if let Some(b) = self.batteries.first() {
            state.insert("charge_percent".into(), json!(b.percent));
            state.insert("charge_state".into(), json!(b.state.as_str()));
            state.insert(
                "time_remaining_s".into(),
                b.remaining.map_or(Value::Null, |d| json!(d.as_secs())),
            );
        }
        Sample {
            readings: Vec::new(),
            state,
        }
    }
}

/// Low Power Mode and the power mode of one section of `pmset -g`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PowerModes {
    pub low_power_mode: Option<bool>,
    /// 0 automatic, 1 low power, 2 high power.
    pub power_mode: Option<u8>,
}

/// `pmset -g` (or `pmset -g custom`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PmsetSettings {
    /// `Currently in use:` (plain `pmset -g`).
    pub current: PowerModes,
    /// Per power source (`pmset -g custom`): `("Battery Power", …)`, `("AC Power", …)`.
    pub by_source: Vec<(String, PowerModes)>,
}

/// Parses `pmset -g` or `pmset -g custom`.
pub fn parse_pmset_g(text: &str) -> Result<PmsetSettings, Error> {
    let mut settings = PmsetSettings::default();
    let mut section: Option<String> = None;
    let mut seen_setting = false;
    for (i, raw) in text.lines().enumerate() {
        if raw.trim().is_empty() {
            continue;
        }
        if !raw.starts_with(char::is_whitespace) {
            let header = raw.trim().trim_end_matches(':').to_string();
            if header.ends_with(" Power") {
                settings
                    .by_source
                    .push((header.clone(), PowerModes::default()));
            }
            section = Some(header);
            continue;
        }
        seen_setting = true;
        let mut words = raw.split_whitespace();
        let (Some(key), Some(value)) = (words.next(), words.next()) else {
            continue;
        };
        if key != "lowpowermode" && key != "powermode" {
            continue;
        }
        let n: u8 = value.parse().map_err(|_| {
            parse_err(
                "pmset -g",
                Some(i + 1),
                format!("{key} {value:?} is not a number"),
            )
        })?;
        let modes = match section.as_deref() {
            Some(s) if s.ends_with(" Power") => match settings.by_source.last_mut() {
                Some((_, m)) => m,
                None => continue,
            },
            Some("System-wide power settings") => continue,
            _ => &mut settings.current,
        };
        if key == "lowpowermode" {
            modes.low_power_mode = Some(n != 0);
        } else {
            modes.power_mode = Some(n);
        }
    }
    if !seen_setting {
        return Err(parse_err(
            "pmset -g",
            None,
            "no settings lines: not pmset -g output",
        ));
    }
    Ok(settings)
}

impl PmsetSettings {
    pub fn to_sample(&self, _at: Stamp) -> Sample {
        let mut state = Map::new();
        if let Some(lpm) = self.current.low_power_mode {
            state.insert("low_power_mode".into(), json!(lpm));
        }
        if let Some(pm) = self.current.power_mode {
            state.insert("power_mode".into(), json!(pm));
        }
        if !self.by_source.is_empty() {
            let per: Map<String, Value> = self
                .by_source
                .iter()
                .map(|(name, m)| {
                    (
                        name.clone(),
                        json!({ "low_power_mode": m.low_power_mode, "power_mode": m.power_mode }),
                    )
                })
                .collect();
            state.insert("by_power_source".into(), Value::Object(per));
        }
        Sample {
            readings: Vec::new(),
            state,
        }
    }
}

/// Runs `pmset -g batt` and `pmset -g`; their state merged into one sample (no readings).
#[cfg(target_os = "macos")]
pub fn read_pmset(at: Stamp) -> Result<Sample, Error> {
    let mut sample =
        parse_pmset_batt(&super::command::run_command("pmset", &["-g", "batt"])?)?.to_sample(at);
    let settings = parse_pmset_g(&super::command::run_command("pmset", &["-g"])?)?.to_sample(at);
    sample.state.extend(settings.state);
    Ok(sample)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spaces_instead_of_a_tab_and_no_estimate_still_parse() {
        let b = parse_pmset_batt(
            "Now drawing from 'Battery Power'\n -InternalBattery-0 95%; discharging; (no estimate) present: true\n",
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(b.source, PowerSource::Battery);
        let bat = &b.batteries[0];
        assert_eq!(bat.name, "InternalBattery-0");
        assert_eq!(bat.id, None);
        assert_eq!(bat.percent, 95);
        assert_eq!(bat.state, ChargeState::Discharging);
        assert_eq!(bat.remaining, None);
        assert_eq!(bat.present, Some(true));
    }

    #[test]
    fn a_desktop_without_battery_has_a_source_and_no_battery() {
        let b = parse_pmset_batt("Now drawing from 'AC Power'\n").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(b.source, PowerSource::Ac);
        assert!(b.batteries.is_empty());
        assert!(!b
            .to_sample(Stamp::default())
            .state
            .contains_key("charge_percent"));
    }

    #[test]
    fn low_power_and_high_power_modes_are_read() {
        let s =
            parse_pmset_g("Currently in use:\n lowpowermode         1\n powermode            2\n")
                .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(s.current.low_power_mode, Some(true));
        assert_eq!(s.current.power_mode, Some(2));
        let state = s.to_sample(Stamp::default()).state;
        assert_eq!(state["low_power_mode"], true);
        assert_eq!(state["power_mode"], 2);
    }

    #[test]
    fn garbage_is_a_parse_error() {
        assert!(parse_pmset_batt("").is_err());
        assert!(
            parse_pmset_batt("Now drawing from 'AC Power'\n -InternalBattery-0 lots\n").is_err()
        );
        assert!(parse_pmset_batt(
            "Now drawing from 'AC Power'\n -InternalBattery-0\t120%; charging\n"
        )
        .is_err());
        assert!(parse_pmset_g("").is_err());
        assert!(parse_pmset_g("Currently in use:\n lowpowermode on\n").is_err());
    }
}
