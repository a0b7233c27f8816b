//! The stand-in power-profiles-daemon (`power_profiles_daemon.py`) for a test: started on a
//! bus of the test's own, what it says read as it says it, stopped with the test.

use super::private_bus::PrivateBus;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

/// The stand-in daemon and every change it was asked for.
pub struct Daemon {
    child: Child,
    lines: Receiver<String>,
    sets: Vec<String>,
}

impl Daemon {
    /// The daemon at `active` on `bus`, from the repository at `repo`.
    pub fn start_at(bus: &PrivateBus, repo: &Path, active: &str) -> Daemon {
        let mut child = Command::new("/usr/bin/python3")
            .arg(repo.join("tests/desktop/power_profiles_daemon.py"))
            .args(["--active", active])
            .env("DBUS_SESSION_BUS_ADDRESS", &bus.address)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| panic!("the stand-in daemon: {e}"));
        let out = child.stdout.take().unwrap_or_else(|| panic!("no stdout"));
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let mut d = Daemon {
            child,
            lines,
            sets: Vec::new(),
        };
        d.wait_for("ready", Duration::from_secs(20));
        d
    }

    /// Waits until the daemon has said `line`, keeping the changes it said before.
    pub fn wait_for(&mut self, line: &str, within: Duration) {
        let deadline = Instant::now() + within;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(l) => {
                    if let Some(p) = l.strip_prefix("set ") {
                        self.sets.push(p.to_string());
                    }
                    if l == line {
                        return;
                    }
                }
                Err(_) => panic!("the daemon never said {line:?}; it set {:?}", self.sets),
            }
        }
    }

    /// Every change so far, once what is under way has been said.
    pub fn all_sets(&mut self) -> Vec<String> {
        while let Ok(l) = self.lines.recv_timeout(Duration::from_millis(500)) {
            if let Some(p) = l.strip_prefix("set ") {
                self.sets.push(p.to_string());
            }
        }
        self.sets.clone()
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
