//! Running an engine in this process, as `watch`, `serve`, `run` and `profile` do: its sources,
//! the stored preferences, and the signal that ends it.

use anyhow::Result;
use wattbar_engine::home::{paths, prefs_file};
use wattbar_engine::{build_chain, ChainOptions};

/// Opens the sources off the async worker: NVML measures its counter's update period at start
/// (up to a second). `wall_meter` is a plug's address given on the command line, over the
/// environment's.
pub async fn open_sources(wall: crate::args::WallMeterArgs) -> Result<wattbar_core::Chain> {
    let mut options = ChainOptions::from_env();
    if let Some(url) = wall
        .wall_meter
        .or_else(|| options.wall_meter.take().map(|m| m.url))
    {
        options.wall_meter = Some(wattbar_sources::plugs::WallMeter {
            tls_pin: wall.wall_meter_pin,
            ..wall_meter(
                url,
                wall.wall_meter_password_file.as_deref(),
                wall.wall_meter_token_file.as_deref(),
            )?
        });
    }
    Ok(tokio::task::spawn_blocking(move || build_chain(&options)).await??)
}

/// The wall meter at `url` (from the command line or the environment, which every local user
/// can read: never with a password in it), its secrets from their files.
fn wall_meter(
    url: String,
    password_file: Option<&std::path::Path>,
    token_file: Option<&std::path::Path>,
) -> Result<wattbar_sources::plugs::WallMeter> {
    if !url.trim().starts_with("kasa://") {
        wattbar_outbound::address(&url, "the wall meter", Some("--wall-meter-password-file"))?;
    }
    let secret = |file: Option<&std::path::Path>| -> Result<_> {
        let Some(file) = file else { return Ok(None) };
        let secret = wattbar_engine::home::secrets::read_secret_file(file)?;
        Ok(wattbar_core::secret::Bound::new(&url, secret))
    };
    let (password, token) = (secret(password_file)?, secret(token_file)?);
    Ok(wattbar_sources::plugs::WallMeter {
        url,
        password,
        token,
        ..Default::default()
    })
}

/// The preferences for an engine this process runs, and what it must tell the user: a file that
/// cannot be read is set aside and the defaults used (`prefs_file::load_or_set_aside`).
pub fn load_prefs(warn: impl Fn(String)) -> Result<(wattbar_core::Preferences, Option<String>)> {
    let prefs_path = paths::preferences_path()?;
    let (prefs, problems, notice) =
        prefs_file::load_or_set_aside(&prefs_path, wattbar_engine::unix_now() as u64)?;
    for problem in problems {
        warn(format!(
            "{}: {problem}; using the default",
            prefs_path.display()
        ));
    }
    if let Some(n) = &notice {
        warn(n.clone());
    }
    Ok((prefs, notice))
}

/// The preferences for a command that only reads: an unreadable file gives the defaults with a
/// warning, and is left where it is for the engine to set aside.
pub fn read_prefs() -> Result<wattbar_core::Preferences> {
    let path = paths::preferences_path()?;
    Ok(match prefs_file::load(&path) {
        Ok((prefs, _)) => prefs,
        Err(e) => {
            eprintln!("wattbar-cli: {e}; using the default preferences");
            wattbar_core::Preferences::default()
        }
    })
}

/// Resolves on Ctrl+C or SIGTERM, so that the last batch is written before exit. The signals are
/// caught from this call on, not from the first poll: a Ctrl+C between the call and the first
/// `.await` (a message printed, a deferred start chosen) still ends the command its own way
/// instead of by the signal's default.
pub fn terminated() -> impl std::future::Future<Output = ()> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let term = signal(SignalKind::terminate()).ok();
        let interrupt = signal(SignalKind::interrupt()).ok();
        async move {
            let term = async {
                match term {
                    Some(mut s) => {
                        s.recv().await;
                    }
                    None => std::future::pending().await,
                }
            };
            let interrupt = async {
                match interrupt {
                    Some(mut s) => {
                        s.recv().await;
                    }
                    None => {
                        let _ = tokio::signal::ctrl_c().await;
                    }
                }
            };
            tokio::select! {
                _ = term => {}
                _ = interrupt => {}
            }
        }
    }
    #[cfg(not(unix))]
    {
        async {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}
