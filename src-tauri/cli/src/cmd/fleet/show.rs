//! The fleet view on a terminal (a table that replaces the one before, as `top` does) or as
//! JSON, one document per refresh.

use super::view::{FleetView, Health, HostRow};
use anyhow::Result;
use std::io::{IsTerminal, Write};

pub fn print(view: &FleetView, json: bool) -> Result<()> {
    let mut out = std::io::stdout().lock();
    if json {
        writeln!(out, "{}", serde_json::to_string(view)?)?;
    } else {
        if out.is_terminal() {
            write!(out, "\x1b[H\x1b[2J")?;
        }
        out.write_all(table(view).as_bytes())?;
    }
    out.flush()?;
    Ok(())
}

/// Unknown is a dash, never 0.
fn or_dash(v: Option<String>) -> String {
    v.unwrap_or_else(|| "—".to_string())
}

fn state(h: &HostRow) -> String {
    match (h.health, &h.reason) {
        (Health::Up, _) => "up".to_string(),
        (Health::Pending, _) => "pending".to_string(),
        (Health::Stale, Some(r)) => format!("stale: {r}"),
        (Health::Stale, None) => "stale".to_string(),
        (Health::Down, Some(r)) => format!("down: {r}"),
        (Health::Down, None) => "down".to_string(),
    }
}

pub fn table(view: &FleetView) -> String {
    let mut s = format!(
        "{:<24} {:>9}  {:<10} {:<10} {:>10} {:>10}  {:<4} {:<24} state\n",
        "host", "watts", "scope", "quality", "today kWh", "cost", "low", "top program"
    );
    for h in &view.hosts {
        let cost = h
            .today_cost
            .map(|c| format!("{c:.2} {}", h.currency.as_deref().unwrap_or_default()));
        let top = h.top_program.as_ref().map(|p| match h.top_program_watts {
            Some(w) => format!("{p} {w:.1} W"),
            None => p.clone(),
        });
        let shown = match &h.name {
            Some(n) if !h.host.starts_with(n.as_str()) => format!("{} ({n})", h.host),
            _ => h.host.clone(),
        };
        s += &format!(
            "{:<24} {:>9}  {:<10} {:<10} {:>10} {:>10}  {:<4} {:<24} {}\n",
            shown,
            or_dash(h.watts.map(|w| format!("{w:.1}"))),
            or_dash(h.scope.map(|s| s.as_str().to_string())),
            or_dash(h.quality.map(|q| q.as_str().to_string())),
            or_dash(h.today_kwh.map(|k| format!("{k:.3}"))),
            or_dash(cost),
            h.low_power.map_or("—", |l| if l { "on" } else { "off" }),
            or_dash(top),
            state(h),
        );
    }
    let scopes: Vec<&str> = view.total_scopes.iter().map(|s| s.as_str()).collect();
    s += &format!(
        "{:<24} {:>9}  {:<10} {:<10} {:>10}  {} of {} hosts up\n",
        "total",
        or_dash(view.total_watts.map(|w| format!("{w:.1}"))),
        if scopes.is_empty() {
            "—".to_string()
        } else {
            scopes.join("+")
        },
        "",
        or_dash(view.total_today_kwh.map(|k| format!("{k:.3}"))),
        view.hosts_up,
        view.hosts_total,
    );
    s
}
