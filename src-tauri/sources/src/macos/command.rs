//! Running a macOS command-line tool for its output.
//!
//! Limits: a tool gets [`TOOL_TIMEOUT`] to exit and is killed past it; its output is kept up to
//! [`MAX_TOOL_OUTPUT_BYTES`] and a longer one is refused (a battery's `ioreg` is tens of KiB).

use crate::error::Error;
use crate::tool::run_bounded;
use std::time::Duration;

/// The longest a tool may take: `powermetrics` samples for at most a few seconds.
pub const TOOL_TIMEOUT: Duration = Duration::from_secs(30);
/// The most output read from a tool.
pub const MAX_TOOL_OUTPUT_BYTES: usize = 16 << 20;

/// Runs a command and returns its standard output, read lossily.
///
/// A missing program is `Unavailable` (it will not appear later); a failing run, one past
/// [`TOOL_TIMEOUT`] or one that printed more than [`MAX_TOOL_OUTPUT_BYTES`] is `Transient` with
/// what happened.
pub fn run_command(program: &str, args: &[&str]) -> Result<String, Error> {
    let ran = run_bounded(
        std::process::Command::new(program).args(args),
        None,
        TOOL_TIMEOUT,
        MAX_TOOL_OUTPUT_BYTES,
    )
    .map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => {
            Error::Unavailable(format!("`{program}` is not installed or not on PATH"))
        }
        std::io::ErrorKind::PermissionDenied => {
            Error::Unavailable(format!("`{program}` may not be run by this user: {e}"))
        }
        _ => Error::Transient(format!("could not run `{program}`: {e}")),
    })?;
    let shown = || format!("`{program} {}`", args.join(" "));
    let Some(status) = ran.status else {
        return Err(Error::Transient(format!(
            "{} did not finish within {} s and was stopped",
            shown(),
            TOOL_TIMEOUT.as_secs()
        )));
    };
    if !status.success() {
        let stderr = String::from_utf8_lossy(&ran.stderr);
        return Err(Error::Transient(format!(
            "{} failed ({status}): {}",
            shown(),
            stderr.trim()
        )));
    }
    if ran.stdout_cut {
        return Err(Error::Transient(format!(
            "{} printed more than {} MiB: not read",
            shown(),
            MAX_TOOL_OUTPUT_BYTES >> 20
        )));
    }
    Ok(String::from_utf8_lossy(&ran.stdout).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_program_is_unavailable_and_a_failing_one_transient() {
        assert!(matches!(
            run_command("wattbar-no-such-program", &[]),
            Err(Error::Unavailable(_))
        ));
        assert!(matches!(
            run_command("sh", &["-c", "echo oops >&2; exit 3"]),
            Err(Error::Transient(m)) if m.contains("oops")
        ));
        assert_eq!(
            run_command("sh", &["-c", "printf 'a\\tb'"]).ok().as_deref(),
            Some("a\tb")
        );
    }

    #[test]
    fn a_tool_that_prints_more_than_16_mib_is_refused_not_read_whole() {
        let out = run_command("sh", &["-c", "head -c 17000000 /dev/zero"]);
        assert!(
            matches!(&out, Err(Error::Transient(m)) if m.contains("more than 16 MiB")),
            "{out:?}"
        );
    }
}
