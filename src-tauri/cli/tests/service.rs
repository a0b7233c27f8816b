//! `wattbar-cli service`: the unit it writes for the user, checked by systemd itself; files it did
//! not write left alone; `status` exiting as systemctl does. HOME, XDG_CONFIG_HOME and the data
//! folder are temp folders: nothing of this machine's own services is touched or asked.

use crate::common::{cli, Serve};
use std::path::Path;
use std::process::{Command, Output};

fn service(dir: &Path, args: &[&str]) -> Output {
    cli(&dir.join("data"))
        .env("HOME", dir.join("home"))
        .env("XDG_CONFIG_HOME", dir.join("config"))
        .arg("service")
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{e}"))
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// What `systemd-analyze verify --user` says of a unit: nothing when it is right.
fn systemd_verify(unit: &Path, runtime: &Path) -> String {
    std::fs::create_dir_all(runtime).unwrap_or_else(|e| panic!("{e}"));
    let out = Command::new("systemd-analyze")
        .args(["verify", "--man=no", "--user"])
        .arg(unit)
        .env("XDG_RUNTIME_DIR", runtime)
        .output()
        .unwrap_or_else(|e| panic!("systemd-analyze: {e}"));
    assert!(out.status.success(), "{}", text(&out));
    text(&out)
}

#[test]
fn install_writes_a_user_unit_systemd_accepts_and_uninstall_removes_it() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let unit = dir.path().join("config/systemd/user/wattbar.service");
    let exe = Path::new(env!("CARGO_BIN_EXE_wattbar-cli"))
        .canonicalize()
        .unwrap_or_else(|e| panic!("{e}"));

    let out = service(dir.path(), &["install"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    // Asking who owns the unit asked dpkg on this Debian, not rpm, which would have made
    // ~/.rpmdb in the user's home.
    assert!(!dir.path().join("home/.rpmdb").exists());
    assert!(
        text(&out).contains("systemctl --user enable --now wattbar"),
        "{}",
        text(&out)
    );
    let written = std::fs::read_to_string(&unit).unwrap_or_else(|e| panic!("{unit:?}: {e}"));
    assert!(
        written.starts_with("# Managed by wattbar-cli service"),
        "{written}"
    );
    assert!(
        written.contains(&format!(
            "ExecStart=\"{}\" serve --listen 127.0.0.1:9471\n",
            exe.display()
        )),
        "{written}"
    );
    assert_eq!(systemd_verify(&unit, &dir.path().join("run")), "");

    // Its own file is replaced without --force.
    let again = service(dir.path(), &["install", "--user"]);
    assert_eq!(again.status.code(), Some(0), "{}", text(&again));

    let out = service(dir.path(), &["uninstall"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(!unit.exists());
    let out = service(dir.path(), &["uninstall"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(text(&out).contains("nothing to remove"), "{}", text(&out));
}

#[test]
fn a_unit_wattbar_did_not_write_is_left_alone_unless_forced() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let unit = dir.path().join("config/systemd/user/wattbar.service");
    std::fs::create_dir_all(unit.parent().unwrap_or(dir.path())).unwrap_or_else(|e| panic!("{e}"));
    let mine = "[Service]\nExecStart=/opt/mine/wattbar-cli serve --listen 0.0.0.0:9471\n";
    std::fs::write(&unit, mine).unwrap_or_else(|e| panic!("{e}"));

    for action in ["install", "uninstall"] {
        let out = service(dir.path(), &[action]);
        assert_eq!(out.status.code(), Some(1), "{action}: {}", text(&out));
        assert!(
            text(&out).contains("was not written by wattbar-cli"),
            "{}",
            text(&out)
        );
        assert_eq!(std::fs::read_to_string(&unit).ok().as_deref(), Some(mine));
    }
    let out = service(dir.path(), &["install", "--force"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let written = std::fs::read_to_string(&unit).unwrap_or_else(|e| panic!("{e}"));
    assert!(
        written.contains("Managed by wattbar-cli service"),
        "{written}"
    );
}

#[test]
fn status_exits_0_while_an_engine_records_and_3_when_none_does() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).unwrap_or_else(|e| panic!("{e}"));

    let out = service(dir.path(), &["status"]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    assert!(text(&out).contains("not installed"), "{}", text(&out));

    let out = service(dir.path(), &["install"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let serve = Serve::start(&data, "t,watts\n0,42\n", &[]);
    let out = service(dir.path(), &["status"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let said = text(&out);
    assert!(said.contains("(written by wattbar-cli)"), "{said}");
    assert!(
        said.contains(&format!("pid {}", serve.child.id())),
        "{said}"
    );
    assert!(
        said.contains(serve.url.trim_start_matches("http://")),
        "{said}"
    );

    drop(serve);
    let out = service(dir.path(), &["status"]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    assert!(text(&out).contains("stopped"), "{}", text(&out));
}

#[test]
fn status_of_an_unreadable_unit_is_an_error_and_user_with_system_is_refused() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    // A folder where the unit should be: it cannot be read as one.
    std::fs::create_dir_all(dir.path().join("config/systemd/user/wattbar.service"))
        .unwrap_or_else(|e| panic!("{e}"));
    let out = service(dir.path(), &["status"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("cannot read"), "{}", text(&out));

    let out = service(dir.path(), &["status", "--user", "--system"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
}
