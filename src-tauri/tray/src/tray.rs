//! The tray icon and its menu. Built once; the title, icon and info lines change in place, and
//! only where what [`crate::display`] decided to show differs from what is on screen.

use crate::display::{Shown, NUMBER_IN_ICON};
use crate::icon_render;
use crate::menu::MenuId;
use muda::{CheckMenuItem, Menu, MenuItem, PredefinedMenuItem};
use tray_icon::{Icon, TrayIcon, TrayIconBuilder};

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
    /// Shown only with a price feed: inserted after `top`, removed without one.
    cheapest: OptionalLine,
    /// Shown only with a battery: after the price line where it is shown, else after `top`.
    battery: OptionalLine,
    menu: Menu,
    about: MenuItem,
    low_power: CheckMenuItem,
    /// What is on screen, to change only what changed.
    applied: Shown,
    /// Set when the low-power item was clicked: the toolkit ticks the box itself, so the next
    /// refresh makes it agree with the engine again, whether or not the engine's state changed.
    low_power_clicked: bool,
}

/// A line shown only while it has something to say: inserted when it has, removed for "".
struct OptionalLine {
    item: MenuItem,
    shown: bool,
}

impl OptionalLine {
    fn show(&mut self, menu: &Menu, text: &str, index: usize) -> Result<(), TrayError> {
        match (text.is_empty(), self.shown) {
            (true, true) => {
                menu.remove(&self.item).map_err(tray_error)?;
                self.shown = false;
            }
            (false, false) => {
                self.item.set_text(text);
                menu.insert(&self.item, index).map_err(tray_error)?;
                self.shown = true;
            }
            (false, true) => self.item.set_text(text),
            (true, false) => {}
        }
        Ok(())
    }
}

/// The static icon's pixels: a template (monochrome, tinted by macOS) on macOS. In low-power
/// mode a variant with a leaf mark.
pub(crate) fn static_icon(low_power: bool) -> Result<icon_render::Rgba, String> {
    let png: &[u8] = match (cfg!(target_os = "macos"), low_power) {
        (true, false) => include_bytes!("../../../icons/tray-template.png"),
        (true, true) => include_bytes!("../../../icons/tray-template-low-power.png"),
        (false, false) => include_bytes!("../../../icons/tray.png"),
        (false, true) => include_bytes!("../../../icons/tray-low-power.png"),
    };
    icon_render::decode_png(png)
}

/// [`static_icon`] for the toolkit's tray.
fn icon(low_power: bool) -> Result<Icon, TrayError> {
    let image = static_icon(low_power).map_err(TrayError)?;
    Icon::from_rgba(image.pixels, image.size, image.size).map_err(tray_error)
}

/// Rendered at 44 px: crisp on HiDPI panels and when a host halves it.
pub(crate) const ICON_PX: u32 = 44;

impl Tray {
    /// Builds the icon and its menu; must run on the thread of the event loop.
    pub fn build() -> Result<Tray, TrayError> {
        let info = |id: MenuId, text: &str| MenuItem::with_id(id.as_str(), text, false, None);
        let now = info(MenuId::Now, "Starting…");
        let session = info(MenuId::Session, "Session —");
        let today = info(MenuId::Today, "Today —");
        let last_answer = info(MenuId::LastAnswer, "No answer measured yet");
        let top = info(MenuId::Top, "Top: —");
        let optional = |id: MenuId| OptionalLine {
            item: info(id, ""),
            shown: false,
        };
        let about = info(
            MenuId::About,
            &format!("Wattbar {}", wattbar_release::LONG_VERSION),
        );
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
            &about,
            &action(MenuId::Quit, "Quit"),
        ])
        .map_err(tray_error)?;
        let builder = TrayIconBuilder::new()
            .with_id(TRAY_ID)
            .with_icon(icon(false)?)
            .with_icon_as_template(cfg!(target_os = "macos"))
            .with_tooltip("Wattbar")
            .with_menu(Box::new(menu.clone()))
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
            cheapest: optional(MenuId::Cheapest),
            battery: optional(MenuId::Battery),
            menu,
            about,
            low_power,
            applied: Shown::default(),
            low_power_clicked: false,
        })
    }

    /// Shows the About line (the version, and whether a newer release exists).
    pub fn set_about(&self, text: &str) {
        // The menu reads "&x" as a mnemonic and shows "&&" as "&": the shell's "&&" is doubled.
        self.about.set_text(text.replace('&', "&&"));
    }

    /// The low-power item was clicked: the next [`Tray::apply`] sets its tick from the engine.
    pub fn low_power_clicked(&mut self) {
        self.low_power_clicked = true;
    }

    /// Shows `next`, changing only what differs from what is on screen. What could not be
    /// shown stays as it was and is reported.
    pub fn apply(&mut self, next: &Shown) -> Result<(), TrayError> {
        let low_power = next.low_power;
        let shown = std::mem::take(&mut self.applied);
        let result = (|| -> Result<(), TrayError> {
            if next.title != shown.title && !NUMBER_IN_ICON {
                self.icon.set_title(Some(&next.title));
            }
            if next.tooltip != shown.tooltip {
                self.icon
                    .set_tooltip(Some(&next.tooltip))
                    .map_err(tray_error)?;
            }
            if next.icon_text != shown.icon_text || next.low_power != shown.low_power {
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
            if next.now != shown.now {
                self.now.set_text(&next.now);
            }
            if next.session != shown.session {
                self.session.set_text(&next.session);
            }
            if next.today != shown.today {
                self.today.set_text(&next.today);
            }
            if next.top != shown.top {
                self.top.set_text(&next.top);
            }
            if next.last_answer != shown.last_answer {
                self.last_answer.set_text(&next.last_answer);
            }
            // After now, session, today, last answer and top; the battery after the price.
            if next.cheapest != shown.cheapest {
                self.cheapest.show(&self.menu, &next.cheapest, 5)?;
            }
            if next.battery != shown.battery {
                let at = 5 + usize::from(self.cheapest.shown);
                self.battery.show(&self.menu, &next.battery, at)?;
            }
            let clicked = std::mem::take(&mut self.low_power_clicked);
            if next.low_power != shown.low_power
                || (clicked && self.low_power.is_checked() != low_power)
            {
                self.low_power.set_checked(low_power);
            }
            Ok(())
        })();
        self.applied = if result.is_ok() { next.clone() } else { shown };
        result
    }
}
