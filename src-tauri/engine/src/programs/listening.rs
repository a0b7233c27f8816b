//! The model servers this machine runs, found by their processes: each process of a program
//! named like a model server ([`MODEL_SERVERS`](super::MODEL_SERVERS)) and the ports it listens
//! on that loopback reaches. Nothing else is tried: no port is scanned, and no other process's
//! descriptors are read.
//!
//! A server binds its port once, often minutes after it starts (a model loads first): a process
//! with no such port is looked up again at each of the first reads after it appears, then once a
//! minute; one with ports keeps them while it runs.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use wattbar_core::programs::Used;

/// A model server's process and where this machine reaches it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listener {
    pub program: String,
    /// Its pid and start time (clock ticks after boot): a pid used again is another process.
    pub process: (u32, u64),
    pub at: SocketAddr,
}

/// Reads between two lookups of a process that listened on nothing reachable: a minute at the
/// working pace.
const LOOKUP_EVERY: u32 = 6;
/// Reads a new process is looked up at each time before that: a server that loads its model
/// for a minute is found as soon as it listens.
const FIRST_LOOKUPS: u32 = 6;

#[derive(Debug, Default)]
struct Process {
    program: String,
    at: Vec<SocketAddr>,
    /// Lookups made, and reads to skip before the next.
    looked: u32,
    wait: u32,
}

/// The model servers' processes as last read, with their ports.
#[derive(Debug, Default)]
pub(super) struct Listening {
    processes: BTreeMap<(u32, u64), Process>,
}

impl Listening {
    /// At a read of the processes: forgets those that ended, and looks up the ports of those of
    /// `servers` (programs' names) that have none yet, when due.
    pub(super) fn update(&mut self, root: &Path, used: &[Used], servers: &[&str]) {
        let serving: BTreeMap<(u32, u64), &Used> = used
            .iter()
            .filter(|u| servers.contains(&u.program.as_str()))
            .map(|u| ((u.pid, u.start_ticks), u))
            .collect();
        self.processes.retain(|k, _| serving.contains_key(k));
        let mut ask = Vec::new();
        for (key, u) in &serving {
            let p = self.processes.entry(*key).or_insert_with(|| Process {
                program: u.program.clone(),
                ..Process::default()
            });
            if !p.at.is_empty() {
                continue;
            }
            if p.wait > 0 {
                p.wait -= 1;
                continue;
            }
            p.looked += 1;
            if p.looked >= FIRST_LOOKUPS {
                p.wait = LOOKUP_EVERY - 1;
            }
            ask.push(key.0);
        }
        if ask.is_empty() {
            return;
        }
        // Unreadable sockets or descriptors: nothing found this time, and looked up again.
        let Ok(found) = wattbar_sources::linux::listener::loopback_listeners(root, &ask) else {
            return;
        };
        for (pid, at) in found {
            if let Some(p) = self
                .processes
                .iter_mut()
                .find_map(|(k, p)| (k.0 == pid).then_some(p))
            {
                p.at.push(at);
            }
        }
    }

    /// Every model server's loopback address found, by process.
    pub(super) fn listeners(&self) -> Vec<Listener> {
        self.processes
            .iter()
            .flat_map(|(key, p)| {
                p.at.iter().map(|at| Listener {
                    program: p.program.clone(),
                    process: *key,
                    at: *at,
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn used(pid: u32, start_ticks: u64, program: &str) -> Used {
        Used {
            pid,
            ppid: 1,
            start_ticks,
            name: program.into(),
            program: program.into(),
            ticks: 0.0,
            energy_nj: None,
        }
    }

    #[test]
    fn a_model_servers_loopback_port_is_found_by_its_process_and_forgotten_when_it_ends() {
        let socket = std::net::TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("{e}"));
        let at = socket.local_addr().unwrap_or_else(|e| panic!("{e}"));
        let me = std::process::id();
        let root = Path::new("/");
        let mut l = Listening::default();
        // This process, named as another program: its descriptors are not read.
        l.update(root, &[used(me, 7, "bash")], &["llama-server"]);
        assert_eq!(l.listeners(), []);
        // Named like a model server: its port is found, with the process.
        l.update(root, &[used(me, 7, "llama-server")], &["llama-server"]);
        let found = l.listeners();
        assert!(
            found.contains(&Listener {
                program: "llama-server".into(),
                process: (me, 7),
                at,
            }),
            "{found:?}"
        );
        // The process ended (another started later under the same pid): forgotten at once.
        l.update(root, &[used(me, 8, "bash")], &["llama-server"]);
        assert_eq!(l.listeners(), []);
    }

    #[test]
    fn a_process_that_listens_later_is_found_at_a_later_read() {
        use std::io::{BufRead, Write};
        // A process of its own, which binds a port once told to (a server loading its model).
        let mut child = std::process::Command::new("python3")
            .args([
                "-c",
                "import socket, sys\n\
                 sys.stdin.readline()\n\
                 s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen()\n\
                 print(s.getsockname()[1], flush=True)\n\
                 sys.stdin.readline()\n",
            ])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("python3: {e}"));
        let pid = child.id();
        let mut stdin = child.stdin.take().unwrap_or_else(|| panic!("stdin"));
        let mut stdout =
            std::io::BufReader::new(child.stdout.take().unwrap_or_else(|| panic!("stdout")));
        let root = Path::new("/");
        let servers = ["vllm"];
        let mut l = Listening::default();
        l.update(root, &[used(pid, 3, "vllm")], &servers);
        assert_eq!(l.listeners(), [], "nothing bound yet");
        writeln!(stdin).unwrap_or_else(|e| panic!("{e}"));
        let mut line = String::new();
        stdout
            .read_line(&mut line)
            .unwrap_or_else(|e| panic!("{e}"));
        let port: u16 = line
            .trim()
            .parse()
            .unwrap_or_else(|e| panic!("{line:?}: {e}"));
        // Bound since: found at the next read.
        l.update(root, &[used(pid, 3, "vllm")], &servers);
        let at = SocketAddr::from(([127, 0, 0, 1], port));
        assert_eq!(
            l.listeners(),
            [Listener {
                program: "vllm".into(),
                process: (pid, 3),
                at
            }]
        );
        drop(stdin);
        let _ = child.wait();
    }
}
