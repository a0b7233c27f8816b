//! The measured command as a child process.
//!
//! Rules:
//! - The child gets the terminal as it is (stdin, stdout and stderr inherited), except that with
//!   `--json` its stdout goes to stderr, so that stdout carries one JSON object and nothing else.
//! - SIGINT and SIGTERM sent to Wattbar are passed on; Wattbar itself keeps going until the child
//!   has ended, so the energy of what ran is still reported.
//! - Where they go depends on the terminal:
//!   - With a controlling terminal, the child stays in Wattbar's process group, so job control
//!     works as for any command: it can read the terminal in the foreground, and Ctrl+C, Ctrl+Z,
//!     `fg` and `bg` reach it and everything it started. A Ctrl+C typed while Wattbar is in the
//!     foreground already reached the child and is not sent again; SIGTERM is passed on to the
//!     child alone.
//!   - With none (a service, a scheduler, a container, CI), the child leads a process group of
//!     its own and each signal goes to that whole group, so that a `sh -c 'a && b'` does not
//!     leave `a` running when `sh` is told to stop.
//! - The exit status is the child's: its code, 128 + N when signal N killed it, 127 when it could
//!   not be started, as shells report them.

use std::path::Path;
use std::process::Stdio;
use wattbar_engine::unix_now;

/// What is run: an argument vector as given, or a shell string (`--cmd`) through `sh -c`.
#[derive(Debug, Clone)]
pub enum Program {
    Argv(Vec<String>),
    Shell(String),
}

impl Program {
    /// How the command is named in summaries.
    pub fn label(&self) -> String {
        match self {
            Program::Shell(s) => s.clone(),
            Program::Argv(argv) => argv
                .iter()
                .map(|a| {
                    if !a.is_empty()
                        && a.chars()
                            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c))
                    {
                        a.clone()
                    } else {
                        format!("'{}'", a.replace('\'', r"'\''"))
                    }
                })
                .collect::<Vec<_>>()
                .join(" "),
        }
    }

    fn command(&self) -> Option<tokio::process::Command> {
        match self {
            Program::Shell(s) => {
                let mut c = tokio::process::Command::new("sh");
                c.arg("-c").arg(s);
                Some(c)
            }
            Program::Argv(argv) => {
                let (first, rest) = argv.split_first()?;
                let mut c = tokio::process::Command::new(first);
                c.args(rest);
                Some(c)
            }
        }
    }
}

/// How a child ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Exited(i32),
    Signalled(i32),
    NotStarted(String),
}

impl Outcome {
    /// The status a shell would give: the code, 128 + N for signal N, 127 when not started.
    pub fn exit_code(&self) -> i32 {
        match self {
            Outcome::Exited(code) => *code,
            Outcome::Signalled(n) => 128 + n,
            Outcome::NotStarted(_) => 127,
        }
    }

    pub fn success(&self) -> bool {
        *self == Outcome::Exited(0)
    }

    pub fn describe(&self) -> String {
        match self {
            Outcome::Exited(code) => format!("exited with {code}"),
            Outcome::Signalled(n) => format!("killed by signal {n}"),
            Outcome::NotStarted(why) => format!("could not be started: {why}"),
        }
    }
}

/// One child's life: Unix seconds just before it was started and just after it was reaped.
#[derive(Debug, Clone)]
pub struct Lifetime {
    pub start: f64,
    pub end: f64,
    pub outcome: Outcome,
}

/// SIGINT and SIGTERM, caught for as long as `run` goes on.
pub struct Interrupts {
    #[cfg(unix)]
    int: tokio::signal::unix::Signal,
    #[cfg(unix)]
    term: tokio::signal::unix::Signal,
    /// The last signal received, if any.
    pub received: Option<i32>,
}

impl Interrupts {
    /// Must be called inside the runtime.
    pub fn catch() -> std::io::Result<Interrupts> {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{signal, SignalKind};
            Ok(Interrupts {
                int: signal(SignalKind::interrupt())?,
                term: signal(SignalKind::terminate())?,
                received: None,
            })
        }
        #[cfg(not(unix))]
        {
            Ok(Interrupts { received: None })
        }
    }

    /// Resolves with the next signal's number.
    pub async fn next(&mut self) -> i32 {
        #[cfg(unix)]
        {
            let n = tokio::select! {
                _ = self.int.recv() => 2,
                _ = self.term.recv() => 15,
            };
            self.received = Some(n);
            n
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
            self.received = Some(2);
            2
        }
    }
}

/// Runs `program` to its end with `WATTBAR_RUN_EVENTS` set to `events`, passing on the signals
/// Wattbar receives meanwhile.
pub async fn run(
    program: &Program,
    events: &Path,
    stdout_to_stderr: bool,
    interrupts: &mut Interrupts,
) -> Lifetime {
    let start = unix_now();
    let Some(mut command) = program.command() else {
        return Lifetime {
            start,
            end: start,
            outcome: Outcome::NotStarted("no command given".into()),
        };
    };
    command.env("WATTBAR_RUN_EVENTS", events);
    if stdout_to_stderr {
        command.stdout(Stdio::from(std::io::stderr()));
    }
    let own_group = !has_terminal();
    #[cfg(unix)]
    if own_group {
        command.process_group(0);
    }
    let mut child = match command.spawn() {
        Ok(c) => c,
        Err(e) => {
            return Lifetime {
                start,
                end: unix_now(),
                outcome: Outcome::NotStarted(e.to_string()),
            }
        }
    };
    let pid = child.id();
    let status = loop {
        tokio::select! {
            status = child.wait() => break status,
            signal = interrupts.next() => forward(pid, own_group, signal),
        }
    };
    let end = unix_now();
    let outcome = match status {
        Ok(s) => match (s.code(), signal_of(&s)) {
            (Some(code), _) => Outcome::Exited(code),
            (None, Some(n)) => Outcome::Signalled(n),
            (None, None) => Outcome::NotStarted("ended with no status".into()),
        },
        Err(e) => Outcome::NotStarted(format!("could not be waited for: {e}")),
    };
    Lifetime {
        start,
        end,
        outcome,
    }
}

#[cfg(unix)]
fn signal_of(status: &std::process::ExitStatus) -> Option<i32> {
    std::os::unix::process::ExitStatusExt::signal(status)
}

#[cfg(not(unix))]
fn signal_of(_: &std::process::ExitStatus) -> Option<i32> {
    None
}

/// Whether Wattbar has a controlling terminal.
fn has_terminal() -> bool {
    cfg!(unix) && std::fs::File::open("/dev/tty").is_ok()
}

/// Whether Wattbar runs in the foreground of its controlling terminal: then a Ctrl+C typed there
/// was sent by the terminal to the whole group, the child included, and must not be sent again
/// (a second SIGINT means "force quit" to many programs and would cut their clean-up short).
#[cfg(unix)]
fn in_terminal_foreground() -> bool {
    let Ok(tty) = std::fs::File::open("/dev/tty") else {
        return false;
    };
    nix::unistd::tcgetpgrp(&tty).is_ok_and(|group| group == nix::unistd::getpgrp())
}

/// Passes `signal` on to the child's process group when it has one of its own, else to the
/// child alone (and then not a SIGINT the terminal sent already).
#[cfg(unix)]
fn forward(pid: Option<u32>, own_group: bool, signal: i32) {
    use nix::sys::signal::{kill, killpg, Signal};
    use nix::unistd::Pid;
    let (Some(pid), Ok(sig)) = (pid, Signal::try_from(signal)) else {
        return;
    };
    let Ok(raw) = i32::try_from(pid) else {
        return;
    };
    let sent = if own_group {
        killpg(Pid::from_raw(raw), sig)
    } else if sig == Signal::SIGINT && in_terminal_foreground() {
        return;
    } else {
        kill(Pid::from_raw(raw), sig)
    };
    if let Err(e) = sent {
        tracing::warn!("could not pass {sig} on to the command (pid {pid}): {e}");
    }
}

#[cfg(not(unix))]
fn forward(_: Option<u32>, _: bool, _: i32) {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_are_what_a_shell_reports() {
        assert_eq!(Outcome::Exited(7).exit_code(), 7);
        assert_eq!(Outcome::Signalled(9).exit_code(), 137);
        assert_eq!(Outcome::Signalled(2).exit_code(), 130);
        assert_eq!(Outcome::NotStarted("no such file".into()).exit_code(), 127);
    }

    #[test]
    fn labels_quote_what_a_shell_would_split() {
        let p = Program::Argv(vec!["sh".into(), "-c".into(), "exit 7".into()]);
        assert_eq!(p.label(), "sh -c 'exit 7'");
        assert_eq!(
            Program::Argv(vec!["echo".into(), "it's".into()]).label(),
            r"echo 'it'\''s'"
        );
    }
}
