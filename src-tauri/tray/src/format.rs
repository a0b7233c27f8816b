//! How numbers read in the tray: the title, the tooltip and the menu's info lines.
//!
//! Title rules: `14.2 W` when measured, `≈14 W` when estimated, `~14 W` when heuristic (a guess is
//! not shown to a tenth); `— W` when nothing can be read (absent is not zero). With the
//! `title_above_w` preference the title is empty while the draw is at or below it; with
//! `cost_in_menu_bar` the session cost follows.

mod battery;
mod prices;
pub use battery::battery_line;
pub use prices::{cheapest_line, price_alert};
use wattbar_core::Quality;
use wattbar_engine::PublishedState;

/// Headline watts (plausible only) and their quality.
fn headline(p: &PublishedState) -> Option<(f64, Quality)> {
    let h = p.snapshot.as_ref()?.headline.as_ref()?;
    let w = h.watts.filter(|w| w.is_plausible())?;
    Some((w.0, h.quality))
}

/// Watts as the tray writes them, with the quality's mark.
pub fn watts_text(p: &PublishedState) -> String {
    match headline(p) {
        Some((w, Quality::Measured)) if w < 100.0 => format!("{w:.1} W"),
        Some((w, Quality::Measured)) => format!("{w:.0} W"),
        // Learned against the wall and standing in for it: the bound says how far to trust it.
        Some((w, Quality::Calibrated)) => match p.energy.calibration.bound_watts {
            Some(b) => format!("{w:.0} ±{b:.0} W"),
            None => format!("≈{w:.0} W"),
        },
        Some((w, Quality::Estimated)) => format!("≈{w:.0} W"),
        Some((w, Quality::Heuristic)) => format!("~{w:.0} W"),
        None => "— W".to_string(),
    }
}

/// The menu-bar title (see the module rules).
pub fn title(p: &PublishedState) -> String {
    if let (Some(limit), Some((w, _))) = (p.prefs.title_above_w, headline(p)) {
        if w <= limit {
            return String::new();
        }
    }
    if p.prefs.cost_in_menu_bar {
        format!(
            "{} · {}",
            watts_text(p),
            money(p.energy.session.cost, p.energy.session.currency.as_str())
        )
    } else {
        watts_text(p)
    }
}

/// The first menu line: watts with quality, source and what they cover ("whole machine",
/// "CPU package only").
pub fn now_line(p: &PublishedState) -> String {
    let Some(snapshot) = p.snapshot.as_ref() else {
        return "No power reading".to_string();
    };
    match &snapshot.headline {
        Some(h) if headline(p).is_some() => {
            let line = format!("{} · {} · {}", watts_text(p), h.quality, h.source);
            match snapshot.coverage() {
                Some(c) => {
                    let covers = c.describe();
                    format!(
                        "{line} · {}",
                        covers.strip_prefix("the ").unwrap_or(&covers)
                    )
                }
                None => line,
            }
        }
        _ => "No power reading".to_string(),
    }
}

/// " · on battery 0.031 kWh, wear 0.09 EUR" where some energy came from the battery, else "".
fn on_battery(worn: &wattbar_engine::store::wear::Worn) -> String {
    if worn.joules > 0.0 {
        format!(
            " · on battery {}, {}",
            kwh(worn.joules / wattbar_core::JOULES_PER_KWH),
            worn.wear_text(money)
        )
    } else {
        String::new()
    }
}

/// The second menu line: session energy and cost, and what was measured in other scopes (never
/// added to them).
pub fn session_line(p: &PublishedState) -> String {
    let mut line = format!(
        "Session {} · {}",
        kwh(p.energy.session.kwh),
        money(p.energy.session.cost, p.energy.session.currency.as_str())
    );
    line.push_str(&on_battery(&p.wear.session));
    let apart: Vec<String> = p
        .energy
        .session
        .other_scopes
        .iter()
        .map(|o| format!("{} {}", kwh(o.kwh), scope_words(o.scope)))
        .collect();
    if apart.is_empty() {
        line
    } else {
        format!("{line} (+ {}, not added)", apart.join(", "))
    }
}

fn scope_words(scope: wattbar_core::Scope) -> &'static str {
    match scope {
        wattbar_core::Scope::Wall => "at the wall",
        wattbar_core::Scope::System => "of the whole machine",
        wattbar_core::Scope::Components => "of the sensors' parts",
    }
}

/// The menu line for the last inference request: `Last answer 412 J · 1.9 J/token`.
pub fn last_answer_line(p: &PublishedState) -> String {
    let Some(r) = &p.inference.view.last else {
        return "No answer measured yet".to_string();
    };
    match (r.energy_joules, r.joules_per_token) {
        (Some(e), Some(jpt)) => format!("Last answer {e:.0} J · {jpt:.1} J/token"),
        (Some(e), None) => format!("Last answer {e:.0} J"),
        (None, _) if r.status == wattbar_core::inference::Status::Remote => {
            format!("Last answer ran remotely ({})", r.model)
        }
        (None, _) => "Last answer: energy not measured".to_string(),
    }
}

/// The menu line for the program drawing the most watts: `Top: ollama (llama3) 38 W`.
pub fn top_line(p: &PublishedState) -> String {
    let v = &p.programs;
    if let Some(why) = &v.unavailable {
        return format!("Top: not measured ({why})");
    }
    match v.programs.first().filter(|_| v.at.is_some()) {
        Some(top) => {
            let mark = match top.quality {
                Some(Quality::Estimated) => "≈",
                Some(Quality::Heuristic) => "~",
                _ => "",
            };
            let figure = match top.watts {
                Some(w) if w < 10.0 => format!("{mark}{w:.1} W"),
                Some(w) => format!("{mark}{w:.0} W"),
                None => "not measured".to_string(),
            };
            format!("Top: {} {figure}", top.shown_name())
        }
        None => "Top: —".to_string(),
    }
}

/// The third menu line: today's energy and cost from the store, across scopes (one figure: each
/// interval in the scope it was measured in), with `+` when it holds more than one.
pub fn today_line(p: &PublishedState) -> String {
    match &p.kept.totals {
        Some(t) => {
            let today = t.today.across_scopes();
            let mixed = if today.scopes.len() > 1 {
                " (mixed scopes)"
            } else {
                ""
            };
            let currency = p.energy.session.currency.as_str();
            // The day's battery share as the ledger committed it (up to a batch behind).
            let worn = p
                .kept
                .committed
                .wear_today
                .iter()
                .find(|w| w.currency == currency)
                .map(on_battery)
                .unwrap_or_default();
            format!(
                "Today {}{mixed} · {}{worn}",
                kwh(today.kwh),
                money(today.cost, currency)
            )
        }
        None => "Today —".to_string(),
    }
}

/// The tooltip: watts, source and quality, then the session.
/// The tooltip: the "now" and session lines as the menu writes them (`now`, `session`), with
/// low-power mode and any notice.
pub fn tooltip(p: &PublishedState, now: &str, session: &str) -> String {
    let low = if p.low_power.state.enabled {
        "\nLow-power mode on"
    } else {
        ""
    };
    let notice = p
        .kept
        .notice
        .as_deref()
        .map_or(String::new(), |n| format!("\n⚠ {n}"));
    format!("Wattbar · {now}\n{session}{low}{notice}")
}

pub fn kwh(kwh: f64) -> String {
    if kwh < 0.01 {
        format!("{:.2} Wh", kwh * 1000.0)
    } else {
        format!("{kwh:.3} kWh")
    }
}

pub fn money(amount: f64, currency: &str) -> String {
    if amount < 0.01 {
        format!("{amount:.4} {currency}")
    } else {
        format!("{amount:.2} {currency}")
    }
}

#[cfg(test)]
pub(crate) mod tests;
