//! The Linux tray as a StatusNotifierItem (`ksni`): an item and its dbusmenu spoken over D-Bus
//! from the tray's own runtime, with no GTK, appindicator or toolkit event loop in the process.
//! The desktop's tray host draws it.
//!
//! Rules:
//! - The item is what [`crate::display`] decided, whole: the icon with its digits, the tooltip,
//!   every menu line (the cheapest-hours line only with a price feed, the battery's only with a
//!   battery), the low-power tick as the
//!   engine has it and the About line. The menu is built from that state each time the host
//!   asks, so it never shows a tick the engine did not set.
//! - A left click (`Activate`) opens the dashboard; the menu's items go to the deciding task as
//!   the libappindicator tray's do, and Quit to the main thread, which writes the last batch.
//! - It is used only where a StatusNotifierWatcher answers ([`start`]); elsewhere the tray falls
//!   back to libappindicator ([`crate::tray`]), and the log says which one runs.

use crate::brain::Told;
use crate::display::Shown;
use crate::icon_render;
use crate::menu::MenuId;
use crate::tray::{static_icon, ICON_PX};
use ksni::menu::{CheckmarkItem, StandardItem};
use ksni::{MenuItem, TrayMethods};
use tokio::sync::mpsc::UnboundedSender;

/// What the item shows, and where its clicks go.
pub struct Item {
    shown: Shown,
    about: String,
    /// The icon as the host reads it (ARGB32, network byte order), drawn once per change.
    icon: ksni::Icon,
    tell: UnboundedSender<Told>,
    quit: Box<dyn Fn() + Send>,
}

/// The static icon, or the watts drawn as digits, for the host: ARGB32 in network byte order.
fn icon_of(shown: &Shown) -> ksni::Icon {
    let rgba = if shown.icon_text.is_empty() {
        static_icon(shown.low_power)
            .unwrap_or_else(|_| icon_render::render("", ICON_PX, shown.low_power))
    } else {
        icon_render::render(&shown.icon_text, ICON_PX, shown.low_power)
    };
    let data = rgba
        .pixels
        .chunks_exact(4)
        .flat_map(|p| [p[3], p[0], p[1], p[2]])
        .collect();
    let side = i32::try_from(rgba.size).unwrap_or(0);
    ksni::Icon {
        width: side,
        height: side,
        data,
    }
}

impl Item {
    /// Shows `next` from here on.
    pub fn show(&mut self, next: Shown) {
        if next.icon_text != self.shown.icon_text || next.low_power != self.shown.low_power {
            self.icon = icon_of(&next);
        }
        self.shown = next;
    }

    /// Shows `line` as the About line.
    pub fn set_about(&mut self, line: String) {
        self.about = line;
    }

    fn clicked(&self, id: MenuId) {
        let _ = self.tell.send(Told::Clicked(id));
    }
}

impl ksni::Tray for Item {
    fn id(&self) -> String {
        crate::tray::TRAY_ID.to_string()
    }

    fn title(&self) -> String {
        "Wattbar".to_string()
    }

    fn activate(&mut self, _x: i32, _y: i32) {
        self.clicked(MenuId::OpenDashboard);
    }

    fn icon_pixmap(&self) -> Vec<ksni::Icon> {
        vec![self.icon.clone()]
    }

    fn tool_tip(&self) -> ksni::ToolTip {
        ksni::ToolTip {
            title: "Wattbar".to_string(),
            description: self.shown.tooltip.clone(),
            ..Default::default()
        }
    }

    fn menu(&self) -> Vec<MenuItem<Self>> {
        let line = |text: &str| -> MenuItem<Self> {
            StandardItem {
                label: text.replace('_', "__"),
                enabled: false,
                ..Default::default()
            }
            .into()
        };
        let action = |id: MenuId, text: &str| -> MenuItem<Self> {
            StandardItem {
                label: text.to_string(),
                activate: Box::new(move |item: &mut Self| item.clicked(id)),
                ..Default::default()
            }
            .into()
        };
        let s = &self.shown;
        let mut items = vec![
            line(&s.now),
            line(&s.session),
            line(&s.today),
            line(&s.last_answer),
            line(&s.top),
        ];
        for optional in [&s.cheapest, &s.battery] {
            if !optional.is_empty() {
                items.push(line(optional));
            }
        }
        items.extend([
            MenuItem::Separator,
            CheckmarkItem {
                label: "Low-power mode".to_string(),
                checked: s.low_power,
                activate: Box::new(|item: &mut Self| item.clicked(MenuId::LowPower)),
                ..Default::default()
            }
            .into(),
            action(MenuId::ResetSession, "Reset session"),
            action(MenuId::OpenDashboard, "Open dashboard"),
            action(MenuId::Preferences, "Preferences…"),
            MenuItem::Separator,
            line(&self.about),
            StandardItem {
                label: "Quit".to_string(),
                activate: Box::new(|item: &mut Self| (item.quit)()),
                ..Default::default()
            }
            .into(),
        ]);
        items
    }
}

/// The item, registered with the desktop's StatusNotifierWatcher; the reason where none answers
/// (no watcher, or no host to show it), for the fallback to say.
pub async fn start(
    tell: UnboundedSender<Told>,
    quit: impl Fn() + Send + 'static,
) -> Result<ksni::Handle<Item>, String> {
    let shown = Shown {
        now: "Starting…".to_string(),
        session: "Session —".to_string(),
        today: "Today —".to_string(),
        last_answer: "No answer measured yet".to_string(),
        top: "Top: —".to_string(),
        ..Shown::default()
    };
    let item = Item {
        icon: icon_of(&shown),
        shown,
        about: format!("Wattbar {}", wattbar_release::LONG_VERSION),
        tell,
        quit: Box::new(quit),
    };
    item.spawn().await.map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use ksni::Tray;

    fn item() -> (Item, tokio::sync::mpsc::UnboundedReceiver<Told>) {
        let (tell, told) = tokio::sync::mpsc::unbounded_channel();
        let shown = Shown::default();
        let item = Item {
            icon: icon_of(&shown),
            shown,
            about: "Wattbar 1.0".to_string(),
            tell,
            quit: Box::new(|| {}),
        };
        (item, told)
    }

    fn labels(item: &Item) -> Vec<String> {
        item.menu()
            .iter()
            .map(|m| match m {
                MenuItem::Standard(s) => s.label.clone(),
                MenuItem::Checkmark(c) => format!("[{}] {}", u8::from(c.checked), c.label),
                MenuItem::Separator => "—".to_string(),
                _ => "?".to_string(),
            })
            .collect()
    }

    #[test]
    fn the_menu_has_every_line_and_the_cheapest_hours_and_battery_only_when_known() {
        let (mut item, _told) = item();
        item.show(Shown {
            now: "42 W · measured".into(),
            session: "Session 0.01 kWh".into(),
            today: "Today 0.2 kWh".into(),
            last_answer: "Last answer 12 J".into(),
            top: "Top: llama_server 30 W".into(),
            low_power: true,
            ..Shown::default()
        });
        let expected = [
            "42 W · measured",
            "Session 0.01 kWh",
            "Today 0.2 kWh",
            "Last answer 12 J",
            "Top: llama__server 30 W",
            "—",
            "[1] Low-power mode",
            "Reset session",
            "Open dashboard",
            "Preferences…",
            "—",
            "Wattbar 1.0",
            "Quit",
        ];
        assert_eq!(labels(&item), expected);
        let mut with_feed = item.shown.clone();
        with_feed.cheapest = "Cheapest 2 h: 13:00".into();
        item.show(with_feed);
        assert_eq!(labels(&item)[5], "Cheapest 2 h: 13:00");
        assert_eq!(labels(&item).len(), expected.len() + 1);
        let mut with_battery = item.shown.clone();
        with_battery.battery = "Battery 87 % health · 194 cycles".into();
        item.show(with_battery);
        assert_eq!(labels(&item)[6], "Battery 87 % health · 194 cycles");
        assert_eq!(labels(&item)[7], "—");
        let mut no_feed = item.shown.clone();
        no_feed.cheapest = String::new();
        item.show(no_feed);
        assert_eq!(labels(&item)[5], "Battery 87 % health · 194 cycles");
        assert_eq!(labels(&item).len(), expected.len() + 1);
    }

    #[test]
    fn a_left_click_opens_the_dashboard_and_the_digits_are_drawn_in_argb() {
        let (mut item, mut told) = item();
        item.activate(0, 0);
        assert!(matches!(
            told.try_recv(),
            Ok(Told::Clicked(MenuId::OpenDashboard))
        ));
        item.show(Shown {
            icon_text: "42".into(),
            ..Shown::default()
        });
        let drawn = icon_render::render("42", ICON_PX, false);
        let icon = &item.icon_pixmap()[0];
        assert_eq!((icon.width, icon.height), (44, 44));
        // ARGB in network order: each pixel's alpha first, then red, green and blue.
        let argb: Vec<u8> = drawn
            .pixels
            .chunks_exact(4)
            .flat_map(|p| [p[3], p[0], p[1], p[2]])
            .collect();
        assert_eq!(icon.data, argb);
        assert_ne!(icon.data, icon_of(&Shown::default()).data);
    }
}
