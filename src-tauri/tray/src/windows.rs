//! The dashboard and preferences windows live in a process of their own, `wattbar-window`, found
//! beside this executable. Asking for a window starts it; it finds this engine through the data
//! folder's lock file and talks to it over the local API. It is single-instance: asked again
//! while it runs, it shows the window asked for, and it ends when its last window closes.

use std::path::PathBuf;
use std::process::{Command, Stdio};

/// The windows' executable, beside this one.
pub const WINDOW_EXE: &str = "wattbar-window";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Window {
    Dashboard,
    Preferences,
}

impl Window {
    /// The flag `wattbar-window` takes for it.
    pub fn flag(self) -> &'static str {
        match self {
            Window::Dashboard => "--open-dashboard",
            Window::Preferences => "--open-preferences",
        }
    }
}

/// A window that could not be asked for, with why.
#[derive(Debug)]
pub struct WindowError(String);

impl std::fmt::Display for WindowError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for WindowError {}

fn window_exe() -> Result<PathBuf, WindowError> {
    let exe =
        std::env::current_exe().map_err(|e| WindowError(format!("where is this program? {e}")))?;
    Ok(exe.with_file_name(format!("{WINDOW_EXE}{}", std::env::consts::EXE_SUFFIX)))
}

/// Starts `wattbar-window` for `window`. The child is waited for on a thread of its own, so it
/// never lingers as a zombie after it ends.
pub fn open(window: Window) -> Result<(), WindowError> {
    let exe = window_exe()?;
    let mut child = Command::new(&exe)
        .arg(window.flag())
        .stdin(Stdio::null())
        .spawn()
        .map_err(|e| {
            WindowError(format!(
                "cannot open the {} ({}: {e})",
                match window {
                    Window::Dashboard => "dashboard",
                    Window::Preferences => "preferences",
                },
                exe.display()
            ))
        })?;
    std::thread::Builder::new()
        .name("window-reaper".into())
        .spawn(move || {
            if let Ok(status) = child.wait() {
                if !status.success() {
                    tracing::warn!("the windows process ended with {status}");
                }
            }
        })
        .map_err(|e| WindowError(format!("cannot watch the windows process: {e}")))?;
    Ok(())
}
