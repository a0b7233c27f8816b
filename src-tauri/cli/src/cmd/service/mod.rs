//! `wattbar-cli service install | uninstall | status`: `serve` as a systemd unit (Linux) or a
//! launchd agent (macOS), for the user or the whole machine.
//!
//! Only files that carry [`render::MARKER`] are replaced or removed, and never one the package
//! manager owns, unless `--force`. Nothing here starts, stops or enables a service: the command
//! that does is printed, so that the user's own service manager stays the user's. `status` asks
//! the data folder's engine lock, as every Wattbar program does, and exits as `systemctl` does:
//! 0 running, 3 stopped, 1 on error.

pub mod render;

use crate::args::{ServiceAction, ServiceScope};
use anyhow::{bail, Context, Result};
use render::{Scope, MARKER};
use std::path::{Path, PathBuf};

/// What `systemctl is-active` and `launchctl` users expect of a stopped service.
const EXIT_STOPPED: i32 = 3;

fn scope(s: &ServiceScope) -> Scope {
    if s.system {
        Scope::System
    } else {
        Scope::User
    }
}

fn home() -> Result<PathBuf> {
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
        .context("HOME is not set: where is the user's service folder?")
}

/// Where the service file goes, and the data folder its engine records into.
struct Target {
    file: PathBuf,
    data_dir: PathBuf,
    /// The commands that load the file, or unload it, in the user's service manager.
    enable: String,
    disable: String,
}

fn target(scope: Scope) -> Result<Target> {
    if cfg!(target_os = "macos") {
        let (file, data_dir, domain) = match scope {
            Scope::User => (
                home()?.join("Library/LaunchAgents/dev.wattbar.daemon.plist"),
                wattbar_engine::home::paths::data_dir()?,
                "gui/$(id -u)",
            ),
            Scope::System => (
                PathBuf::from("/Library/LaunchDaemons/dev.wattbar.daemon.plist"),
                PathBuf::from(render::SYSTEM_DATA_DIR_MACOS),
                "system",
            ),
        };
        let sudo = if scope == Scope::System { "sudo " } else { "" };
        Ok(Target {
            enable: format!("{sudo}launchctl bootstrap {domain} {}", file.display()),
            disable: format!("{sudo}launchctl bootout {domain}/dev.wattbar.daemon"),
            file,
            data_dir,
        })
    } else {
        match scope {
            Scope::User => {
                let config = std::env::var_os("XDG_CONFIG_HOME")
                    .filter(|c| !c.is_empty())
                    .map(PathBuf::from)
                    .map_or_else(|| home().map(|h| h.join(".config")), Ok)?;
                Ok(Target {
                    file: config.join("systemd/user/wattbar.service"),
                    data_dir: wattbar_engine::home::paths::data_dir()?,
                    enable:
                        "systemctl --user daemon-reload && systemctl --user enable --now wattbar"
                            .into(),
                    disable: "systemctl --user disable --now wattbar".into(),
                })
            }
            Scope::System => Ok(Target {
                file: PathBuf::from("/etc/systemd/system/wattbar.service"),
                data_dir: PathBuf::from(render::SYSTEM_DATA_DIR_LINUX),
                enable: "sudo systemctl daemon-reload && sudo systemctl enable --now wattbar"
                    .into(),
                disable: "sudo systemctl disable --now wattbar".into(),
            }),
        }
    }
}

/// The group the shipped udev rule lets read RAPL's counters.
const RAPL_GROUP: &str = "wattbar";

/// Whether the system knows the group `name`.
fn group_exists(name: &str) -> bool {
    std::process::Command::new("getent")
        .args(["group", name])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Refuses to touch `file` unless Wattbar wrote it, or `force`.
fn may_replace(file: &Path, force: bool) -> Result<()> {
    if force {
        return Ok(());
    }
    if let Some(package) = wattbar_release::update::package_owner(file) {
        bail!(
            "{} belongs to the package {package}: the package manager keeps it (use --force to \
             replace it anyway)",
            file.display()
        );
    }
    match std::fs::read_to_string(file) {
        Ok(text) if text.contains(MARKER) => Ok(()),
        Ok(_) => bail!(
            "{} was not written by wattbar-cli (it has no \"{MARKER}\" line): left as it is \
             (use --force to replace it)",
            file.display()
        ),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e).with_context(|| format!("cannot read {}", file.display())),
    }
}

fn install(scope: Scope, force: bool) -> Result<()> {
    let target = target(scope)?;
    let exe = std::env::current_exe()
        .and_then(|e| e.canonicalize())
        .context("where is this program?")?;
    let text = if cfg!(target_os = "macos") {
        render::launchd_plist(&exe, scope)?
    } else {
        let rapl_group = scope == Scope::System && group_exists(RAPL_GROUP);
        if scope == Scope::System && !rapl_group {
            eprintln!(
                "wattbar-cli: no group {RAPL_GROUP}: the service will not read RAPL (see \
                 60-wattbar-powercap.rules; `groupadd {RAPL_GROUP}`, then install again)"
            );
        }
        render::systemd_unit(&exe, scope, rapl_group)?
    };
    may_replace(&target.file, force)?;
    if let Some(dir) = target.file.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot make {}", dir.display()))?;
    }
    // Whole or not at all: a half-written unit would be read by the service manager.
    let partial = target.file.with_extension("partial");
    std::fs::write(&partial, text)
        .and_then(|()| std::fs::rename(&partial, &target.file))
        .with_context(|| format!("cannot write {}", target.file.display()))?;
    println!(
        "wrote {} (runs {} serve)",
        target.file.display(),
        exe.display()
    );
    println!("start it, and at every login: {}", target.enable);
    Ok(())
}

fn uninstall(scope: Scope, force: bool) -> Result<()> {
    let target = target(scope)?;
    if !target.file.exists() {
        println!("{} is not there: nothing to remove", target.file.display());
        return Ok(());
    }
    may_replace(&target.file, force)?;
    std::fs::remove_file(&target.file)
        .with_context(|| format!("cannot remove {}", target.file.display()))?;
    println!("removed {}", target.file.display());
    if wattbar_engine::home::lock::EngineLock::holder(&target.data_dir).is_some() {
        println!("its engine still runs: stop it with {}", target.disable);
    }
    Ok(())
}

/// 0 when an engine records into the service's data folder, 3 when none does.
fn status(scope: Scope) -> Result<i32> {
    let target = target(scope)?;
    let file = match std::fs::read_to_string(&target.file) {
        Ok(text) if text.contains(MARKER) => {
            format!("{} (written by wattbar-cli)", target.file.display())
        }
        Ok(_) => format!("{} (not written by wattbar-cli)", target.file.display()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            format!("not installed ({} is not there)", target.file.display())
        }
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", target.file.display())),
    };
    println!("service file: {file}");
    match wattbar_engine::home::lock::EngineLock::holder(&target.data_dir) {
        Some(holder) => {
            let pid = holder
                .pid
                .map_or_else(|| "pid unknown".into(), |p| format!("pid {p}"));
            let api = holder
                .api
                .map_or_else(String::new, |a| format!(", API http://{a}"));
            println!(
                "running: an engine records into {} ({pid}{api})",
                target.data_dir.display()
            );
            Ok(0)
        }
        None => {
            println!(
                "stopped: no engine records into {}; start it with {}",
                target.data_dir.display(),
                target.enable
            );
            Ok(EXIT_STOPPED)
        }
    }
}

/// Runs one `service` action; the exit status is the caller's to give.
pub fn service(action: ServiceAction) -> Result<i32> {
    match action {
        ServiceAction::Install { scope: s, force } => install(scope(&s), force).map(|()| 0),
        ServiceAction::Uninstall { scope: s, force } => uninstall(scope(&s), force).map(|()| 0),
        ServiceAction::Status { scope: s } => status(scope(&s)),
    }
}
