//! `wattbar-appindicator`: the tray through libappindicator on GTK's event loop, for a Linux
//! desktop with no StatusNotifierWatcher. `wattbar` becomes this program (exec) when it finds
//! none, so GTK is linked here and not into the tray most desktops run.

fn main() -> std::process::ExitCode {
    #[cfg(target_os = "linux")]
    return wattbar_tray::run_toolkit();
    #[cfg(not(target_os = "linux"))]
    {
        eprintln!("wattbar-appindicator is Linux's fallback tray: run wattbar");
        std::process::ExitCode::FAILURE
    }
}
