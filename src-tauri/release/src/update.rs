//! Whether a newer release exists, from a signed manifest; nothing is ever downloaded or
//! replaced: the answer says how the user updates (apt, dnf, brew, or a source build).
//!
//! The manifest is one JSON document, `{"manifest": "<JSON text>", "signature": "<base64>"}`:
//! an ed25519 signature over the exact bytes of the inner text, which holds
//! `{"version": "0.2.0", "expires": "2027-03-01", "released"?: "2026-12-01", "notes"?: "…"}`.
//! Only the keys built into this program ([`RELEASE_KEYS`]) are trusted; an answer that does not
//! verify under one of them is refused with its reason, and no part of it is believed.
//!
//! A signed manifest is only as fresh as it says ([`fresh`]): one past its `expires` (a date, the
//! end of that day in UTC, or an RFC 3339 time), one that says no date, and one older than a
//! version this program has already seen are refused. Otherwise an old manifest, replayed, would
//! say "up to date" for good.

use base64::Engine;
use ed25519_dalek::{Signature, Verifier, VerifyingKey};
use serde::Deserialize;
use std::path::Path;
use wattbar_outbound::MANIFEST;

/// The public halves of the keys that sign release manifests, base64.
pub const RELEASE_KEYS: &[&str] = &["eTgahO0Fe9bMQlHY724FvTCJ6QJfKMFcw04nwEPd7jk="];

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The manifest could not be fetched: try later, or check the URL.
    #[error("cannot fetch the update manifest at {url}: {reason}")]
    Unreachable { url: String, reason: String },
    /// The answer is not a signed manifest, or its signature does not verify: ignore it.
    #[error("the update manifest is refused: {0}")]
    Refused(String),
}

/// What the signed manifest says.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Manifest {
    pub version: String,
    #[serde(default)]
    pub released: Option<String>,
    #[serde(default)]
    pub notes: Option<String>,
    /// Until when the manifest holds.
    #[serde(default)]
    pub expires: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Envelope {
    manifest: String,
    signature: String,
}

/// The manifest in `body`, once its signature verifies under one of `keys` (base64 public keys).
pub fn verify(body: &[u8], keys: &[&str]) -> Result<Manifest, Error> {
    let refused = |why: String| Error::Refused(why);
    let envelope: Envelope = serde_json::from_slice(body).map_err(|e| {
        refused(format!(
            "not a signed manifest ({{\"manifest\", \"signature\"}}): {e}"
        ))
    })?;
    let b64 = base64::engine::general_purpose::STANDARD;
    let signature = b64
        .decode(envelope.signature.trim())
        .ok()
        .and_then(|bytes| Signature::from_slice(&bytes).ok())
        .ok_or_else(|| refused("its signature is not 64 bytes of base64".into()))?;
    let trusted = keys.iter().filter_map(|k| {
        let bytes: [u8; 32] = b64.decode(k).ok()?.try_into().ok()?;
        VerifyingKey::from_bytes(&bytes).ok()
    });
    let mut verified = false;
    for key in trusted {
        if key.verify(envelope.manifest.as_bytes(), &signature).is_ok() {
            verified = true;
            break;
        }
    }
    if !verified {
        return Err(refused(
            "its signature does not verify with Wattbar's release key: it was changed, or not \
             signed by Wattbar"
                .into(),
        ));
    }
    let manifest: Manifest = serde_json::from_str(&envelope.manifest)
        .map_err(|e| refused(format!("the signed text is not a manifest: {e}")))?;
    semver::Version::parse(&manifest.version).map_err(|e| {
        refused(format!(
            "its version {:?} is not a version: {e}",
            manifest.version
        ))
    })?;
    Ok(manifest)
}

/// Signs `manifest` with the signing key whose 32-byte seed is `seed`, as a release publishes
/// it; with the public half, base64, which a program must trust for it to verify.
pub fn sign(seed: &[u8; 32], manifest: &str) -> (Vec<u8>, String) {
    use ed25519_dalek::Signer;
    let key = ed25519_dalek::SigningKey::from_bytes(seed);
    let b64 = base64::engine::general_purpose::STANDARD;
    let body = serde_json::json!({
        "manifest": manifest,
        "signature": b64.encode(key.sign(manifest.as_bytes()).to_bytes()),
    });
    (
        body.to_string().into_bytes(),
        b64.encode(key.verifying_key().to_bytes()),
    )
}

/// The answer to "is there a newer release?".
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    UpToDate { latest: Manifest },
    Newer { latest: Manifest },
}

/// Compares the running version with the manifest's, as semver orders them.
pub fn compare(current: &str, latest: Manifest) -> Result<Verdict, Error> {
    let now = semver::Version::parse(current)
        .map_err(|e| Error::Refused(format!("this program's version {current:?}: {e}")))?;
    let then = semver::Version::parse(&latest.version)
        .map_err(|e| Error::Refused(format!("{:?}: {e}", latest.version)))?;
    Ok(if then > now {
        Verdict::Newer { latest }
    } else {
        Verdict::UpToDate { latest }
    })
}

/// The file, in the data folder, where the newest manifest version seen is kept.
pub const SEEN_FILE: &str = "update-seen";

/// Refuses `m` when it is past its `expires` at `now_unix`, says no `expires`, or is older than
/// `seen` (the newest version a check took before).
pub fn fresh(m: &Manifest, now_unix: f64, seen: Option<&str>) -> Result<(), Error> {
    let refused = |why: String| Error::Refused(why);
    let Some(expires) = m.expires.as_deref() else {
        return Err(refused(
            "it says no date it holds until (\"expires\"), so an old one could be replayed \
             for good"
                .into(),
        ));
    };
    let until = expires_unix(expires).ok_or_else(|| {
        refused(format!(
            "its expires {expires:?} is neither a date (2027-03-01) nor an RFC 3339 time"
        ))
    })?;
    if now_unix > until {
        return Err(refused(format!(
            "it expired on {expires}: an old manifest replayed, or the release host stopped \
             renewing it"
        )));
    }
    let version = semver::Version::parse(&m.version)
        .map_err(|e| refused(format!("its version {:?}: {e}", m.version)))?;
    if let Some(seen) = seen.and_then(|v| semver::Version::parse(v.trim()).ok()) {
        if version < seen {
            return Err(refused(format!(
                "it names {version}, older than {seen}, which a check here took before: an old \
                 manifest replayed"
            )));
        }
    }
    Ok(())
}

/// `expires` as Unix seconds: a date is the end of that day, UTC.
fn expires_unix(expires: &str) -> Option<f64> {
    if let Ok(t) = chrono::DateTime::parse_from_rfc3339(expires) {
        return Some(t.timestamp() as f64);
    }
    let day = chrono::NaiveDate::parse_from_str(expires, "%Y-%m-%d").ok()?;
    let end = day.and_hms_opt(23, 59, 59)?.and_utc();
    Some(end.timestamp() as f64 + 1.0)
}

/// The newest manifest version a check took, kept in `file`; `None` before any.
pub fn seen(file: &Path) -> Option<String> {
    std::fs::read_to_string(file)
        .ok()
        .map(|v| v.trim().to_owned())
        .filter(|v| semver::Version::parse(v).is_ok())
}

/// Keeps `m`'s version in `file` as the newest seen (it passed [`fresh`], so it is no older).
pub fn remember(file: &Path, m: &Manifest) -> std::io::Result<()> {
    let partial = file.with_extension("partial");
    std::fs::write(&partial, format!("{}\n", m.version))?;
    std::fs::rename(&partial, file)
}

/// Fetches `url` under the outbound policy ([`MANIFEST`]: https with the system's roots, no
/// redirect to plain http, at most 64 KiB in 10 s), verifies it under `keys` and checks that it is
/// [`fresh`] at `now_unix` beside `seen`.
pub fn fetch(
    url: &str,
    keys: &[&str],
    now_unix: f64,
    seen: Option<&str>,
) -> Result<Manifest, Error> {
    let unreachable = |reason: String| Error::Unreachable {
        url: wattbar_outbound::shown(url),
        reason,
    };
    let address = wattbar_outbound::address(url, MANIFEST.what, None)
        .map_err(|e| unreachable(e.to_string()))?;
    let agent =
        wattbar_outbound::agent(&MANIFEST, &address).map_err(|e| unreachable(e.to_string()))?;
    let mut answer = agent
        .get(&address.url)
        .call()
        .map_err(|e| unreachable(wattbar_outbound::reason(&e)))?;
    let body = wattbar_outbound::read(answer.body_mut(), &MANIFEST)
        .map_err(|e| unreachable(wattbar_outbound::reason(&e)))?;
    let manifest = verify(&body, keys)?;
    fresh(&manifest, now_unix, seen)?;
    Ok(manifest)
}

/// Where dpkg keeps what it installed: present on a Debian-like system.
const DPKG_STATUS: &str = "/var/lib/dpkg/status";

/// The package that owns `file`, asked of the system's package manager: dpkg where it keeps the
/// system's packages, rpm only where dpkg does not (on Debian, `rpm -qf` makes `~/.rpmdb` in the
/// user's home).
pub fn package_owner(file: &Path) -> Option<String> {
    let ask = |program: &str, args: &[&str]| {
        let out = std::process::Command::new(program)
            .args(args)
            .arg(file)
            .output()
            .ok()?;
        let text = String::from_utf8_lossy(&out.stdout);
        let first = text.lines().next()?.trim().to_owned();
        (out.status.success() && !first.is_empty()).then_some(first)
    };
    if Path::new(DPKG_STATUS).exists() {
        return ask("dpkg-query", &["-S"])
            .map(|line| line.split(':').next().unwrap_or(&line).to_owned());
    }
    ask("rpm", &["-qf", "--qf", "%{NAME}\n"])
}

/// How the user of the program at `exe` updates it: through the package manager that installed
/// it, Homebrew, or a new build from source.
pub fn how_to_update(exe: &Path) -> String {
    let text = exe.to_string_lossy();
    if text.contains("/Cellar/") || text.starts_with("/opt/homebrew/") {
        return "brew upgrade wattbar".into();
    }
    match package_owner(exe) {
        Some(package) if which("apt-get") => {
            format!("sudo apt update && sudo apt install --only-upgrade {package}")
        }
        Some(package) if which("dnf") => format!("sudo dnf upgrade {package}"),
        Some(package) => format!("upgrade the package {package} with your package manager"),
        None => "a new build from source: git pull && make release".into(),
    }
}

fn which(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|dir| dir.join(program).is_file()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MANIFEST: &str = r#"{"version": "0.2.0", "released": "2026-12-01"}"#;

    #[test]
    fn a_manifest_signed_by_a_trusted_key_is_read() {
        let (body, public) = sign(&[7; 32], MANIFEST);
        let (_, other) = sign(&[8; 32], MANIFEST);
        let m = verify(&body, &[&other, &public]).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(m.version, "0.2.0");
        assert_eq!(m.released.as_deref(), Some("2026-12-01"));
    }

    #[test]
    fn a_changed_manifest_a_foreign_key_or_no_signature_is_refused() {
        let (mut body, public) = sign(&[7; 32], MANIFEST);
        let (foreign, _) = sign(&[9; 32], MANIFEST);
        // One changed byte inside the signed text: 0.2.0 becomes 9.2.0.
        let at = body
            .windows(5)
            .position(|w| w == b"0.2.0")
            .unwrap_or_else(|| panic!("no version"));
        body[at] = b'9';
        for (what, body) in [
            ("changed", body),
            ("foreign", foreign),
            ("bare", MANIFEST.as_bytes().to_vec()),
        ] {
            match verify(&body, &[&public]) {
                Err(Error::Refused(why)) => assert!(!why.is_empty(), "{what}"),
                other => panic!("{what}: {other:?}"),
            }
        }
    }

    /// 2026-11-29T12:00:00Z, for the freshness checks.
    const NOON: f64 = 1_795_953_600.0;

    fn until(version: &str, expires: Option<&str>) -> Manifest {
        Manifest {
            version: version.into(),
            released: None,
            notes: None,
            expires: expires.map(String::from),
        }
    }

    #[test]
    fn a_manifest_holds_until_the_end_of_its_day_and_no_longer() {
        assert!(fresh(&until("0.2.0", Some("2026-11-29")), NOON, None).is_ok());
        assert!(fresh(&until("0.2.0", Some("2026-11-29T12:00:01Z")), NOON, None).is_ok());
        let expired = fresh(&until("0.2.0", Some("2026-11-28")), NOON, None);
        assert!(
            matches!(&expired, Err(Error::Refused(why)) if why.contains("expired on 2026-11-28")),
            "{expired:?}"
        );
        let undated = fresh(&until("0.2.0", None), NOON, None);
        assert!(
            matches!(&undated, Err(Error::Refused(why)) if why.contains("no date")),
            "{undated:?}"
        );
        assert!(fresh(&until("0.2.0", Some("soon")), NOON, None).is_err());
    }

    #[test]
    fn a_manifest_older_than_one_seen_is_a_replay() {
        let m = until("0.2.0", Some("2027-01-01"));
        assert!(fresh(&m, NOON, Some("0.2.0")).is_ok());
        assert!(fresh(&m, NOON, Some("0.1.9")).is_ok());
        let replayed = fresh(&m, NOON, Some("0.3.0"));
        assert!(
            matches!(&replayed, Err(Error::Refused(why)) if why.contains("older than 0.3.0")),
            "{replayed:?}"
        );
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let file = dir.path().join(SEEN_FILE);
        assert_eq!(seen(&file), None);
        remember(&file, &m).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(seen(&file).as_deref(), Some("0.2.0"));
    }

    #[test]
    fn the_release_key_is_a_key() {
        for k in RELEASE_KEYS {
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(k)
                .unwrap_or_else(|e| panic!("{e}"));
            let bytes: [u8; 32] = bytes.try_into().unwrap_or_else(|_| panic!("not 32 bytes"));
            assert!(VerifyingKey::from_bytes(&bytes).is_ok());
        }
    }

    #[test]
    fn versions_compare_as_semver() {
        let m = |v: &str| Manifest {
            version: v.into(),
            released: None,
            notes: None,
            expires: None,
        };
        assert!(matches!(
            compare("0.1.0", m("0.10.0")),
            Ok(Verdict::Newer { .. })
        ));
        assert!(matches!(
            compare("0.2.0", m("0.2.0")),
            Ok(Verdict::UpToDate { .. })
        ));
        assert!(matches!(
            compare("0.2.0", m("0.2.0-rc.1")),
            Ok(Verdict::UpToDate { .. })
        ));
        assert!(matches!(
            compare("0.3.0", m("0.2.9")),
            Ok(Verdict::UpToDate { .. })
        ));
    }

    mod properties {
        use super::*;
        use proptest::prelude::*;
        use std::sync::OnceLock;

        /// The test key's public half, made once.
        fn public() -> &'static str {
            static PUBLIC: OnceLock<String> = OnceLock::new();
            PUBLIC.get_or_init(|| sign(&[7; 32], MANIFEST).1)
        }

        proptest! {

            /// Any bytes, and any envelope around any text: refused or verified, never a panic,
            /// and nothing unsigned is believed.
            #[test]
            fn no_answer_that_is_not_signed_is_believed(
                bytes in prop::collection::vec(any::<u8>(), 0..300),
                manifest in ".{0,80}",
                signature in "[A-Za-z0-9+/=]{0,100}",
            ) {
                prop_assert!(verify(&bytes, &[public()]).is_err());
                let envelope = serde_json::json!({"manifest": manifest, "signature": signature});
                prop_assert!(verify(envelope.to_string().as_bytes(), &[public()]).is_err());
            }

            /// Any text signed by the key: a manifest only when it is one, and then fresh or
            /// refused with a reason, whatever its dates say.
            #[test]
            fn a_signed_text_is_a_manifest_or_refused(
                version in prop_oneof![Just("0.2.0".to_string()), "[0-9.a-z-]{0,12}"],
                expires in prop_oneof![
                    Just("2100-01-01".to_string()),
                    Just("2000-02-30".to_string()),
                    "[0-9T:Z+-]{0,25}",
                ],
                seen in prop::option::of("[0-9.]{0,8}"),
            ) {
                let text = serde_json::json!({"version": version, "expires": expires}).to_string();
                let (body, _) = sign(&[7; 32], &text);
                if let Ok(m) = verify(&body, &[public()]) {
                    prop_assert!(semver::Version::parse(&m.version).is_ok());
                    match fresh(&m, NOON, seen.as_deref()) {
                        Ok(()) => prop_assert!(m.expires.is_some()),
                        Err(Error::Refused(why)) => prop_assert!(!why.is_empty()),
                        Err(other) => prop_assert!(false, "{other}"),
                    }
                }
            }
        }
    }
}
