//! The tray icon and its menu. Built once; the title, icon and info lines change in place, and
//! only when what they show changes (at most once per sample, and the engine samples at most
//! once a second by default).

use crate::menu::MenuId;
use crate::{format, icon_render};
use muda::{CheckMenuItem, Menu, MenuItem, PredefinedMenuItem};
use tray_icon::{Icon, TrayIcon, TrayIconBuilder};
use wattbar_engine::Published;

/// Tray id; on Linux the item is exported at
/// `/org/ayatana/NotificationItem/tray_icon_tray_app_wattbar`.
pub const TRAY_ID: &str = "wattbar";

/// What the tray could not do: build its icon or menu, or decode an icon.
#[derive(Debug)]
pub struct TrayError(String);

impl std::fmt::Display for TrayError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for TrayError {}

fn tray_error(e: impl std::fmt::Display) -> TrayError {
    TrayError(e.to_string())
}

pub struct Tray {
    icon: TrayIcon,
    now: MenuItem,
    session: MenuItem,
    today: MenuItem,
    last_answer: MenuItem,
    top: MenuItem,
    low_power: CheckMenuItem,
    shown: Shown,
    /// The watts drawn into the icon and when: small wobbles do not redraw it (see [`Tray::show`]).
    icon_drawn: Option<(Option<f64>, std::time::Instant)>,
    /// The watts written in the menu's "now" line and when, with the same deadband as the icon:
    /// each new text is a D-Bus signal and a menu update for the tray host.
    now_written: Option<(Option<f64>, std::time::Instant)>,
    /// When the session, today, top and last-answer lines were last written for new digits
    /// only: as for the "now" line, each new text is a D-Bus signal and a menu update, so new
    /// digits wait up to [`ICON_MAX_AGE`], while a new shape (a new program on top, a reading
    /// gone) is written at once.
    lines_written: Option<std::time::Instant>,
    /// Set when a menu item was clicked: what it changed (a reset session's 0.00 Wh) is written
    /// at the next refresh, whatever was written just before.
    clicked: bool,
    /// Set when the low-power item was clicked: the toolkit ticks the box itself, so the next
    /// refresh makes it agree with the engine again, whether or not the engine's state changed.
    low_power_clicked: bool,
}

/// Redraw the icon for a change of at least this fraction of the value (or 1 W), or after
/// [`ICON_MAX_AGE`]: an estimate that wobbles between 7 and 8 W each second would otherwise cost a
/// PNG and a D-Bus signal every second for nothing a person can use.
const ICON_DEADBAND: f64 = 0.05;
const ICON_MAX_AGE: std::time::Duration = std::time::Duration::from_secs(10);

fn worth_redrawing(drawn: Option<(Option<f64>, std::time::Instant)>, now: Option<f64>) -> bool {
    match (drawn, now) {
        (None, _) => true,
        (Some((old, at)), new) if at.elapsed() >= ICON_MAX_AGE => old != new,
        (Some((Some(old), _)), Some(new)) => {
            (new - old).abs() >= (old.abs() * ICON_DEADBAND).max(1.0)
        }
        (Some((old, _)), new) => old.is_some() != new.is_some(),
    }
}

#[derive(Default, PartialEq)]
struct Shown {
    title: String,
    tooltip: String,
    /// The text drawn in the icon (Linux) or "" (macOS, where the title carries it).
    icon_text: String,
    now: String,
    session: String,
    today: String,
    last_answer: String,
    top: String,
    low_power: bool,
}

/// The static icon: a template (monochrome, tinted by macOS) on macOS. In low-power mode a
/// variant with a leaf mark.
fn icon(low_power: bool) -> Result<Icon, TrayError> {
    let png: &[u8] = match (cfg!(target_os = "macos"), low_power) {
        (true, false) => include_bytes!("../../../icons/tray-template.png"),
        (true, true) => include_bytes!("../../../icons/tray-template-low-power.png"),
        (false, false) => include_bytes!("../../../icons/tray.png"),
        (false, true) => include_bytes!("../../../icons/tray-low-power.png"),
    };
    let image = icon_render::decode_png(png).map_err(TrayError)?;
    Icon::from_rgba(image.pixels, image.size, image.size).map_err(tray_error)
}

/// Linux draws the number into the icon; macOS shows it as the title next to a template icon.
const NUMBER_IN_ICON: bool = cfg!(not(target_os = "macos"));
/// Rendered at 44 px: crisp on HiDPI panels and when a host halves it.
const ICON_PX: u32 = 44;

impl Tray {
    /// Builds the icon and its menu; must run on the thread of the event loop.
    pub fn build() -> Result<Tray, TrayError> {
        let info = |id: MenuId, text: &str| MenuItem::with_id(id.as_str(), text, false, None);
        let now = info(MenuId::Now, "Starting…");
        let session = info(MenuId::Session, "Session —");
        let today = info(MenuId::Today, "Today —");
        let last_answer = info(MenuId::LastAnswer, "No answer measured yet");
        let top = info(MenuId::Top, "Top: —");
        let low_power = CheckMenuItem::with_id(
            MenuId::LowPower.as_str(),
            "Low-power mode",
            true,
            false,
            None,
        );
        let action = |id: MenuId, text: &str| MenuItem::with_id(id.as_str(), text, true, None);
        let menu = Menu::with_items(&[
            &now,
            &session,
            &today,
            &last_answer,
            &top,
            &PredefinedMenuItem::separator(),
            &low_power,
            &action(MenuId::ResetSession, "Reset session"),
            &action(MenuId::OpenDashboard, "Open dashboard"),
            &action(MenuId::Preferences, "Preferences…"),
            &PredefinedMenuItem::separator(),
            &action(MenuId::Quit, "Quit"),
        ])
        .map_err(tray_error)?;
        let builder = TrayIconBuilder::new()
            .with_id(TRAY_ID)
            .with_icon(icon(false)?)
            .with_icon_as_template(cfg!(target_os = "macos"))
            .with_tooltip("Wattbar")
            .with_menu(Box::new(menu))
            .with_menu_on_left_click(true);
        #[cfg(target_os = "macos")]
        let builder = builder.with_title("— W");
        let icon = builder.build().map_err(tray_error)?;
        Ok(Tray {
            icon,
            now,
            session,
            today,
            last_answer,
            top,
            low_power,
            shown: Shown::default(),
            icon_drawn: None,
            now_written: None,
            lines_written: None,
            clicked: false,
            low_power_clicked: false,
        })
    }

    /// The low-power item was clicked: the next [`Tray::show`] sets its tick from the engine.
    pub fn low_power_clicked(&mut self) {
        self.low_power_clicked = true;
    }

    /// A menu item was clicked: the next [`Tray::show`] writes every line that changed.
    pub fn clicked(&mut self) {
        self.clicked = true;
    }

    /// Shows the published state, changing only what changed.
    pub fn show(&mut self, p: &Published) {
        let low_power = p.low_power.enabled;
        let headline = p
            .snapshot
            .as_ref()
            .and_then(|s| s.headline_watts())
            .map(|w| w.0);
        let mut next = Shown {
            title: if NUMBER_IN_ICON {
                String::new()
            } else {
                format::title(p)
            },
            // Linux trays have no tooltip: setting one would be a round trip to the main thread
            // every second for nothing.
            tooltip: if cfg!(target_os = "linux") {
                String::new()
            } else {
                format::tooltip(p)
            },
            icon_text: if !NUMBER_IN_ICON || format::title(p).is_empty() {
                String::new()
            } else if self.shown.low_power == low_power
                && !self.shown.icon_text.is_empty()
                && !worth_redrawing(self.icon_drawn, headline)
            {
                self.shown.icon_text.clone()
            } else {
                icon_render::icon_text(headline)
            },
            now: {
                let line = format::now_line(p);
                if same_but_digits(&line, &self.shown.now)
                    && !worth_redrawing(self.now_written, headline)
                {
                    self.shown.now.clone()
                } else {
                    line
                }
            },
            session: format::session_line(p),
            today: format::today_line(p),
            last_answer: format::last_answer_line(p),
            top: format::top_line(p),
            low_power,
        };
        let lines = |s: &Shown| [&s.session, &s.today, &s.last_answer, &s.top].map(String::clone);
        let now = std::time::Instant::now();
        let clicked = std::mem::take(&mut self.clicked);
        match lines_to_write(
            &lines(&next),
            &lines(&self.shown),
            self.lines_written,
            now,
            clicked,
        ) {
            Some(_) => self.lines_written = Some(now),
            None => [next.session, next.today, next.last_answer, next.top] = lines(&self.shown),
        }
        let result = (|| -> Result<(), TrayError> {
            if next.title != self.shown.title && !NUMBER_IN_ICON {
                self.icon.set_title(Some(&next.title));
            }
            if next.tooltip != self.shown.tooltip {
                self.icon
                    .set_tooltip(Some(&next.tooltip))
                    .map_err(tray_error)?;
            }
            if next.icon_text != self.shown.icon_text || next.low_power != self.shown.low_power {
                self.icon_drawn = Some((headline, std::time::Instant::now()));
                let image = if next.icon_text.is_empty() {
                    icon(low_power)?
                } else {
                    let drawn = icon_render::render(&next.icon_text, ICON_PX, low_power);
                    Icon::from_rgba(drawn.pixels, drawn.size, drawn.size).map_err(tray_error)?
                };
                // Only macOS has template icons; elsewhere tray-icon's call for them does nothing.
                #[cfg(target_os = "macos")]
                let set = self.icon.set_icon_with_as_template(Some(image), true);
                #[cfg(not(target_os = "macos"))]
                let set = self.icon.set_icon(Some(image));
                set.map_err(tray_error)?;
            }
            if next.now != self.shown.now {
                self.now_written = Some((headline, std::time::Instant::now()));
                self.now.set_text(&next.now);
            }
            if next.session != self.shown.session {
                self.session.set_text(&next.session);
            }
            if next.today != self.shown.today {
                self.today.set_text(&next.today);
            }
            if next.top != self.shown.top {
                self.top.set_text(&next.top);
            }
            if next.last_answer != self.shown.last_answer {
                self.last_answer.set_text(&next.last_answer);
            }
            let clicked = std::mem::take(&mut self.low_power_clicked);
            if next.low_power != self.shown.low_power
                || (clicked && self.low_power.is_checked() != low_power)
            {
                self.low_power.set_checked(low_power);
            }
            Ok(())
        })();
        match result {
            Ok(()) => self.shown = next,
            Err(e) => tracing::warn!("could not update the tray: {e}"),
        }
    }
}

/// Whether the menu's lines `next` are written over `shown` (last written at `written`): at once
/// for a new shape or after a click, for new digits only once [`ICON_MAX_AGE`] has passed.
/// `Some` with the lines to write (the same as shown where nothing changed), `None` to keep them.
fn lines_to_write<'a>(
    next: &'a [String; 4],
    shown: &[String; 4],
    written: Option<std::time::Instant>,
    now: std::time::Instant,
    clicked: bool,
) -> Option<&'a [String; 4]> {
    if next == shown {
        return None;
    }
    let digits_only = next.iter().zip(shown).all(|(n, o)| same_but_digits(n, o));
    let recent = written.is_some_and(|at| now.duration_since(at) < ICON_MAX_AGE);
    (!(digits_only && recent) || clicked).then_some(next)
}

/// Whether two lines differ only in their digits (a new reading, not a new source or state).
fn same_but_digits(a: &str, b: &str) -> bool {
    let shape = |s: &str| {
        s.chars()
            .filter(|c| !c.is_ascii_digit())
            .collect::<String>()
    };
    shape(a) == shape(b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    #[test]
    fn a_new_reading_differs_in_digits_only_a_new_source_does_not() {
        assert!(same_but_digits("Now 7.4 W · rapl", "Now 8.1 W · rapl"));
        assert!(!same_but_digits(
            "Now 7.4 W · rapl",
            "Now 7.4 W · proc-stat"
        ));
        assert!(!same_but_digits("Now 7.4 W · rapl", "Now: no reading"));
    }

    #[test]
    fn new_digits_in_the_menu_wait_10_s_a_new_shape_or_a_click_does_not() {
        let at = Instant::now();
        let lines = |session: &str, top: &str| {
            [session, "Today 0.050 kWh · €0.01", "Last answer —", top].map(String::from)
        };
        let shown = lines("Session 1.20 Wh · €0.00", "Top: python3 5.0 W");
        let digits = lines("Session 1.21 Wh · €0.00", "Top: python3 5.1 W");
        let shape = lines("Session 1.21 Wh · €0.00", "Top: ollama (smollm2) 9.0 W");
        let just = Some(at);
        let later = at + Duration::from_secs(10);
        assert_eq!(
            lines_to_write(&digits, &shown, just, at + Duration::from_secs(9), false),
            None
        );
        assert_eq!(
            lines_to_write(&digits, &shown, just, later, false),
            Some(&digits)
        );
        assert_eq!(
            lines_to_write(&shape, &shown, just, at, false),
            Some(&shape)
        );
        assert_eq!(
            lines_to_write(&digits, &shown, just, at, true),
            Some(&digits),
            "a reset"
        );
        assert_eq!(
            lines_to_write(&digits, &shown, None, at, false),
            Some(&digits),
            "first"
        );
        assert_eq!(lines_to_write(&shown, &shown, None, later, true), None);
    }

    #[test]
    fn the_icon_ignores_wobbles_but_not_changes() {
        let now = Instant::now();
        assert!(worth_redrawing(None, Some(7.0)));
        assert!(
            !worth_redrawing(Some((Some(7.4), now)), Some(8.1)),
            "0.7 W wobble"
        );
        assert!(worth_redrawing(Some((Some(7.4), now)), Some(8.5)), "1.1 W");
        assert!(
            !worth_redrawing(Some((Some(200.0), now)), Some(208.0)),
            "4 %"
        );
        assert!(
            worth_redrawing(Some((Some(200.0), now)), Some(212.0)),
            "6 %"
        );
        assert!(
            worth_redrawing(Some((Some(7.0), now)), None),
            "the reading went away"
        );
        let old = now - Duration::from_secs(11);
        assert!(
            worth_redrawing(Some((Some(7.4), old)), Some(8.1)),
            "stale after 10 s"
        );
    }
}
