//! The model server found by its port: the process listening on the proxy's upstream port, where
//! that is on this machine, looked up again only when that process ends, and otherwise at most
//! once a minute.

use std::path::Path;

/// The process listening on the proxy's upstream port, as last found.
#[derive(Debug, Default)]
pub(super) struct Upstream {
    port: Option<u16>,
    process: Option<(u32, u64)>,
    /// Reads to skip before looking the port up again: scanning every process's descriptors is
    /// not done at every read.
    wait: u32,
}

/// Reads between two lookups of a port nobody was found on: a minute.
const LOOKUP_EVERY: u32 = 6;

impl Upstream {
    /// Follows `port` from now on; a new port forgets the process found on the old one.
    pub(super) fn set_port(&mut self, port: Option<u16>) {
        if self.port != port {
            *self = Upstream {
                port,
                ..Upstream::default()
            };
        }
    }

    /// The program of the process listening on the port, among `used`.
    pub(super) fn program(
        &mut self,
        root: &Path,
        used: &[wattbar_core::programs::Used],
    ) -> Option<String> {
        let port = self.port?;
        let find = |key: (u32, u64)| {
            used.iter()
                .find(|u| (u.pid, u.start_ticks) == key)
                .map(|u| u.program.clone())
        };
        if let Some(program) = self.process.and_then(find) {
            return Some(program);
        }
        // Not found yet, or it ended (the server restarted): look again, now and then.
        self.process = None;
        if self.wait > 0 {
            self.wait -= 1;
            return None;
        }
        self.wait = LOOKUP_EVERY - 1;
        let pid = wattbar_sources::linux::listener::find_listener(root, port)
            .ok()
            .flatten()?;
        let found = used.iter().find(|u| u.pid == pid)?;
        // Found: when this process ends (the server restarts), look again at once.
        self.wait = 0;
        self.process = Some((found.pid, found.start_ticks));
        Some(found.program.clone())
    }
}
