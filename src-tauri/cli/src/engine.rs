//! Running an engine in this process, as `watch`, `serve`, `run` and `profile` do: its sources,
//! the stored preferences, and the signal that ends it.

use anyhow::Result;
use wattbar_engine::{build_chain, paths, prefs_file, ChainOptions};

/// Opens the sources off the async worker: NVML measures its counter's update period at start
/// (up to a second).
pub async fn open_sources() -> Result<wattbar_core::Chain> {
    Ok(tokio::task::spawn_blocking(|| build_chain(&ChainOptions::from_env())).await??)
}

pub fn load_prefs(warn: impl Fn(String)) -> Result<wattbar_core::Preferences> {
    let prefs_path = paths::preferences_path()?;
    let (prefs, problems) = prefs_file::load(&prefs_path)?;
    for problem in problems {
        warn(format!(
            "{}: {problem}; using the default",
            prefs_path.display()
        ));
    }
    Ok(prefs)
}

/// Resolves on Ctrl+C or SIGTERM, so that the last batch is written before exit.
pub async fn terminated() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = tokio::signal::ctrl_c() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
