//! The engine's crate from outside: real captures through the chain, the lock, the vendored UI files. `dst.rs` stays a binary of its own: it sets the process's time zone.

mod celeron;
mod lock;
#[cfg(target_os = "linux")]
mod os_power;
mod ui_format;
mod vendor;

#[cfg(target_os = "linux")]
#[path = "../../../tests/desktop/private_bus.rs"]
mod private_bus;
#[cfg(target_os = "linux")]
#[path = "../../../tests/desktop/profiles_daemon.rs"]
mod profiles_daemon;
