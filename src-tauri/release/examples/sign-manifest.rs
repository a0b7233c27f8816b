//! Signs a release manifest for `wattbar-cli version --check` and the tray's About line.
//!
//! cargo run -p wattbar-release --example sign-manifest -- KEY_FILE MANIFEST.json > latest.json
//!
//! KEY_FILE holds the signing key's 32-byte seed in base64 (kept by whoever publishes releases,
//! never in the repository); MANIFEST.json is `{"version": "0.2.0", "expires": "2027-03-01",
//! "released": "…", "notes": "…"}` (a manifest without `expires` is refused by every check).
//! The output is checked against the keys this build trusts before it is printed.

use base64::Engine;
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [key_file, manifest_file] = args.as_slice() else {
        eprintln!("usage: sign-manifest KEY_FILE MANIFEST.json");
        return ExitCode::from(2);
    };
    let read = |path: &str| std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"));
    let run = || -> Result<Vec<u8>, String> {
        let seed = base64::engine::general_purpose::STANDARD
            .decode(read(key_file)?.trim())
            .map_err(|e| format!("{key_file}: not base64: {e}"))?;
        let seed: [u8; 32] = seed
            .try_into()
            .map_err(|_| format!("{key_file}: not a 32-byte seed"))?;
        let manifest = read(manifest_file)?;
        let (body, public) = wattbar_release::update::sign(&seed, manifest.trim());
        wattbar_release::update::verify(&body, &[&public]).map_err(|e| e.to_string())?;
        if !wattbar_release::update::RELEASE_KEYS.contains(&public.as_str()) {
            eprintln!(
                "warning: this build does not trust the key {public}: add it to RELEASE_KEYS"
            );
        }
        Ok(body)
    };
    match run() {
        Ok(body) => {
            println!("{}", String::from_utf8_lossy(&body));
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("sign-manifest: {e}");
            ExitCode::FAILURE
        }
    }
}
