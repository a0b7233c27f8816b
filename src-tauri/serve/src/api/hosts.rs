//! Which `Host` names the API answers to.
//!
//! The rule: a request must name this server, else it gets 421. A DNS-rebinding page reaches us
//! under a name its author controls, so only names that cannot be the attacker's are accepted.
//! - Always: `localhost`, `127.0.0.1` and `[::1]`.
//! - Always: the names the user allows explicitly (`wattbar-cli serve --allow-host NAME`), e.g. the
//!   DNS name a Prometheus server scrapes, or a reverse proxy's name.
//! - Only for a non-loopback listen (a deliberate `--allow-remote`), because a scraper on another
//!   machine names us by address or host name:
//!   - the listen address, or for a wildcard listen (`0.0.0.0`, `::`) the address of every network
//!     interface, IPv4 and IPv6 alike. An IP literal is safe: rebinding needs a name.
//!   - the machine's host name, its first label, and that label under `.local` (mDNS, how macOS and
//!     Avahi machines are reached on a LAN). `.local` is reserved for mDNS (RFC 6762), so no public
//!     DNS name can be it; whoever can answer mDNS here is on the LAN and can reach the port anyway.
//!
//! Names compare case-insensitively, a trailing dot ignored, IPv6 in brackets and canonical form
//! (`[FD00:0::2]` is `[fd00::2]`). The port is checked by the caller. Interfaces are read when the
//! server starts: an address gained later is accepted after a restart, or with `--allow-host`.

use std::net::{IpAddr, SocketAddr};
use wattbar_engine::Error;

/// The names besides the loopback ones that a server listening on `listen` answers to:
/// `allow_hosts` (checked with [`parse_host_name`]; a bad one is logged and skipped), and for a
/// non-loopback listen this machine's host names and addresses. Lower case, IPv6 in brackets,
/// no duplicates, no ports.
pub fn remote_hosts(listen: &SocketAddr, allow_hosts: &[String]) -> Vec<String> {
    let allowed: Vec<String> = allow_hosts
        .iter()
        .filter_map(|h| match parse_host_name(h) {
            Ok(h) => Some(h),
            Err(e) => {
                tracing::warn!("{e}; ignored");
                None
            }
        })
        .collect();
    if listen.ip().is_loopback() {
        return accepted_hosts(listen, None, &[], &allowed);
    }
    let host_name = sysinfo::System::host_name();
    let interfaces: Vec<IpAddr> = if listen.ip().is_unspecified() {
        sysinfo::Networks::new_with_refreshed_list()
            .values()
            .flat_map(|n| n.ip_networks().iter().map(|net| net.addr))
            .collect()
    } else {
        Vec::new()
    };
    accepted_hosts(listen, host_name.as_deref(), &interfaces, &allowed)
}

/// The `Host` names one server answers to: `localhost`, `127.0.0.1`, `[::1]` and the extra names
/// ([`remote_hosts`] gives them for a listen address), each with this server's port or none.
#[derive(Debug, Clone)]
pub struct HostGuard {
    names: Vec<String>,
    port: u16,
}

impl HostGuard {
    pub fn new(extra: &[String], port: u16) -> HostGuard {
        HostGuard {
            names: extra.iter().map(|h| normalize(h)).collect(),
            port,
        }
    }

    /// Whether a `Host` header (`name[:port]`) names this server.
    pub fn allows(&self, host: &str) -> bool {
        let (name, port) = split_host(host);
        let port_ok = match port {
            None => true,
            Some(p) => p.parse::<u16>().ok() == Some(self.port),
        };
        let name = normalize(name);
        let name_ok = matches!(name.as_str(), "localhost" | "127.0.0.1" | "[::1]")
            || self.names.contains(&name);
        port_ok && name_ok
    }

    /// Whether an `Origin` header is a page served by this server.
    pub fn allows_origin(&self, origin: &str) -> bool {
        origin
            .strip_prefix("http://")
            .is_some_and(|host| !host.contains('/') && self.allows(host))
    }
}

/// Splits `host[:port]`, keeping an IPv6 literal's brackets.
fn split_host(host: &str) -> (&str, Option<&str>) {
    if host.starts_with('[') {
        match host.find(']') {
            Some(end) => {
                let (name, rest) = host.split_at(end + 1);
                (name, rest.strip_prefix(':'))
            }
            None => (host, None),
        }
    } else {
        match host.rsplit_once(':') {
            Some((name, port)) => (name, Some(port)),
            None => (host, None),
        }
    }
}

/// A host name as `Host` carries it, for comparison: a DNS name or label, an IPv4 address, or an
/// IPv6 address with or without brackets. Refused: a port, a path, anything but letters, digits,
/// `-`, `_` and `.` in a name.
pub fn parse_host_name(name: &str) -> Result<String, Error> {
    let refuse = |reason: &'static str| Error::HostName {
        name: name.to_string(),
        reason,
    };
    if let Some(canonical) = canonical(name) {
        return Ok(canonical);
    }
    let trimmed = name.trim();
    if trimmed.contains(':') {
        return Err(refuse(
            "give the name without a port (any port of this server is accepted)",
        ));
    }
    let lower = trimmed.trim_end_matches('.').to_ascii_lowercase();
    if lower.is_empty() {
        return Err(refuse("it is empty"));
    }
    if !lower
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
    {
        return Err(refuse("use letters, digits, '-', '_' and '.' only"));
    }
    Ok(lower)
}

/// `name` as it is compared: lower case, no trailing dot, an IP literal in canonical form (IPv6
/// in brackets). `None` when it is no IP literal and needs [`parse_host_name`]'s checks.
fn canonical(name: &str) -> Option<String> {
    let name = name.trim();
    let inner = name
        .strip_prefix('[')
        .and_then(|n| n.strip_suffix(']'))
        .unwrap_or(name);
    match inner.parse::<IpAddr>() {
        Ok(ip) => Some(ip_host(ip)),
        Err(_) => None,
    }
}

/// How `name` (from a `Host` header, port removed) compares with the accepted list.
pub(crate) fn normalize(name: &str) -> String {
    canonical(name).unwrap_or_else(|| name.trim_end_matches('.').to_ascii_lowercase())
}

/// An address as it appears in `Host`.
fn ip_host(ip: IpAddr) -> String {
    match ip {
        IpAddr::V4(v4) => v4.to_string(),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => v4.to_string(),
            None => format!("[{v6}]"),
        },
    }
}

/// [`remote_hosts`] with the machine's host name and interface addresses given.
fn accepted_hosts(
    listen: &SocketAddr,
    host_name: Option<&str>,
    interfaces: &[IpAddr],
    allowed: &[String],
) -> Vec<String> {
    let mut out: Vec<String> = allowed.to_vec();
    if !listen.ip().is_loopback() {
        if let Some(full) = host_name.map(normalize).filter(|h| !h.is_empty()) {
            let label = full.split('.').next().unwrap_or(&full).to_string();
            out.push(format!("{label}.local"));
            out.push(label);
            out.push(full);
        }
        let addresses: Vec<IpAddr> = if listen.ip().is_unspecified() {
            interfaces.to_vec()
        } else {
            vec![listen.ip()]
        };
        out.extend(
            addresses
                .into_iter()
                .filter(|ip| !ip.is_loopback() && !ip.is_unspecified())
                .map(ip_host),
        );
    }
    let mut seen = std::collections::HashSet::new();
    out.retain(|h| seen.insert(h.clone()));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(s: &str) -> SocketAddr {
        s.parse().unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    fn ips(list: &[&str]) -> Vec<IpAddr> {
        list.iter()
            .map(|s| s.parse().unwrap_or_else(|e| panic!("{s}: {e}")))
            .collect()
    }

    #[test]
    fn host_names_keep_ipv6_brackets() {
        assert_eq!(split_host("[::1]:9471"), ("[::1]", Some("9471")));
        assert_eq!(split_host("localhost"), ("localhost", None));
        assert_eq!(split_host("127.0.0.1:80"), ("127.0.0.1", Some("80")));
    }

    #[test]
    fn a_guard_takes_loopback_and_its_names_on_its_port_or_none() {
        let guard = HostGuard::new(&["Box.Local".to_string()], 11435);
        for ok in [
            "localhost:11435",
            "127.0.0.1",
            "[::1]:11435",
            "box.local:11435",
        ] {
            assert!(guard.allows(ok), "{ok} refused");
        }
        for bad in [
            "evil.example:11435",
            "127.0.0.1:11434",
            "localhost.evil.example",
            "",
        ] {
            assert!(!guard.allows(bad), "{bad} accepted");
        }
        assert!(guard.allows_origin("http://localhost:11435"));
        assert!(!guard.allows_origin("http://evil.example"));
    }

    #[test]
    fn a_wildcard_listen_accepts_every_interface_address_and_the_host_names() {
        let interfaces = ips(&["127.0.0.1", "192.0.2.7", "::1", "FD00::2", "fe80::1"]);
        let hosts = accepted_hosts(
            &addr("0.0.0.0:9471"),
            Some("Build-Box"),
            &interfaces,
            &["prom.example".to_string()],
        );
        assert_eq!(
            hosts,
            [
                "prom.example",
                "build-box.local",
                "build-box",
                "192.0.2.7",
                "[fd00::2]",
                "[fe80::1]"
            ]
        );
        let v6 = accepted_hosts(&addr("[::]:9471"), None, &interfaces, &[]);
        assert_eq!(v6, ["192.0.2.7", "[fd00::2]", "[fe80::1]"]);
    }

    #[test]
    fn a_specific_listen_accepts_that_address_only() {
        let interfaces = ips(&["192.0.2.7", "198.51.100.3"]);
        let hosts = accepted_hosts(
            &addr("198.51.100.3:9471"),
            Some("box.lan.example"),
            &interfaces,
            &[],
        );
        assert_eq!(
            hosts,
            ["box.local", "box", "box.lan.example", "198.51.100.3"]
        );
        let v6 = accepted_hosts(&addr("[fd00::2]:1"), None, &[], &[]);
        assert_eq!(v6, ["[fd00::2]"]);
    }

    #[test]
    fn a_loopback_listen_adds_only_the_allowed_names() {
        let interfaces = ips(&["192.0.2.7"]);
        for listen in ["127.0.0.1:9471", "[::1]:9471"] {
            let hosts = accepted_hosts(&addr(listen), Some("box"), &interfaces, &[]);
            assert!(hosts.is_empty(), "{listen}: {hosts:?}");
        }
        let hosts = remote_hosts(&addr("127.0.0.1:9471"), &["Proxy.Example.".to_string()]);
        assert_eq!(hosts, ["proxy.example"]);
    }

    #[test]
    fn allowed_names_are_checked_and_compared_canonically() {
        assert_eq!(
            parse_host_name("FD00:0:0::2").ok().as_deref(),
            Some("[fd00::2]")
        );
        assert_eq!(
            parse_host_name("[fd00::2]").ok().as_deref(),
            Some("[fd00::2]")
        );
        assert_eq!(
            parse_host_name("10.0.0.5").ok().as_deref(),
            Some("10.0.0.5")
        );
        assert_eq!(
            parse_host_name("Metrics.Example.").ok().as_deref(),
            Some("metrics.example")
        );
        for bad in [
            "",
            "prom.example:9090",
            "http://prom",
            "a b",
            "[fd00::2]:80",
        ] {
            assert!(parse_host_name(bad).is_err(), "{bad:?} was accepted");
        }
        assert_eq!(normalize("[FD00:0::2]"), "[fd00::2]");
        assert_eq!(normalize("Box.Local."), "box.local");
        assert_eq!(normalize("[::ffff:192.0.2.7]"), "192.0.2.7");
    }
}
