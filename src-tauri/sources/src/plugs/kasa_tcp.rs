//! TP-Link Kasa's legacy local protocol: JSON on TCP port 9999, each message a 4-byte
//! big-endian length and the bytes "encrypted" with an autokey XOR that starts from 171 (a
//! scrambling with no secret: anyone on the network reads it). Wattbar asks one thing,
//! `{"emeter":{"get_realtime":{}}}`, and hands the answer to the same parser as a capture.
//!
//! Newer Kasa firmware and every Tapo speak KLAP instead, which needs the TP-Link cloud
//! account's credentials: they close port 9999 or never answer on it. Wattbar does not ask for
//! those credentials; such a plug is refused with that reason (read it through Home Assistant).

use crate::error::Error;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

/// The port the legacy protocol listens on.
pub const PORT: u16 = 9999;
/// The request for the emeter's reading now.
pub const GET_REALTIME: &str = r#"{"emeter":{"get_realtime":{}}}"#;
/// The longest answer taken: a real emeter answer is a few hundred bytes.
const MAX_ANSWER_BYTES: usize = 64 * 1024;
const FIRST_KEY: u8 = 171;

/// `plain` as the plug expects it: its length, then the scrambled bytes.
pub fn frame(plain: &[u8]) -> Vec<u8> {
    let len = u32::try_from(plain.len()).unwrap_or(u32::MAX);
    let mut out = Vec::with_capacity(4 + plain.len());
    out.extend_from_slice(&len.to_be_bytes());
    let mut key = FIRST_KEY;
    for &b in plain {
        key ^= b;
        out.push(key);
    }
    out
}

/// The plain bytes of a scrambled payload (the length already taken off).
pub fn unscramble(payload: &[u8]) -> Vec<u8> {
    let mut key = FIRST_KEY;
    payload
        .iter()
        .map(|&c| {
            let p = key ^ c;
            key = c;
            p
        })
        .collect()
}

/// The address `host[:port]` names (port 9999 where none is given).
pub fn address(host: &str) -> Result<SocketAddr, Error> {
    let with_port = if host
        .rsplit_once(':')
        .is_some_and(|(_, p)| p.parse::<u16>().is_ok())
    {
        host.to_string()
    } else {
        format!("{host}:{PORT}")
    };
    with_port
        .to_socket_addrs()
        .map_err(|e| Error::Transient(format!("the Kasa plug {host} cannot be found: {e}")))?
        .next()
        .ok_or_else(|| Error::Transient(format!("the Kasa plug {host} has no address")))
}

/// Asks the plug at `addr` for its emeter now, within `timeout` in all (connecting, asking and
/// every byte of the answer: a plug that trickles its answer a byte at a time is given up when
/// the time is out, not kept for minutes); the answer's JSON text.
pub fn ask(addr: SocketAddr, timeout: Duration) -> Result<String, Error> {
    let deadline = Instant::now() + timeout;
    let klap = || {
        Error::Unavailable(format!(
            "the plug at {addr} does not speak the legacy Kasa protocol on port {PORT} (newer \
             Kasa firmware and Tapo use KLAP, which needs the TP-Link cloud account): read it \
             through Home Assistant"
        ))
    };
    let mut stream = match TcpStream::connect_timeout(&addr, timeout) {
        Ok(s) => s,
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => return Err(klap()),
        Err(e) => return Err(Error::Transient(format!("the Kasa plug at {addr}: {e}"))),
    };
    let io = |e: std::io::Error| Error::Transient(format!("the Kasa plug at {addr}: {e}"));
    stream
        .set_write_timeout(Some(left(deadline).map_err(io)?))
        .map_err(io)?;
    stream
        .write_all(&frame(GET_REALTIME.as_bytes()))
        .map_err(io)?;
    let mut len = [0u8; 4];
    match read_exact_by(&mut stream, &mut len, deadline) {
        Ok(()) => {}
        // Accepted, then closed with nothing said: a KLAP device turning the old protocol away.
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Err(klap()),
        Err(e) => return Err(io(e)),
    }
    let len = u32::from_be_bytes(len) as usize;
    if len == 0 || len > MAX_ANSWER_BYTES {
        return Err(Error::Transient(format!(
            "the Kasa plug at {addr} announced an answer of {len} bytes"
        )));
    }
    let mut payload = vec![0u8; len];
    read_exact_by(&mut stream, &mut payload, deadline).map_err(io)?;
    String::from_utf8(unscramble(&payload)).map_err(|_| {
        Error::Transient(format!(
            "the plug at {addr} answered bytes that are not the Kasa protocol's"
        ))
    })
}

const NO_WHOLE_ANSWER: &str = "no whole answer in time";

/// The time left until `deadline`; an error once none is.
fn left(deadline: Instant) -> std::io::Result<Duration> {
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            NO_WHOLE_ANSWER,
        ));
    }
    Ok(left)
}

/// Fills `buf` from `stream` by `deadline`, however the bytes come.
fn read_exact_by(stream: &mut TcpStream, buf: &mut [u8], deadline: Instant) -> std::io::Result<()> {
    let mut filled = 0;
    while filled < buf.len() {
        stream.set_read_timeout(Some(left(deadline)?))?;
        match stream.read(&mut buf[filled..]) {
            Ok(0) => return Err(std::io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => filled += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            // The read's own timeout, the time left: the deadline passed.
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    NO_WHOLE_ANSWER,
                ))
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scrambling_is_the_published_one_and_undoes_itself() {
        // {"system":{"get_sysinfo":{}}}, scrambled as every Kasa client sends it: the first
        // bytes are 0xd0 0xf2 0x81 0xf8 ('{' = 0x7b ^ 171 = 0xd0, then '"' ^ 0xd0 = 0xf2, …).
        let framed = frame(br#"{"system":{"get_sysinfo":{}}}"#);
        assert_eq!(&framed[..4], &[0, 0, 0, 29]);
        assert_eq!(&framed[4..8], &[0xd0, 0xf2, 0x81, 0xf8]);
        assert_eq!(
            unscramble(&framed[4..]),
            br#"{"system":{"get_sysinfo":{}}}"#.to_vec()
        );
    }

    #[test]
    fn a_host_without_a_port_is_asked_on_9999() {
        assert_eq!(
            address("127.0.0.1").ok(),
            "127.0.0.1:9999".parse::<SocketAddr>().ok()
        );
        assert_eq!(
            address("127.0.0.1:10099").ok(),
            "127.0.0.1:10099".parse::<SocketAddr>().ok()
        );
    }
}
