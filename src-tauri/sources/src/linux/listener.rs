//! Which process listens on a TCP port: the kernel's socket diagnostics
//! ([`super::sock_diag`]; where it has none, `root/proc/net/tcp` and `tcp6`) give the listening
//! sockets' inodes and owners, and the process holding one has a `root/proc/[pid]/fd` link
//! `socket:[inode]`. It names the model server behind the proxy's upstream.
//!
//! Scanning every process's descriptors costs a readlink each: callers look a port up again only
//! when the process they found has ended. Another user's descriptors cannot be read without
//! privileges: such a listener is not found (`None`), which is not an error, and a socket
//! another user owns is not looked for (unless this process runs as root).

use crate::error::Error;
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

/// The inodes of the sockets listening on `port` in a `/proc/net/tcp` or `/proc/net/tcp6`.
pub fn parse_listening(text: &str, port: u16) -> Result<Vec<u64>, Error> {
    let parse_err = |line: usize, message: String| Error::Parse {
        what: "/proc/net/tcp",
        line: Some(line),
        message,
    };
    let mut out = Vec::new();
    // The first line names the columns.
    for (n, line) in text.lines().enumerate().skip(1) {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let [_, local, _, state, _, _, _, _, _, inode, ..] = fields[..] else {
            return Err(parse_err(
                n + 1,
                format!("{} fields, need 10", fields.len()),
            ));
        };
        let local_port = local
            .rsplit_once(':')
            .and_then(|(_, p)| u16::from_str_radix(p, 16).ok())
            .ok_or_else(|| parse_err(n + 1, format!("local address {local:?}")))?;
        // 0A: TCP_LISTEN.
        if local_port == port && state == "0A" {
            out.push(
                inode
                    .parse()
                    .map_err(|e| parse_err(n + 1, format!("inode {inode:?}: {e}")))?,
            );
        }
    }
    Ok(out)
}

/// The inodes of the sockets listening on `port`, each with its owner where known.
fn listening_on(root: &Path, port: u16) -> Result<Vec<(u64, Option<u32>)>, Error> {
    #[cfg(target_os = "linux")]
    if let Ok(all) = super::sock_diag::listening() {
        return Ok(all
            .into_iter()
            .filter(|l| l.port == port)
            .map(|l| (l.inode, Some(l.uid)))
            .collect());
    }
    let net = root.join("proc/net");
    let mut inodes = Vec::new();
    for file in ["tcp", "tcp6"] {
        match std::fs::read_to_string(net.join(file)) {
            Ok(text) => inodes.extend(parse_listening(&text, port)?),
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
    Ok(inodes.into_iter().map(|i| (i, None)).collect())
}

/// The pid of a process listening on `port` on this machine, where one is readable.
pub fn find_listener(root: &Path, port: u16) -> Result<Option<u32>, Error> {
    let listening = listening_on(root, port)?;
    let me = std::fs::metadata(root.join("proc/self"))
        .map(|m| m.uid())
        .ok();
    let readable = |owner: Option<u32>| me == Some(0) || owner.is_none() || owner == me;
    let inodes: Vec<u64> = listening
        .into_iter()
        .filter(|(_, owner)| readable(*owner))
        .map(|(inode, _)| inode)
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
        let Ok(fds) = std::fs::read_dir(entry.path().join("fd")) else {
            continue;
        };
        for fd in fds.filter_map(Result::ok) {
            let inode = std::fs::read_link(fd.path())
                .ok()
                .and_then(|l| socket_inode(&l));
            if inode.is_some_and(|i| inodes.contains(&i)) {
                return Ok(Some(pid));
            }
        }
    }
    Ok(None)
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
    fn only_a_listening_socket_on_the_port_counts() {
        let text = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n   \
             0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 4242 1 0000000000000000 100 0 0 10 0\n   \
             1: 0100007F:1F90 0100007F:D2F0 01 00000000:00000000 00:00000000 00000000  1000        0 4343 1 0000000000000000 20 4 30 10 -1\n   \
             2: 00000000:0016 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 17 1 0000000000000000 100 0 0 10 0\n";
        assert_eq!(
            parse_listening(text, 8080).unwrap_or_else(|e| panic!("{e}")),
            [4242]
        );
        assert_eq!(
            parse_listening(text, 22).unwrap_or_else(|e| panic!("{e}")),
            [17]
        );
        assert!(matches!(
            parse_listening("header\n 0: x\n", 1),
            Err(Error::Parse { .. })
        ));
    }
}
