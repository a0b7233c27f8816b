//! Running a macOS command-line tool for its output.

use crate::error::Error;

/// Runs a command and returns its standard output, read lossily.
///
/// A missing program is `Unavailable` (it will not appear later); a failing run is `Transient`
/// with the program's own message.
pub fn run_command(program: &str, args: &[&str]) -> Result<String, Error> {
    let output = std::process::Command::new(program)
        .args(args)
        .output()
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => {
                Error::Unavailable(format!("`{program}` is not installed or not on PATH"))
            }
            std::io::ErrorKind::PermissionDenied => {
                Error::Unavailable(format!("`{program}` may not be run by this user: {e}"))
            }
            _ => Error::Transient(format!("could not run `{program}`: {e}")),
        })?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        return Err(Error::Transient(format!(
            "`{program} {}` failed ({}): {}",
            args.join(" "),
            output.status,
            stderr.trim()
        )));
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
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
}
