//! A D-Bus bus of a test's own (`dbus-daemon --session`), ended with the test: nothing on it but
//! what the test puts there, and no name on it shared with a test running beside it.

use std::process::{Child, Command, Stdio};

pub struct PrivateBus {
    daemon: Child,
    /// The bus's address, for `DBUS_SESSION_BUS_ADDRESS` (or `DBUS_SYSTEM_BUS_ADDRESS`).
    pub address: String,
}

impl PrivateBus {
    pub fn start() -> PrivateBus {
        let mut daemon = Command::new("dbus-daemon")
            .args(["--session", "--nofork", "--print-address=1"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("dbus-daemon: {e}"));
        let mut address = String::new();
        if let Some(out) = daemon.stdout.take() {
            let _ = std::io::BufRead::read_line(&mut std::io::BufReader::new(out), &mut address);
        }
        let address = address.trim().to_string();
        assert!(!address.is_empty(), "dbus-daemon gave no address");
        PrivateBus { daemon, address }
    }
}

impl Drop for PrivateBus {
    fn drop(&mut self) {
        let _ = self.daemon.kill();
        let _ = self.daemon.wait();
    }
}
