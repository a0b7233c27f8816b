//! What the tray shows, decided away from the toolkit's thread: from each published state, the
//! title, the number in the icon and the menu's lines, and whether any of it changed.
//!
//! Rules:
//! - Each change is a D-Bus signal and a menu update for the tray host, and a wake of the event
//!   loop, so small wobbles wait: the icon's number and the "now" line are rewritten for a change
//!   of at least 5 % (or 1 W), the other lines for new digits only; any of them at the latest
//!   after [`MAX_AGE`]. A new shape (a new source, a reading gone, a new program on top) and
//!   what a click changed show at once.
//! - The same holds wherever the number is shown: drawn into the icon (Linux) or written as the
//!   title beside it (macOS), and the tooltip (macOS) is made of the lines as written.
//! - [`Display::next`] answers `None` when nothing shown would change: the event loop is then
//!   not woken at all.

use crate::{format, icon_render};
use std::time::{Duration, Instant};
use wattbar_engine::PublishedState;

/// Redraw the icon for a change of at least this fraction of the value (or 1 W), or after
/// [`MAX_AGE`]: an estimate that wobbles between 7 and 8 W each second would otherwise cost a
/// PNG and a D-Bus signal every second for nothing a person can use.
const DEADBAND: f64 = 0.05;
/// The longest a shown figure waits for its new digits.
pub const MAX_AGE: Duration = Duration::from_secs(10);

/// Linux draws the number into the icon; macOS shows it as the title next to a template icon.
pub const NUMBER_IN_ICON: bool = cfg!(not(target_os = "macos"));

/// Where the number goes, and whether the tray has a tooltip.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// Drawn into the icon; no tooltip (Linux trays show none, and setting one is a round trip
    /// to the main thread for nothing).
    NumberInIcon,
    /// The title beside a template icon, and a tooltip (macOS).
    Title,
}

impl Default for Layout {
    fn default() -> Self {
        if NUMBER_IN_ICON {
            Layout::NumberInIcon
        } else {
            Layout::Title
        }
    }
}

/// Everything the tray shows.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Shown {
    pub title: String,
    pub tooltip: String,
    /// The text drawn in the icon (Linux) or "" (macOS, where the title carries it).
    pub icon_text: String,
    pub now: String,
    pub session: String,
    pub today: String,
    pub last_answer: String,
    pub top: String,
    /// The cheapest two hours ahead; "" without a price feed (no line).
    pub cheapest: String,
    /// Each battery's health and cycles; "" without a battery (no line).
    pub battery: String,
    pub low_power: bool,
}

/// What was last shown, and when its figures were written.
#[derive(Debug, Default)]
pub struct Display {
    layout: Layout,
    shown: Shown,
    /// The watts drawn into the icon or written as the title, and when.
    icon_drawn: Option<(Option<f64>, Instant)>,
    /// The watts written in the "now" line, and when.
    now_written: Option<(Option<f64>, Instant)>,
    /// When the session, today, top and last-answer lines were last written.
    lines_written: Option<Instant>,
}

impl Display {
    /// A display that shows the number as `layout` says.
    pub fn with_layout(layout: Layout) -> Self {
        Display {
            layout,
            ..Display::default()
        }
    }

    /// What to show for `p` at `now`, where anything shown changes; what it returns counts as
    /// shown. `clicked`: a menu item was clicked, so what it changed shows at once.
    pub fn next(&mut self, p: &PublishedState, now: Instant, clicked: bool) -> Option<Shown> {
        let low_power = p.low_power.state.enabled;
        let headline = p
            .snapshot
            .as_ref()
            .and_then(|s| s.headline_watts())
            .map(|w| w.0);
        let title = format::title(p);
        // The number shown keeps its digits for a wobble, wherever it is shown.
        let number_kept =
            self.shown.low_power == low_power && !worth_redrawing(self.icon_drawn, headline, now);
        let now_line = {
            let line = format::now_line(p);
            if same_but_digits(&line, &self.shown.now)
                && !worth_redrawing(self.now_written, headline, now)
            {
                self.shown.now.clone()
            } else {
                line
            }
        };
        let mut next = Shown {
            title: match self.layout {
                Layout::NumberInIcon => String::new(),
                Layout::Title
                    if number_kept
                        && !self.shown.title.is_empty()
                        && same_but_digits(&title, &self.shown.title) =>
                {
                    self.shown.title.clone()
                }
                Layout::Title => title.clone(),
            },
            tooltip: String::new(),
            icon_text: match self.layout {
                Layout::Title => String::new(),
                Layout::NumberInIcon if title.is_empty() => String::new(),
                Layout::NumberInIcon if number_kept && !self.shown.icon_text.is_empty() => {
                    self.shown.icon_text.clone()
                }
                Layout::NumberInIcon => icon_render::icon_text(headline),
            },
            now: now_line,
            session: format::session_line(p),
            today: format::today_line(p),
            last_answer: format::last_answer_line(p),
            top: format::top_line(p),
            cheapest: format::cheapest_line(p),
            battery: format::battery_line(p),
            low_power,
        };
        let lines = |s: &Shown| [&s.session, &s.today, &s.last_answer, &s.top].map(String::clone);
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
        if self.layout == Layout::Title {
            next.tooltip = format::tooltip(p, &next.now, &next.session);
        }
        if next == self.shown {
            return None;
        }
        if next.icon_text != self.shown.icon_text
            || next.title != self.shown.title
            || next.low_power != self.shown.low_power
        {
            self.icon_drawn = Some((headline, now));
        }
        if next.now != self.shown.now {
            self.now_written = Some((headline, now));
        }
        self.shown = next.clone();
        Some(next)
    }

    /// What was shown did not reach the screen: the next state is shown whole.
    pub fn forget(&mut self) {
        *self = Display::with_layout(self.layout);
    }
}

fn worth_redrawing(
    drawn: Option<(Option<f64>, Instant)>,
    value: Option<f64>,
    now: Instant,
) -> bool {
    match (drawn, value) {
        (None, _) => true,
        (Some((old, at)), new) if now.saturating_duration_since(at) >= MAX_AGE => old != new,
        (Some((Some(old), _)), Some(new)) => (new - old).abs() >= (old.abs() * DEADBAND).max(1.0),
        (Some((old, _)), new) => old.is_some() != new.is_some(),
    }
}

/// Whether the menu's lines `next` are written over `shown` (last written at `written`): at once
/// for a new shape or after a click, for new digits only once [`MAX_AGE`] has passed.
/// `Some` with the lines to write, `None` to keep those shown.
fn lines_to_write<'a>(
    next: &'a [String; 4],
    shown: &[String; 4],
    written: Option<Instant>,
    now: Instant,
    clicked: bool,
) -> Option<&'a [String; 4]> {
    if next == shown {
        return None;
    }
    let digits_only = next.iter().zip(shown).all(|(n, o)| same_but_digits(n, o));
    let recent = written.is_some_and(|at| now.saturating_duration_since(at) < MAX_AGE);
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
    use crate::format::tests::with_quality;
    use wattbar_core::Quality;

    #[test]
    fn at_rest_nothing_shown_changes_so_the_event_loop_is_not_woken() {
        let mut d = Display::default();
        let at = Instant::now();
        let p = |w: f64| with_quality(Some(w), Quality::Measured);
        assert!(d.next(&p(14.2), at, false).is_some(), "the first state");
        let second = |s: u64| at + Duration::from_secs(s);
        assert_eq!(d.next(&p(14.2), second(1), false), None);
        // 0.6 W is a wobble: neither the icon nor the "now" line changes.
        assert_eq!(d.next(&p(14.8), second(2), false), None);
        // 3 W is news: the icon's number and the line change at once.
        let shown = d.next(&p(17.2), second(3), false);
        let shown = shown.unwrap_or_else(|| panic!("17.2 W is shown"));
        assert!(shown.now.contains("17.2 W"), "{shown:?}");
        // The wobble is written once the figure is 10 s old.
        assert_eq!(d.next(&p(17.5), second(12), false), None);
        let shown = d.next(&p(17.5), second(13), false);
        assert!(shown.is_some_and(|s| s.now.contains("17.5 W")));
    }

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
        assert!(worth_redrawing(None, Some(7.0), now));
        assert!(
            !worth_redrawing(Some((Some(7.4), now)), Some(8.1), now),
            "0.7 W wobble"
        );
        assert!(
            worth_redrawing(Some((Some(7.4), now)), Some(8.5), now),
            "1.1 W"
        );
        assert!(
            !worth_redrawing(Some((Some(200.0), now)), Some(208.0), now),
            "4 %"
        );
        assert!(
            worth_redrawing(Some((Some(200.0), now)), Some(212.0), now),
            "6 %"
        );
        assert!(
            worth_redrawing(Some((Some(7.0), now)), None, now),
            "the reading went away"
        );
        let old = now - Duration::from_secs(11);
        assert!(
            worth_redrawing(Some((Some(7.4), old)), Some(8.1), now),
            "stale after 10 s"
        );
    }
}

#[cfg(test)]
mod title_tests {
    use super::*;
    use crate::format::tests::with_quality;
    use wattbar_core::Quality;

    #[test]
    fn the_title_and_tooltip_keep_their_digits_for_a_wobble_as_the_icon_does() {
        let mut d = Display::with_layout(Layout::Title);
        let at = Instant::now();
        let second = |s: u64| at + Duration::from_secs(s);
        let p = |w: f64| with_quality(Some(w), Quality::Measured);
        let first = d.next(&p(14.2), at, false);
        let first = first.unwrap_or_else(|| panic!("the first state is shown"));
        assert!(first.title.contains("14.2"), "{first:?}");
        assert!(first.tooltip.contains("14.2 W"), "{first:?}");
        assert_eq!(first.icon_text, "");
        // 0.6 W each second is a wobble: nothing is redrawn for 9 s.
        for s in 1..=9 {
            let w = if s % 2 == 0 { 14.2 } else { 14.8 };
            assert_eq!(d.next(&p(w), second(s), false), None, "at {s} s");
        }
        // 3 W is news: the title and the tooltip change at once.
        let shown = d.next(&p(17.2), second(10), false);
        let shown = shown.unwrap_or_else(|| panic!("17.2 W is shown"));
        assert!(shown.title.contains("17.2"), "{shown:?}");
        assert!(shown.tooltip.contains("17.2 W"), "{shown:?}");
    }
}
