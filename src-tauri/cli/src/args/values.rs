//! The values commands take: fixed choices as `ValueEnum`s, and the parsers of durations,
//! fractions and times, each refusing what it cannot take with the reason.

use super::*;

/// What a deferred run waits for.
#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum DeferArg {
    Cheapest,
    Greenest,
}

/// How a table is printed.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum TableFormat {
    Human,
    Json,
    Csv,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LowPowerArg {
    On,
    Off,
    Status,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum StepArg {
    #[value(name = "1m")]
    Minute,
    #[value(name = "1h")]
    Hour,
}

impl From<StepArg> for wattbar_engine::store::Step {
    fn from(s: StepArg) -> Self {
        match s {
            StepArg::Minute => wattbar_engine::store::Step::Minute,
            StepArg::Hour => wattbar_engine::store::Step::Hour,
        }
    }
}

#[derive(Subcommand)]
pub enum ServiceAction {
    /// Write the service file that runs this program's `serve` on loopback.
    Install {
        #[command(flatten)]
        scope: ServiceScope,
        /// Replace a file that wattbar-cli did not write, or that a package owns.
        #[arg(long)]
        force: bool,
    },
    /// Remove the service file wattbar-cli wrote.
    Uninstall {
        #[command(flatten)]
        scope: ServiceScope,
        /// Remove it even if wattbar-cli did not write it.
        #[arg(long)]
        force: bool,
    },
    /// Whether an engine records into the service's data folder: exit 0 running, 3 stopped,
    /// 1 on error.
    Status {
        #[command(flatten)]
        scope: ServiceScope,
    },
}

/// For this user (the default), or for the whole machine.
#[derive(clap::Args)]
pub struct ServiceScope {
    /// For this user: ~/.config/systemd/user, ~/Library/LaunchAgents (the default).
    #[arg(long, conflicts_with = "system")]
    pub user: bool,
    /// For the whole machine: /etc/systemd/system, /Library/LaunchDaemons (needs root).
    #[arg(long)]
    pub system: bool,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ExportFormat {
    Csv,
    Json,
}

/// The captures `parse` reads: macOS tools' output, a smart plug's answer.
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CaptureKind {
    /// `ioreg -r -c AppleSmartBattery`, text or `-a` plist.
    Ioreg,
    /// `powermetrics`, text or a plist stream.
    Powermetrics,
    #[value(name = "pmset-batt")]
    PmsetBatt,
    #[value(name = "pmset-g")]
    PmsetG,
    /// `top -l 2 -stats power`.
    Top,
    /// `macmon pipe` JSON lines.
    Macmon,
    /// A smart plug's or meter's answer: Shelly (Gen1 `/status`, Gen2+ RPC), Tasmota
    /// `Status 8`, a Kasa emeter, a Home Assistant state.
    Plug,
}

pub(super) fn parse_batch(text: &str) -> Result<Duration, String> {
    parse_duration(text).map_err(|e| e.to_string())
}

pub(super) fn parse_idle(text: &str) -> Result<Duration, String> {
    if text.trim() == "0" {
        return Ok(Duration::ZERO);
    }
    let d = parse_duration(text).map_err(|e| e.to_string())?;
    if d > Duration::from_secs(600) {
        return Err("an idle baseline of more than 10 min is not a baseline".into());
    }
    Ok(d)
}

/// A fleet view's interval or timeout: 100 ms to an hour.
pub(super) fn parse_fleet_duration(text: &str) -> Result<Duration, String> {
    let d = parse_duration(text).map_err(|e| e.to_string())?;
    if !(Duration::from_millis(100)..=Duration::from_secs(3600)).contains(&d) {
        return Err(format!("{text:?}: give 100ms to 1h"));
    }
    Ok(d)
}

/// A fraction from 0 to 1, such as 0.6.
pub(super) fn parse_fraction(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(v) if (0.0..=1.0).contains(&v) => Ok(v),
        _ => Err(format!(
            "{text:?} is not a fraction from 0 to 1, such as 0.6"
        )),
    }
}

/// A latency target: a duration above zero, such as 100ms.
pub(super) fn parse_latency(text: &str) -> Result<Duration, String> {
    let d = parse_duration(text).map_err(|e| e.to_string())?;
    if d.is_zero() {
        return Err("a latency target is above 0, such as 100ms".into());
    }
    Ok(d)
}

pub(super) fn parse_positive(text: &str) -> Result<Duration, String> {
    parse_duration(text).map_err(|e| e.to_string())
}

pub(super) fn parse_interval(text: &str) -> Result<Duration, String> {
    let d = parse_duration(text).map_err(|e| e.to_string())?;
    Preferences::validate_interval(d.as_millis() as u64).map_err(|e| e.to_string())
}

/// A moment: `now`, Unix seconds (a bare number is a time here, never a duration), or a duration
/// back from now in the one duration notation (`24h`, `30m`, `7d`, `1h 30m`).
pub fn parse_time(text: &str, now: f64) -> anyhow::Result<f64> {
    let t = text.trim();
    if t == "now" {
        return Ok(now);
    }
    if let Ok(v) = t.parse::<f64>() {
        if v.is_finite() && v >= 0.0 {
            return Ok(v);
        }
        anyhow::bail!("{t:?} is not a Unix time");
    }
    match parse_duration(t) {
        Ok(back) => Ok(now - back.as_secs_f64()),
        Err(e) => {
            anyhow::bail!("{t:?} is not `now`, Unix seconds, or a duration back such as 24h ({e})")
        }
    }
}
