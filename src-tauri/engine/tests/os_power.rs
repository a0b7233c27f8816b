//! Low-power mode's switch of the OS power profile (the `os_power_mode` preference), against a
//! stand-in power-profiles-daemon speaking the daemon's own D-Bus interface on a bus of the
//! test's own (`tests/desktop/power_profiles_daemon.py`, at `balanced` when it starts).

use crate::private_bus::PrivateBus;
use crate::profiles_daemon::Daemon;
use std::path::PathBuf;
use wattbar_engine::os_power::OsPowerMode;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[test]
fn engaging_saves_the_profile_and_releasing_restores_it() {
    let bus = PrivateBus::start();
    let mut daemon = Daemon::start_at(&bus, &repo(), "balanced");
    let mut mode = OsPowerMode::new(Some(bus.address.clone()));
    assert_eq!(
        mode.follow(true).as_deref(),
        Ok("power profile balanced → power-saver")
    );
    assert_eq!(
        mode.follow(false).as_deref(),
        Ok("power profile power-saver → balanced")
    );
    assert_eq!(daemon.all_sets(), ["power-saver", "balanced"]);
}

#[test]
fn a_profile_the_user_chose_meanwhile_is_kept() {
    let bus = PrivateBus::start();
    let mut daemon = Daemon::start_at(&bus, &repo(), "balanced");
    let mut mode = OsPowerMode::new(Some(bus.address.clone()));
    assert!(mode.follow(true).is_ok());
    // The user switches to performance with GLib's own D-Bus client, as a desktop's menu does.
    let chose = std::process::Command::new("gdbus")
        .args([
            "call",
            "--address",
            &bus.address,
            "--dest",
            "net.hadess.PowerProfiles",
        ])
        .args(["--object-path", "/net/hadess/PowerProfiles"])
        .args(["--method", "org.freedesktop.DBus.Properties.Set"])
        .args([
            "net.hadess.PowerProfiles",
            "ActiveProfile",
            "<'performance'>",
        ])
        .output()
        .unwrap_or_else(|e| panic!("gdbus: {e}"));
    assert!(chose.status.success(), "{chose:?}");
    assert_eq!(
        mode.follow(false).as_deref(),
        Ok("the power profile was changed to performance meanwhile; kept")
    );
    assert_eq!(daemon.all_sets(), ["power-saver", "performance"]);
}

#[test]
fn without_the_daemon_the_switch_says_so_and_changes_nothing() {
    let bus = PrivateBus::start();
    let mut mode = OsPowerMode::new(Some(bus.address.clone()));
    let said = mode.follow(true).err().unwrap_or_default();
    assert!(
        said.contains("power-profiles-daemon is not running"),
        "{said}"
    );
    // Nothing was saved: releasing has nothing to put back.
    assert_eq!(
        mode.follow(false).as_deref(),
        Ok("no power profile to restore")
    );
}
