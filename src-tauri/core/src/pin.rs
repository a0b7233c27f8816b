//! One certificate trusted by its SHA-256 fingerprint: a Home Assistant or a plug behind the
//! self-signed certificate its own docs describe (`openssl req -x509 …`), which no system root
//! signs and which webpki refuses as its own issuer (`CaUsedAsEndEntity`).
//!
//! Rules:
//! - A pin is the SHA-256 of the server's end certificate (DER), as `openssl x509 -noout
//!   -fingerprint -sha256` prints it: 32 bytes in hex, with or without colons, any case.
//! - A pinned address trusts that certificate and no other, for any name: the fingerprint names
//!   it exactly, as an SSH host key does. The handshake's signature is still checked against it.
//! - An address without a pin is checked against the system's roots, and a refusal names the
//!   fingerprint it saw, so that the person can compare it with the server's and pin it.

use sha2::{Digest, Sha256};

/// The SHA-256 of one certificate.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Pin([u8; 32]);

impl Pin {
    /// The fingerprint written as `AB:CD:…` or `abcd…`; why not, in words.
    pub fn parse(text: &str) -> Result<Pin, String> {
        let hex: String = text
            .trim()
            .trim_start_matches("sha256/")
            .chars()
            .filter(|c| *c != ':' && !c.is_whitespace())
            .collect();
        let bad = || {
            format!(
                "tls_pin_sha256 is 64 hex digits (colons allowed), as `openssl x509 -noout \
                 -fingerprint -sha256` prints it; {:?} is not",
                text.chars().take(100).collect::<String>()
            )
        };
        if hex.len() != 64 || !hex.is_ascii() {
            return Err(bad());
        }
        let mut bytes = [0u8; 32];
        for (i, b) in bytes.iter_mut().enumerate() {
            *b = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).map_err(|_| bad())?;
        }
        Ok(Pin(bytes))
    }

    /// The fingerprint of the certificate `der`.
    pub fn of(der: &[u8]) -> Pin {
        Pin(Sha256::digest(der).into())
    }
}

/// As `openssl` prints it: `AB:CD:…`.
impl std::fmt::Display for Pin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, b) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(":")?;
            }
            write!(f, "{b:02X}")?;
        }
        Ok(())
    }
}

impl std::fmt::Debug for Pin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Pin({self})")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pin_is_read_as_openssl_prints_it_and_written_back_the_same() {
        // SHA-256 of the empty string.
        let empty = "E3:B0:C4:42:98:FC:1C:14:9A:FB:F4:C8:99:6F:B9:24:27:AE:41:E4:64:9B:93:4C:\
                     A4:95:99:1B:78:52:B8:55";
        let pin = Pin::parse(empty).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(pin, Pin::of(b""));
        assert_eq!(pin.to_string(), empty.replace(' ', ""));
        let lower = empty.replace(':', "").to_ascii_lowercase();
        assert_eq!(Pin::parse(&lower).ok(), Some(pin));
        for bad in [
            "",
            "E3:B0",
            &format!("{lower}00"),
            &lower.replace('e', "g"),
            "é".repeat(32).as_str(),
        ] {
            assert!(Pin::parse(bad).is_err(), "{bad:?} was taken");
        }
    }
}
