//! Running another program for what it prints, within limits.
//!
//! Rules:
//! - A program gets at most `limit` to exit; past it, it is killed and reaped, and its run says
//!   so ([`Ran::status`] is `None`).
//! - Its output is read on threads of their own and kept up to `max_stdout` bytes (standard
//!   error up to [`MAX_STDERR_BYTES`]); the rest is read and dropped, so that a program that says
//!   much is never blocked on a full pipe nor killed by a closed one.
//! - What it was given on standard input is written on a thread of its own: a program that reads
//!   nothing never holds the wait.
//! - A grandchild that keeps the pipes open after the program exited is not waited for beyond
//!   the same limit.

use std::io::{Read, Write};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};
use wait_timeout::ChildExt;

/// The most of standard error kept: enough for any tool's message.
pub const MAX_STDERR_BYTES: usize = 64 * 1024;

/// One run of a program.
#[derive(Debug)]
pub struct Ran {
    /// How it exited; `None` when it was killed at the limit.
    pub status: Option<ExitStatus>,
    /// The first `max_stdout` bytes it printed.
    pub stdout: Vec<u8>,
    /// It printed more than `max_stdout` bytes.
    pub stdout_cut: bool,
    /// The first [`MAX_STDERR_BYTES`] of its standard error.
    pub stderr: Vec<u8>,
}

/// Runs `command` with `stdin` on its standard input, for at most `limit`. `Err` only when it
/// could not be started.
pub fn run_bounded(
    command: &mut Command,
    stdin: Option<Vec<u8>>,
    limit: Duration,
    max_stdout: usize,
) -> std::io::Result<Ran> {
    let started = Instant::now();
    let mut child = command
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    if let (Some(mut pipe), Some(bytes)) = (child.stdin.take(), stdin) {
        // A program that reads nothing closes its stdin early: not an error of the run's.
        std::thread::spawn(move || {
            let _ = pipe.write_all(&bytes);
        });
    }
    let stdout = child.stdout.take().map(|p| read_kept(p, max_stdout));
    let stderr = child.stderr.take().map(|p| read_kept(p, MAX_STDERR_BYTES));
    let status = match child.wait_timeout(limit) {
        Ok(Some(status)) => Some(status),
        _ => {
            let _ = child.kill();
            let _ = child.wait();
            None
        }
    };
    let left = limit.saturating_sub(started.elapsed());
    let kept = |r: Option<mpsc::Receiver<(Vec<u8>, bool)>>| {
        r.and_then(|r| r.recv_timeout(left).ok())
            .unwrap_or_default()
    };
    let (stdout, stdout_cut) = kept(stdout);
    let (stderr, _) = kept(stderr);
    Ok(Ran {
        status,
        stdout,
        stdout_cut,
        stderr,
    })
}

/// Reads `pipe` to its end on a thread of its own: the first `max` bytes, and whether there
/// were more.
fn read_kept(pipe: impl Read + Send + 'static, max: usize) -> mpsc::Receiver<(Vec<u8>, bool)> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut pipe = pipe;
        let mut kept = Vec::new();
        let max = u64::try_from(max).unwrap_or(u64::MAX);
        let _ = (&mut pipe).take(max).read_to_end(&mut kept);
        let more = std::io::copy(&mut pipe, &mut std::io::sink()).unwrap_or(0);
        let _ = tx.send((kept, more > 0));
    });
    rx
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str) -> Command {
        let mut c = Command::new("sh");
        c.args(["-c", script]);
        c
    }

    #[test]
    fn a_program_that_prints_20_mb_keeps_the_first_kib_and_still_exits_0() {
        // Reading stops at 1 KiB but the pipe is drained: `head` is never killed by SIGPIPE.
        let ran = run_bounded(
            &mut sh("head -c 20000000 /dev/zero; exit 0"),
            None,
            Duration::from_secs(60),
            1024,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(ran.status.and_then(|s| s.code()), Some(0));
        assert_eq!(ran.stdout.len(), 1024);
        assert!(ran.stdout_cut);
    }

    #[test]
    fn a_program_past_its_limit_is_killed_and_says_so() {
        let ran = run_bounded(
            &mut sh("echo started; exec sleep 30"),
            None,
            Duration::from_millis(300),
            1024,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert!(ran.status.is_none());
    }

    #[test]
    fn stdin_is_given_and_stderr_kept() {
        let ran = run_bounded(
            &mut sh("read line; echo \"got $line\"; echo oops >&2; exit 3"),
            Some(b"42\n".to_vec()),
            Duration::from_secs(60),
            1024,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(ran.status.and_then(|s| s.code()), Some(3));
        assert_eq!(ran.stdout, b"got 42\n");
        assert!(!ran.stdout_cut);
        assert_eq!(ran.stderr, b"oops\n");
    }
}
