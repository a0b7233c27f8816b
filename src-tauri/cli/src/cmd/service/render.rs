//! The service files `wattbar-cli service install` writes, made from the ones the packages ship
//! (`packaging/linux/wattbar.service`, `packaging/macos/dev.wattbar.daemon.plist`): the same
//! settings, with this program's own path, a marker line that says who wrote the file, and for a
//! system-wide service a data folder of its own. Pure: text in, text out.

use std::path::Path;

/// The words every file written here carries; only a file with them is replaced or removed.
pub const MARKER: &str = "Managed by wattbar-cli service";

const UNIT: &str = include_str!("../../../../../packaging/linux/wattbar.service");
const PLIST: &str = include_str!("../../../../../packaging/macos/dev.wattbar.daemon.plist");
/// The program the shipped unit names: the package's.
const PACKAGED_EXEC: &str = "ExecStart=/usr/bin/wattbar-cli ";
/// The program the shipped property list names, inside its `/bin/sh -c`: a `cargo install`.
const PLIST_EXEC: &str = "\"$HOME/.cargo/bin/wattbar-cli\"";
/// The data folder (and its log) the shipped property list names: the user's.
const PLIST_USER_DATA: &str = "d=\"$HOME/Library/Application Support/dev.wattbar.Wattbar\"";

/// Where the service runs: for the user who installs it, or for the whole machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    User,
    System,
}

/// The data folder of a system-wide service on Linux (systemd's `StateDirectory=`).
pub const SYSTEM_DATA_DIR_LINUX: &str = "/var/lib/wattbar";
/// The data folder of a system-wide service on macOS.
pub const SYSTEM_DATA_DIR_MACOS: &str = "/Library/Application Support/Wattbar";

#[derive(Debug, PartialEq, Eq)]
pub struct RenderError(pub String);

impl std::fmt::Display for RenderError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for RenderError {}

fn marker_line(how: &str) -> String {
    format!(
        "{MARKER} install ({}): `wattbar-cli service uninstall{how}` removes it; edits are lost \
         on the next install.",
        wattbar_release::LONG_VERSION
    )
}

fn scope_flag(scope: Scope) -> &'static str {
    match scope {
        Scope::User => "",
        Scope::System => " --system",
    }
}

/// The sandbox of a system-wide service, as far as what Wattbar reads allows: its own user
/// (`DynamicUser=`), no capabilities, the system and the homes read-only or hidden, only the
/// socket families it uses, and the system calls of an ordinary service. It keeps the devices
/// (NVML opens `/dev/nvidia*`) and `/proc` whole (programs' use and `/proc/stat`), and reaches
/// the network (plugs, brokers, collectors): `systemd-analyze security` rates it 2.0 "OK".
const SYSTEM_SANDBOX: &str = "DynamicUser=yes
StateDirectoryMode=0700
CapabilityBoundingSet=
AmbientCapabilities=
ProtectSystem=strict
ProtectHome=yes
ProtectKernelTunables=yes
ProtectKernelModules=yes
ProtectKernelLogs=yes
ProtectControlGroups=yes
ProtectClock=yes
ProtectHostname=yes
RemoveIPC=yes
";

/// What the shipped user unit says of its sandbox, and what a system unit says instead.
const USER_SANDBOX_NOTE: &str =
    "# The daemon only reads sysfs and /proc and writes its data folder under the home. What a user
# manager applies without namespaces of its own: the system calls of an ordinary service, the
# socket families it uses (NETLINK: name lookups ask for the addresses), files for the user alone.
";
const SYSTEM_SANDBOX_NOTE: &str =
    "# Besides the sandbox above: the system calls of an ordinary service, the socket families it
# uses (NETLINK: name lookups ask for the addresses), files for its own user alone.
";

/// The systemd unit that runs `exe serve` on loopback. A system-wide one runs sandboxed as a
/// user of its own; with `rapl_group`, in the group the shipped udev rule lets read RAPL.
pub fn systemd_unit(exe: &Path, scope: Scope, rapl_group: bool) -> Result<String, RenderError> {
    let exe = exe
        .to_str()
        .ok_or_else(|| RenderError(format!("{exe:?} is not UTF-8: systemd cannot name it")))?;
    if exe.contains(['"', '\\', '\n', '%', '$']) {
        return Err(RenderError(format!(
            "{exe:?} has a character systemd would read as quoting or a specifier: install \
             wattbar-cli in a plain path"
        )));
    }
    let body_at = UNIT
        .find("[Unit]")
        .ok_or_else(|| RenderError("the shipped unit has no [Unit] section".into()))?;
    if !UNIT.contains(PACKAGED_EXEC) {
        return Err(RenderError(
            "the shipped unit does not start /usr/bin/wattbar-cli".into(),
        ));
    }
    let mut unit = format!("# {}\n", marker_line(scope_flag(scope)));
    unit.push_str(&UNIT[body_at..].replace(PACKAGED_EXEC, &format!("ExecStart=\"{exe}\" ")));
    if scope == Scope::System {
        let group = if rapl_group {
            "SupplementaryGroups=wattbar\n"
        } else {
            ""
        };
        unit = unit
            .replace(
                "[Service]\n",
                &format!(
                    "[Service]\nStateDirectory=wattbar\n\
                     Environment=WATTBAR_DATA_DIR={SYSTEM_DATA_DIR_LINUX}\n{SYSTEM_SANDBOX}{group}"
                ),
            )
            .replace("ProtectSystem=full\n", "")
            .replace(USER_SANDBOX_NOTE, SYSTEM_SANDBOX_NOTE)
            .replace("WantedBy=default.target", "WantedBy=multi-user.target");
    }
    Ok(unit)
}

fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// The launchd property list that runs `exe serve` on loopback.
pub fn launchd_plist(exe: &Path, scope: Scope) -> Result<String, RenderError> {
    let exe = exe
        .to_str()
        .ok_or_else(|| RenderError(format!("{exe:?} is not UTF-8")))?;
    // It goes inside the shipped `/bin/sh -c '…'` line, in double quotes.
    if exe.contains(['"', '\\', '$', '`', '\n']) {
        return Err(RenderError(format!(
            "{exe:?} has a character the shell would read: install wattbar-cli in a plain path"
        )));
    }
    let (start, end) = match (PLIST.find("<!--"), PLIST.find("-->")) {
        (Some(s), Some(e)) if s < e => (s, e + 3),
        _ => {
            return Err(RenderError(
                "the shipped property list has no comment".into(),
            ))
        }
    };
    if !PLIST.contains(PLIST_EXEC) || !PLIST.contains(PLIST_USER_DATA) {
        return Err(RenderError(
            "the shipped property list does not start wattbar-cli in its data folder".into(),
        ));
    }
    // An XML comment may not hold "--", so the flag is named in words.
    let how = match scope {
        Scope::User => "",
        Scope::System => " (with its system flag)",
    };
    let marker = xml_escape(&marker_line(how));
    let mut plist = format!("{}<!-- {marker} -->{}", &PLIST[..start], &PLIST[end..])
        .replace(PLIST_EXEC, &xml_escape(&format!("\"{exe}\"")));
    if scope == Scope::System {
        plist = plist.replace(
            PLIST_USER_DATA,
            &xml_escape(&format!("d=\"{SYSTEM_DATA_DIR_MACOS}\"")),
        );
        plist = plist.replace(
            "    <key>RUST_LOG</key>\n",
            &format!(
                "    <key>WATTBAR_DATA_DIR</key>\n    <string>{}</string>\n    <key>RUST_LOG</key>\n",
                xml_escape(SYSTEM_DATA_DIR_MACOS)
            ),
        );
    }
    Ok(plist)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn arguments(plist: &str) -> (String, Vec<String>, plist::Dictionary) {
        let value = plist::Value::from_reader_xml(plist.as_bytes())
            .unwrap_or_else(|e| panic!("{e}\n{plist}"));
        let dict = value
            .into_dictionary()
            .unwrap_or_else(|| panic!("not a dictionary"));
        let label = dict
            .get("Label")
            .and_then(|v| v.as_string())
            .unwrap_or_default()
            .to_owned();
        let args = dict
            .get("ProgramArguments")
            .and_then(|v| v.as_array())
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_string().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default();
        let env = dict
            .get("EnvironmentVariables")
            .and_then(|v| v.as_dictionary())
            .cloned()
            .unwrap_or_default();
        (label, args, env)
    }

    #[test]
    fn the_launchd_property_list_parses_and_runs_this_program_on_loopback() {
        let exe = Path::new("/Users/ada/My Tools/R&D/wattbar-cli");
        let plist = launchd_plist(exe, Scope::User).unwrap_or_else(|e| panic!("{e}"));
        assert!(plist.contains(MARKER), "{plist}");
        let (label, args, env) = arguments(&plist);
        assert_eq!(label, "dev.wattbar.daemon");
        assert_eq!(
            args,
            [
                "/bin/sh",
                "-c",
                "umask 077; d=\"$HOME/Library/Application Support/dev.wattbar.Wattbar\"; \
                 mkdir -p \"$d\" && exec \"/Users/ada/My Tools/R&D/wattbar-cli\" serve --listen \
                 127.0.0.1:9471 2>>\"$d/daemon.log\""
            ]
        );
        assert!(env.get("WATTBAR_DATA_DIR").is_none());
        // Its log is its own, in its data folder: none in /tmp, which every user shares.
        assert!(!plist.contains("/tmp"), "{plist}");
        assert!(!plist.contains("StandardErrorPath"), "{plist}");
    }

    #[test]
    fn a_system_property_list_keeps_its_data_in_a_folder_of_its_own() {
        let plist = launchd_plist(Path::new("/usr/local/bin/wattbar-cli"), Scope::System)
            .unwrap_or_else(|e| panic!("{e}"));
        let (_, args, env) = arguments(&plist);
        assert!(args[2].contains("\"/usr/local/bin/wattbar-cli\" serve"));
        assert!(
            args[2].contains("d=\"/Library/Application Support/Wattbar\";"),
            "{}",
            args[2]
        );
        assert_eq!(
            env.get("WATTBAR_DATA_DIR").and_then(|v| v.as_string()),
            Some(SYSTEM_DATA_DIR_MACOS)
        );
        assert!(
            plist.contains("service uninstall (with its system flag)"),
            "{plist}"
        );
    }

    #[test]
    fn the_systemd_unit_runs_this_program_and_a_system_one_has_its_own_state() {
        let unit = systemd_unit(
            Path::new("/opt/wattbar/bin/wattbar-cli"),
            Scope::User,
            false,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert!(unit.starts_with(&format!("# {MARKER} install")), "{unit}");
        assert!(unit.contains(
            "ExecStart=\"/opt/wattbar/bin/wattbar-cli\" serve --listen 127.0.0.1:9471\n"
        ));
        assert!(unit.contains("WantedBy=default.target"));
        assert!(!unit.contains("WATTBAR_DATA_DIR"));
        let system = systemd_unit(
            Path::new("/opt/wattbar/bin/wattbar-cli"),
            Scope::System,
            true,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert!(system.contains(
            "[Service]\nStateDirectory=wattbar\nEnvironment=WATTBAR_DATA_DIR=/var/lib/wattbar\n"
        ));
        assert!(system.contains("WantedBy=multi-user.target"));
        assert!(system.contains("DynamicUser=yes\n"));
        assert!(system.contains("SupplementaryGroups=wattbar\n"));
        assert!(!system.contains("under the home"), "{system}");
        // Where the group does not exist, systemd would refuse to start a unit that names it.
        let without = systemd_unit(
            Path::new("/opt/wattbar/bin/wattbar-cli"),
            Scope::System,
            false,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert!(!without.contains("SupplementaryGroups"));
    }

    /// The packages ship the system unit `service install --system` writes for
    /// `/usr/bin/wattbar-cli`, in the group the packages create: one text, checked here.
    #[test]
    fn the_packaged_system_unit_is_the_one_service_install_writes_for_the_packaged_program() {
        let shipped = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../packaging/linux/wattbar-system.service"
        ))
        .unwrap_or_else(|e| panic!("{e}"));
        let written = systemd_unit(Path::new("/usr/bin/wattbar-cli"), Scope::System, true)
            .unwrap_or_else(|e| panic!("{e}"));
        let body = |text: &str| text.find("[Unit]").map(|i| text[i..].to_string());
        if body(&shipped) != body(&written) {
            eprintln!("{written}");
        }
        assert_eq!(body(&shipped), body(&written));
        assert!(exposure(&shipped) <= 4.0);
    }

    /// `systemd-analyze security --offline=yes`'s overall exposure of `unit`: 0 (safe) to 10.
    fn exposure(unit: &str) -> f64 {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let file = dir.path().join("wattbar.service");
        std::fs::write(&file, unit).unwrap_or_else(|e| panic!("{e}"));
        let out = std::process::Command::new("systemd-analyze")
            .args(["security", "--offline=yes", "--no-pager"])
            .arg(&file)
            .output()
            .unwrap_or_else(|e| panic!("systemd-analyze: {e}"));
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        text.lines()
            .find_map(|l| l.split("exposure level for wattbar.service: ").nth(1))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no exposure in: {text}"))
    }

    #[test]
    fn the_system_unit_is_rated_ok_and_the_user_unit_safer_than_before() {
        let exe = Path::new("/usr/bin/wattbar-cli");
        let system =
            exposure(&systemd_unit(exe, Scope::System, true).unwrap_or_else(|e| panic!("{e}")));
        let user =
            exposure(&systemd_unit(exe, Scope::User, false).unwrap_or_else(|e| panic!("{e}")));
        eprintln!("system unit {system}, user unit {user}");
        // systemd's "OK" is up to 4.0; the user unit was 9.1 "UNSAFE".
        assert!(system <= 4.0, "{system}");
        assert!(user < 9.1, "{user}");
    }

    #[test]
    fn a_path_systemd_or_the_shell_would_read_otherwise_is_refused() {
        for exe in [
            "/home/a%h/wattbar-cli",
            "/tmp/\"x\"/wattbar-cli",
            "/tmp/$X/wattbar-cli",
        ] {
            assert!(
                systemd_unit(Path::new(exe), Scope::User, false).is_err(),
                "{exe}"
            );
        }
        for exe in ["/tmp/$(rm)/wattbar-cli", "/tmp/`x`/wattbar-cli"] {
            assert!(launchd_plist(Path::new(exe), Scope::User).is_err(), "{exe}");
        }
    }
}
