//! `profile`'s progress: a bar on a terminal, a line per prompt elsewhere.

use std::io::{IsTerminal, Write};

/// A progress bar on a terminal, a line per prompt elsewhere.
pub(super) struct Progress {
    total: usize,
    terminal: bool,
}

impl Progress {
    pub(super) fn new(total: usize) -> Progress {
        Progress {
            total,
            terminal: std::io::stderr().is_terminal(),
        }
    }

    pub(super) fn show(&self, done: usize, model: &str) {
        if self.terminal {
            const WIDTH: usize = 30;
            let filled = WIDTH * done / self.total.max(1);
            eprint!(
                "\r[{}{}] {done}/{} {model}",
                "#".repeat(filled),
                "-".repeat(WIDTH - filled),
                self.total
            );
            let _ = std::io::stderr().flush();
        } else {
            eprintln!("wattbar profile: prompt {} of {}", done + 1, self.total);
        }
    }

    pub(super) fn done(&self, total: usize) {
        if self.terminal {
            eprintln!("\r[{}] {total}/{}", "#".repeat(30), self.total);
        }
    }
}
