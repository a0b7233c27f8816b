//! The tray icon and its menu. Built once; the title and the info lines change in place, and
//! only when their text changes.

use crate::format;
use crate::menu::MenuId;
use crate::{commands, windows};
use tauri::image::Image;
use tauri::menu::{CheckMenuItem, Menu, MenuEvent, MenuItem, PredefinedMenuItem};
use tauri::tray::{TrayIcon, TrayIconBuilder};
use tauri::{AppHandle, Manager, Wry};
use wattbar_engine::Published;

/// Tray id; on Linux the item is exported at `/org/ayatana/NotificationItem/wattbar`.
pub const TRAY_ID: &str = "wattbar";

pub struct Tray {
    icon: TrayIcon<Wry>,
    now: MenuItem<Wry>,
    session: MenuItem<Wry>,
    low_power: CheckMenuItem<Wry>,
    shown: Shown,
}

#[derive(Default, PartialEq)]
struct Shown {
    title: String,
    now: String,
    session: String,
    low_power: bool,
}

fn icon() -> Result<Image<'static>, tauri::Error> {
    if cfg!(target_os = "macos") {
        Image::from_bytes(include_bytes!("../../icons/tray-template.png"))
    } else {
        Image::from_bytes(include_bytes!("../../icons/tray.png"))
    }
}

impl Tray {
    pub fn build(app: &AppHandle) -> Result<Tray, tauri::Error> {
        let now = MenuItem::with_id(app, MenuId::Now.as_str(), "Starting…", false, None::<&str>)?;
        let session = MenuItem::with_id(
            app,
            MenuId::Session.as_str(),
            "Session —",
            false,
            None::<&str>,
        )?;
        let low_power = CheckMenuItem::with_id(
            app,
            MenuId::LowPower.as_str(),
            "Low-power mode",
            true,
            false,
            None::<&str>,
        )?;
        let reset = MenuItem::with_id(
            app,
            MenuId::ResetSession.as_str(),
            "Reset session",
            true,
            None::<&str>,
        )?;
        let open = MenuItem::with_id(
            app,
            MenuId::OpenDashboard.as_str(),
            "Open dashboard",
            true,
            None::<&str>,
        )?;
        let quit = MenuItem::with_id(app, MenuId::Quit.as_str(), "Quit", true, None::<&str>)?;
        let menu = Menu::with_items(
            app,
            &[
                &now,
                &session,
                &PredefinedMenuItem::separator(app)?,
                &low_power,
                &reset,
                &open,
                &PredefinedMenuItem::separator(app)?,
                &quit,
            ],
        )?;
        let icon = TrayIconBuilder::with_id(TRAY_ID)
            .icon(icon()?)
            .icon_as_template(cfg!(target_os = "macos"))
            .title("— W")
            .tooltip("Wattbar")
            .menu(&menu)
            .show_menu_on_left_click(true)
            .on_menu_event(on_menu_event)
            .build(app)?;
        Ok(Tray {
            icon,
            now,
            session,
            low_power,
            shown: Shown::default(),
        })
    }

    /// Shows the published state.
    pub fn show(&mut self, p: &Published) {
        let next = Shown {
            title: format::title(p),
            now: format::now_line(p),
            session: format::session_line(p),
            low_power: p.low_power.enabled,
        };
        let result = (|| -> Result<(), tauri::Error> {
            if next.title != self.shown.title {
                self.icon.set_title(Some(&next.title))?;
                self.icon
                    .set_tooltip(Some(&format!("Wattbar · {}\n{}", next.now, next.session)))?;
            }
            if next.now != self.shown.now {
                self.now.set_text(&next.now)?;
            }
            if next.session != self.shown.session {
                self.session.set_text(&next.session)?;
            }
            if next.low_power != self.shown.low_power
                || self.low_power.is_checked()? != next.low_power
            {
                self.low_power.set_checked(next.low_power)?;
            }
            Ok(())
        })();
        match result {
            Ok(()) => self.shown = next,
            Err(e) => tracing::warn!("could not update the tray: {e}"),
        }
    }
}

fn on_menu_event(app: &AppHandle, event: MenuEvent) {
    let result = match MenuId::parse(event.id().as_ref()) {
        Some(MenuId::LowPower) => {
            let on = commands::current(app)
                .map(|p| !p.low_power.enabled)
                .unwrap_or(true);
            commands::apply_low_power(app, on).map(|_| ())
        }
        Some(MenuId::ResetSession) => commands::apply_reset(app),
        Some(MenuId::OpenDashboard) => windows::open_dashboard(app).map_err(|e| e.to_string()),
        Some(MenuId::Quit) => {
            // Write the last batch and end the session before the process goes.
            if let Some(state) = app.try_state::<crate::AppState>() {
                tauri::async_runtime::block_on(state.engine.shutdown());
            }
            app.exit(0);
            Ok(())
        }
        Some(MenuId::Now) | Some(MenuId::Session) | None => Ok(()),
    };
    if let Err(e) = result {
        tracing::warn!("menu {:?}: {e}", event.id());
    }
}
