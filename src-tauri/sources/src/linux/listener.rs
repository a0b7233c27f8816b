//! Which process listens on a TCP port: the kernel's socket diagnostics
//! ([`super::sock_diag`]; where it has none, `root/proc/net/tcp` and `tcp6`) give the listening
//! sockets' inodes and owners, and the process holding one has a `root/proc/[pid]/fd` link
//! `socket:[inode]`. It names the model server behind the proxy's upstream, and the ports a model
//! server's process listens on.
//!
//! Scanning every process's descriptors costs a readlink each: [`find_listener`]'s callers look a
//! port up again only when the process they found has ended; [`loopback_listeners`] reads only
//! the descriptors of the processes it is given. Another user's descriptors cannot be read without
//! privileges: such a listener is not found (`None`), which is not an error, and a socket
//! another user owns is not looked for (unless this process runs as root).

use crate::error::Error;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// `socket:[inode]` of a `/proc/[pid]/fd` link.
fn socket_inode(link: &Path) -> Option<u64> {
    link.to_str()?
        .strip_prefix("socket:[")?
        .strip_suffix(']')?
        .parse()
        .ok()
}

/// A listening TCP socket: its local address and port, inode, and owner where known.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Socket {
    pub addr: IpAddr,
    pub port: u16,
    pub inode: u64,
    pub uid: Option<u32>,
}

/// The address of a `/proc/net/tcp` (8 hex digits) or `tcp6` (32) line: each 32-bit word is
/// printed as the kernel holds it in memory, network order read as a native number.
fn parse_addr(hex: &str) -> Option<IpAddr> {
    let word = |i: usize| {
        hex.get(i * 8..i * 8 + 8)
            .and_then(|w| u32::from_str_radix(w, 16).ok())
            .map(u32::to_ne_bytes)
    };
    match hex.len() {
        8 => Some(IpAddr::from(word(0)?)),
        32 => {
            let mut bytes = [0_u8; 16];
            for (i, chunk) in bytes.chunks_exact_mut(4).enumerate() {
                chunk.copy_from_slice(&word(i)?);
            }
            Some(IpAddr::from(bytes))
        }
        _ => None,
    }
}

/// The listening sockets of a `/proc/net/tcp` or `/proc/net/tcp6`.
pub fn parse_listening(text: &str) -> Result<Vec<Socket>, Error> {
    let parse_err = |line: usize, message: String| Error::Parse {
        what: "/proc/net/tcp",
        line: Some(line),
        message,
    };
    let mut out = Vec::new();
    // The first line names the columns.
    for (n, line) in text.lines().enumerate().skip(1) {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let [_, local, _, state, _, _, _, uid, _, inode, ..] = fields[..] else {
            return Err(parse_err(
                n + 1,
                format!("{} fields, need 10", fields.len()),
            ));
        };
        // 0A: TCP_LISTEN.
        if state != "0A" {
            continue;
        }
        let (addr, port) = local
            .split_once(':')
            .and_then(|(a, p)| Some((parse_addr(a)?, u16::from_str_radix(p, 16).ok()?)))
            .ok_or_else(|| parse_err(n + 1, format!("local address {local:?}")))?;
        out.push(Socket {
            addr,
            port,
            inode: inode
                .parse()
                .map_err(|e| parse_err(n + 1, format!("inode {inode:?}: {e}")))?,
            uid: uid.parse().ok(),
        });
    }
    Ok(out)
}

/// Every listening TCP socket of this machine's network namespace.
fn listening(root: &Path) -> Result<Vec<Socket>, Error> {
    #[cfg(target_os = "linux")]
    if let Ok(all) = super::sock_diag::listening() {
        return Ok(all
            .into_iter()
            .map(|l| Socket {
                addr: l.addr,
                port: l.port,
                inode: l.inode,
                uid: Some(l.uid),
            })
            .collect());
    }
    let net = root.join("proc/net");
    let mut sockets = Vec::new();
    for file in ["tcp", "tcp6"] {
        match super::sysfs::read_proc_text(&net.join(file)) {
            Ok(text) => sockets.extend(parse_listening(&text)?),
            // A kernel without IPv6 has no tcp6.
            Err(_) if file == "tcp6" => {}
            Err(e) => {
                return Err(Error::Unavailable(format!(
                    "{}: {e}",
                    net.join(file).display()
                )))
            }
        }
    }
    Ok(sockets)
}

/// The sockets of `listening` whose owner's descriptors this process can read.
fn readable(root: &Path, listening: Vec<Socket>) -> Vec<Socket> {
    let me = std::fs::metadata(root.join("proc/self"))
        .map(|m| m.uid())
        .ok();
    listening
        .into_iter()
        .filter(|s| me == Some(0) || s.uid.is_none() || s.uid == me)
        .collect()
}

/// The socket inodes among `/proc/[pid]/fd`'s links.
fn socket_inodes(proc_pid: &Path) -> impl Iterator<Item = u64> {
    std::fs::read_dir(proc_pid.join("fd"))
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .filter_map(|fd| std::fs::read_link(fd.path()).ok())
        .filter_map(|link| socket_inode(&link))
}

/// The pid of a process listening on `port` on this machine, where one is readable.
pub fn find_listener(root: &Path, port: u16) -> Result<Option<u32>, Error> {
    let inodes: Vec<u64> = readable(root, listening(root)?)
        .into_iter()
        .filter(|s| s.port == port)
        .map(|s| s.inode)
        .collect();
    if inodes.is_empty() {
        return Ok(None);
    }
    let proc_dir = root.join("proc");
    let listing = std::fs::read_dir(&proc_dir)
        .map_err(|e| Error::Unavailable(format!("{}: {e}", proc_dir.display())))?;
    for entry in listing.filter_map(Result::ok) {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        if socket_inodes(&entry.path()).any(|i| inodes.contains(&i)) {
            return Ok(Some(pid));
        }
    }
    Ok(None)
}

/// Where a socket listening on `addr:port` is reached from this machine: its own address
/// where that is a loopback one, the family's loopback where it listens on every address;
/// `None` where it listens on another address alone.
pub fn on_loopback(addr: IpAddr, port: u16) -> Option<SocketAddr> {
    let ip = match addr {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(v6),
        },
        v4 => v4,
    };
    let reached = match ip {
        a if a.is_loopback() => a,
        IpAddr::V4(a) if a.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(a) if a.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
        _ => return None,
    };
    Some(SocketAddr::new(reached, port))
}

/// The sockets that each of `pids` listens on and that this machine reaches on loopback
/// ([`on_loopback`]), one per port, in the order of `pids`. Only those processes' descriptors
/// are read: no port is tried, and no other process is looked at.
pub fn loopback_listeners(root: &Path, pids: &[u32]) -> Result<Vec<(u32, SocketAddr)>, Error> {
    if pids.is_empty() {
        return Ok(Vec::new());
    }
    let sockets = readable(root, listening(root)?);
    let mut out: Vec<(u32, SocketAddr)> = Vec::new();
    for &pid in pids {
        let held: Vec<u64> = socket_inodes(&root.join("proc").join(pid.to_string())).collect();
        for s in sockets.iter().filter(|s| held.contains(&s.inode)) {
            if let Some(at) = on_loopback(s.addr, s.port) {
                if !out.iter().any(|(_, a)| a.port() == at.port()) {
                    out.push((pid, at));
                }
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_found_listening_on_its_own_port() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("{e}"));
        let port = listener
            .local_addr()
            .unwrap_or_else(|e| panic!("{e}"))
            .port();
        let found = find_listener(Path::new("/"), port).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(found, Some(std::process::id()));
        drop(listener);
        let found = find_listener(Path::new("/"), port).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(found, None, "nothing listens on {port} any more");
    }

    #[test]
    fn only_listening_sockets_count_each_with_its_address_port_inode_and_owner() {
        let text = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n   \
             0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 4242 1 0000000000000000 100 0 0 10 0\n   \
             1: 0100007F:1F90 0100007F:D2F0 01 00000000:00000000 00:00000000 00000000  1000        0 4343 1 0000000000000000 20 4 30 10 -1\n   \
             2: 00000000:0016 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 17 1 0000000000000000 100 0 0 10 0\n";
        let sockets = parse_listening(text).unwrap_or_else(|e| panic!("{e}"));
        // 0100007F:1F90 is 127.0.0.1:8080 (the address's bytes as a little-endian word).
        assert_eq!(
            sockets,
            [
                Socket {
                    addr: IpAddr::V4(Ipv4Addr::LOCALHOST),
                    port: 8080,
                    inode: 4242,
                    uid: Some(1000)
                },
                Socket {
                    addr: IpAddr::V4(Ipv4Addr::UNSPECIFIED),
                    port: 22,
                    inode: 17,
                    uid: Some(0)
                },
            ]
        );
        assert!(matches!(
            parse_listening("header\n 0: x\n"),
            Err(Error::Parse { .. })
        ));
    }

    #[test]
    fn tcp6_addresses_are_read_word_by_word() {
        // ::1 port 8000, and :: port 30000, as a little-endian kernel prints them.
        let text = "  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n   \
             0: 00000000000000000000000001000000:1F40 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 555 1 0000000000000000 100 0 0 10 0\n   \
             1: 00000000000000000000000000000000:7530 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 556 1 0000000000000000 100 0 0 10 0\n";
        if cfg!(target_endian = "big") {
            return;
        }
        let sockets = parse_listening(text).unwrap_or_else(|e| panic!("{e}"));
        let seen: Vec<(IpAddr, u16)> = sockets.iter().map(|s| (s.addr, s.port)).collect();
        assert_eq!(
            seen,
            [
                (IpAddr::V6(Ipv6Addr::LOCALHOST), 8000),
                (IpAddr::V6(Ipv6Addr::UNSPECIFIED), 30000)
            ]
        );
    }

    #[test]
    fn a_server_is_reached_on_loopback_only_where_it_listens_there() {
        let at = |a: &str| on_loopback(a.parse().unwrap_or_else(|e| panic!("{a}: {e}")), 8080);
        let v4: SocketAddr = "127.0.0.1:8080".parse().unwrap_or_else(|e| panic!("{e}"));
        let v6: SocketAddr = "[::1]:8080".parse().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(at("127.0.0.1"), Some(v4));
        assert_eq!(at("0.0.0.0"), Some(v4));
        assert_eq!(at("::ffff:127.0.0.1"), Some(v4));
        assert_eq!(at("::1"), Some(v6));
        assert_eq!(at("::"), Some(v6));
        // Bound to the LAN address alone: not reached on loopback, so not asked.
        assert_eq!(at("192.168.1.20"), None);
        assert_eq!(at("fe80::1"), None);
    }

    #[test]
    fn a_processs_own_loopback_listeners_are_found_and_no_one_elses() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("{e}"));
        let addr = listener.local_addr().unwrap_or_else(|e| panic!("{e}"));
        let me = std::process::id();
        let found = loopback_listeners(Path::new("/"), &[me]).unwrap_or_else(|e| panic!("{e}"));
        assert!(found.contains(&(me, addr)), "{found:?}");
        // pid 1 is not this process: this socket is not its.
        let init = loopback_listeners(Path::new("/"), &[1]).unwrap_or_else(|e| panic!("{e}"));
        assert!(init.iter().all(|(_, a)| *a != addr), "{init:?}");
        drop(listener);
        let found = loopback_listeners(Path::new("/"), &[me]).unwrap_or_else(|e| panic!("{e}"));
        assert!(!found.iter().any(|(_, a)| *a == addr), "{found:?}");
    }
}
