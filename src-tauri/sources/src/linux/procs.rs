//! Per-process CPU time from `root/proc/[pid]/stat`, for splitting CPU energy among programs.
//!
//! Each read lists `root/proc` and reads each process's `stat` once. Up to half the soft limit
//! on open files ([`kept_open_bound`]) stay open between reads (one `pread` at offset 0 each,
//! as [`super::proc_stat`] does); the rest are opened at each read. A process that ended answers its old file with an error
//! and is dropped; a pid reused meanwhile is opened afresh. A process that ends between the
//! listing and its read is simply not in that read.
//!
//! A process's command line (`root/proc/[pid]/cmdline`, its first [`MAX_ARGS`] arguments) names
//! the program. It is read when the process is first seen and again when its command name
//! changes: a process seen between `fork` and `exec` (a shell starting a command) would keep its
//! parent's command line otherwise, as `exec` keeps the pid and the start time.
//!
//! Times are in clock ticks (`USER_HZ`, 100 on every Linux this runs on). The parser takes the
//! command name up to the *last* `)`: names may hold spaces and parentheses.

use crate::error::Error;
use std::collections::HashMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use wattbar_core::programs::{ProcTimes, TableRead, MAX_ARGS};

fn parse_err(message: String) -> Error {
    Error::Parse {
        what: "/proc/[pid]/stat",
        line: None,
        message,
    }
}

/// Parses one `/proc/[pid]/stat`.
pub fn parse_pid_stat(text: &str) -> Result<ProcTimes, Error> {
    let open = text
        .find('(')
        .ok_or_else(|| parse_err("no `(` before the command name".into()))?;
    let close = text
        .rfind(')')
        .ok_or_else(|| parse_err("no `)` after the command name".into()))?;
    if close < open {
        return Err(parse_err("`)` before `(`".into()));
    }
    let pid = text[..open]
        .trim()
        .parse::<u32>()
        .map_err(|e| parse_err(format!("pid: {e}")))?;
    let name = text[open + 1..close].to_string();
    // Fields after the name, from field 3 (`state`) on; only up to field 22 is needed, read
    // without collecting (hundreds of processes are parsed at each read).
    let mut fields = [0_u64; 23];
    let mut seen = 2;
    for (n, s) in (3..=22).zip(text[close + 1..].split_ascii_whitespace()) {
        seen = n;
        if matches!(n, 4 | 14..=17 | 22) {
            fields[n] = s
                .parse::<u64>()
                .map_err(|e| parse_err(format!("field {n} ({s:?}): {e}")))?;
        }
    }
    if seen < 22 {
        return Err(parse_err(format!("{seen} fields, need 22")));
    }
    Ok(ProcTimes {
        pid,
        ppid: u32::try_from(fields[4]).map_err(|e| parse_err(format!("ppid: {e}")))?,
        name,
        ticks: fields[14] + fields[15],
        child_ticks: fields[16] + fields[17],
        start_ticks: fields[22],
        cmd: Vec::new(),
        energy_nj: None,
    })
}

/// The first [`MAX_ARGS`] arguments of a `/proc/[pid]/cmdline` (NUL-separated; a name that
/// is not UTF-8 is kept, lossily).
pub fn parse_cmdline(bytes: &[u8]) -> Vec<String> {
    let args = bytes.strip_suffix(&[0]).unwrap_or(bytes);
    if args.is_empty() {
        return Vec::new();
    }
    args.split(|b| *b == 0)
        .take(MAX_ARGS)
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect()
}

/// Reads every process under `root/proc`, keeping their `stat` files open.
pub struct ProcReader {
    proc_dir: PathBuf,
    open: HashMap<u32, File>,
    /// Each process's command line, with the start time and command name it was read with.
    cmds: HashMap<u32, (u64, String, Vec<String>)>,
    keep_open: usize,
    buf: Vec<u8>,
}

impl ProcReader {
    pub fn new(root: &Path) -> Self {
        ProcReader {
            proc_dir: root.join("proc"),
            open: HashMap::new(),
            cmds: HashMap::new(),
            keep_open: kept_open_bound(root),
            buf: vec![0; 1024],
        }
    }

    /// Every process readable now. Fails only when `root/proc` cannot be listed.
    pub fn read(&mut self) -> Result<Vec<ProcTimes>, Error> {
        let listing = std::fs::read_dir(&self.proc_dir).map_err(|e| {
            Error::Unavailable(format!(
                "processes cannot be listed: {}: {e}",
                self.proc_dir.display()
            ))
        })?;
        let pids: Vec<u32> = listing
            .filter_map(Result::ok)
            .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
            .collect();
        let listed: std::collections::HashSet<u32> = pids.iter().copied().collect();
        self.open.retain(|pid, _| listed.contains(pid));
        self.cmds.retain(|pid, _| listed.contains(pid));
        let mut out = Vec::with_capacity(pids.len());
        for pid in pids {
            match self.read_one(pid) {
                Some(mut p) => {
                    p.cmd = self.cmd_of(&p);
                    out.push(p);
                }
                None => {
                    self.open.remove(&pid);
                }
            }
        }
        Ok(out)
    }

    /// The process's command line: read when the process is new (its pid unseen or reused) or
    /// has a new command name (it called `exec`).
    fn cmd_of(&mut self, p: &ProcTimes) -> Vec<String> {
        if let Some((start, name, cmd)) = self.cmds.get(&p.pid) {
            if *start == p.start_ticks && *name == p.name {
                return cmd.clone();
            }
        }
        let path = self.proc_dir.join(p.pid.to_string()).join("cmdline");
        let cmd = super::sysfs::read_cmdline_head(&path)
            .map(|b| parse_cmdline(&b))
            .unwrap_or_default();
        self.cmds
            .insert(p.pid, (p.start_ticks, p.name.clone(), cmd.clone()));
        cmd
    }

    fn read_one(&mut self, pid: u32) -> Option<ProcTimes> {
        let kept = self
            .open
            .get(&pid)
            .and_then(|file| read_at(file, &mut self.buf, pid));
        if kept.is_some() {
            return kept;
        }
        // Not kept, or its file belonged to a process that ended (a reused pid): open afresh.
        self.open.remove(&pid);
        let file = File::open(self.proc_dir.join(pid.to_string()).join("stat")).ok()?;
        let p = read_at(&file, &mut self.buf, pid)?;
        // Kept open only up to a bound: one descriptor per process must not use up the
        // engine's (the API and the proxy need theirs).
        if self.open.len() < self.keep_open {
            self.open.insert(pid, file);
        }
        Some(p)
    }
}

/// Every process under `root/proc` with `root/proc/uptime` and `root/proc/stat`'s CPU ticks.
pub struct LinuxTable {
    reader: ProcReader,
    stat: PathBuf,
    uptime: PathBuf,
}

/// Clock ticks per second (`USER_HZ`): 100 on every Linux architecture this runs on.
const USER_HZ: f64 = 100.0;

impl LinuxTable {
    pub fn new(root: &Path) -> Self {
        LinuxTable {
            reader: ProcReader::new(root),
            stat: root.join("proc/stat"),
            uptime: root.join("proc/uptime"),
        }
    }

    pub fn read(&mut self) -> Result<TableRead, Error> {
        // The moment of the read is taken before the listing: a process that starts while
        // the listing runs then counts as new at the next read, not as already seen.
        let uptime = super::sysfs::read_proc_text(&self.uptime).map_err(|e| {
            Error::Unavailable(format!(
                "processes cannot be listed: {}: {e}",
                self.uptime.display()
            ))
        })?;
        let now_ticks = uptime
            .split_whitespace()
            .next()
            .and_then(|s| s.parse::<f64>().ok())
            .map(|s| (s * USER_HZ) as u64)
            .ok_or_else(|| parse_err(format!("{}: no uptime", self.uptime.display())))?;
        let procs = self.reader.read()?;
        let stat = super::sysfs::read_proc_text(&self.stat)
            .map_err(|e| Error::Unavailable(format!("{}: {e}", self.stat.display())))?;
        let ticks = super::proc_stat::parse_proc_stat(&stat)?;
        Ok(TableRead {
            procs,
            now_ticks,
            busy_ticks: ticks.busy,
            total_ticks: ticks.total,
            energy_from: None,
        })
    }
}

/// Files kept open between reads at most, whatever the limit on open files.
pub const MAX_KEPT_OPEN: usize = 4096;
/// Files kept open between reads where the limit on open files cannot be read.
pub const KEPT_OPEN_FALLBACK: usize = 256;

/// The soft limit on open files in a `/proc/[pid]/limits` (`None`: not there).
pub fn parse_open_files_limit(text: &str) -> Option<u64> {
    let rest = text
        .lines()
        .find_map(|l| l.strip_prefix("Max open files"))?;
    match rest.split_whitespace().next()? {
        "unlimited" => Some(u64::MAX),
        soft => soft.parse().ok(),
    }
}

/// How many `stat` files stay open between reads: half this process's soft limit on open files
/// (`root/proc/self/limits`), the other half left to the engine (the API's and the proxy's
/// connections, the ledger), at most [`MAX_KEPT_OPEN`]; [`KEPT_OPEN_FALLBACK`] where the limit
/// cannot be read. Reopening a file at each read costs the kernel about 5 µs more than a
/// `pread` on a kept one.
pub fn kept_open_bound(root: &Path) -> usize {
    super::sysfs::read_proc_text(&root.join("proc/self/limits"))
        .ok()
        .and_then(|t| parse_open_files_limit(&t))
        .map_or(KEPT_OPEN_FALLBACK, |soft| {
            usize::try_from(soft / 2).map_or(MAX_KEPT_OPEN, |half| half.min(MAX_KEPT_OPEN))
        })
}

fn read_at(file: &File, buf: &mut [u8], pid: u32) -> Option<ProcTimes> {
    let n = file.read_at(buf, 0).ok()?;
    // A name that is not UTF-8 is still a process.
    let text = String::from_utf8_lossy(buf.get(..n)?);
    let p = parse_pid_stat(&text).ok()?;
    // A file kept open for a pid since reused would be the old process's: it errors instead,
    // but a fake tree's plain files do not, so the pid is checked too.
    (p.pid == pid).then_some(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_processs_own_stat_parses_with_its_pid_and_parent() {
        let text = std::fs::read_to_string("/proc/self/stat").unwrap_or_else(|e| panic!("{e}"));
        let p = parse_pid_stat(&text).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(p.pid, std::process::id());
        assert_eq!(p.ppid, std::os::unix::process::parent_id());
        assert!(p.start_ticks > 0);
    }

    #[test]
    fn a_process_that_calls_exec_is_read_again_under_its_new_name() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let d = dir.path().join("proc/50");
        std::fs::create_dir_all(&d).unwrap_or_else(|e| panic!("{e}"));
        let seen_as = |name: &str, cmdline: &[u8]| {
            let stat = format!("50 ({name}) S 1 1 1 0 -1 0 0 0 0 0 1 0 0 0 20 0 1 0 777 1 1\n");
            std::fs::write(d.join("stat"), stat).unwrap_or_else(|e| panic!("{e}"));
            std::fs::write(d.join("cmdline"), cmdline).unwrap_or_else(|e| panic!("{e}"));
        };
        let mut reader = ProcReader::new(dir.path());
        let cmd = |reader: &mut ProcReader| {
            let procs = reader.read().unwrap_or_else(|e| panic!("{e}"));
            procs.first().map(|p| p.cmd.clone()).unwrap_or_default()
        };
        // Forked by a shell, not yet exec'd: the shell's command line.
        seen_as("bash", b"bash\0");
        assert_eq!(cmd(&mut reader), ["bash"]);
        // The same pid and start time after exec.
        seen_as("python3", b"python3\0-m\0http.server\0");
        assert_eq!(cmd(&mut reader), ["python3", "-m", "http.server"]);
    }

    #[test]
    fn this_processs_own_command_line_is_read_with_the_stat() {
        let mut reader = ProcReader::new(Path::new("/"));
        let procs = reader.read().unwrap_or_else(|e| panic!("{e}"));
        let me = procs
            .iter()
            .find(|p| p.pid == std::process::id())
            .unwrap_or_else(|| panic!("this process is not listed"));
        let argv: Vec<String> = std::env::args().take(MAX_ARGS).collect();
        assert_eq!(me.cmd, argv);
    }

    #[test]
    fn a_command_line_keeps_its_first_arguments_and_drops_the_trailing_nul() {
        let raw = b"/venv/bin/python\0-m\0llama_cpp.server\0--port\08080\0";
        assert_eq!(
            parse_cmdline(raw),
            ["/venv/bin/python", "-m", "llama_cpp.server", "--port"]
        );
        assert_eq!(parse_cmdline(b"sleep\0"), ["sleep"]);
        // A kernel thread's is empty.
        assert!(parse_cmdline(b"").is_empty());
    }

    #[test]
    fn half_the_limit_on_open_files_is_kept_open_at_most() {
        let own = std::fs::read_to_string("/proc/self/limits").unwrap_or_else(|e| panic!("{e}"));
        assert!(parse_open_files_limit(&own).is_some(), "{own}");
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(kept_open_bound(dir.path()), KEPT_OPEN_FALLBACK);
        let limits = |soft: &str| {
            let d = dir.path().join("proc/self");
            std::fs::create_dir_all(&d).unwrap_or_else(|e| panic!("{e}"));
            let text = format!(
                "Limit                     Soft Limit           Hard Limit           Units     \n\
                 Max processes             96364                96364                processes \n\
                 Max open files            {soft:<20} 524288               files     \n"
            );
            std::fs::write(d.join("limits"), text).unwrap_or_else(|e| panic!("{e}"));
            kept_open_bound(dir.path())
        };
        assert_eq!(limits("1024"), 512);
        assert_eq!(limits("1048576"), MAX_KEPT_OPEN);
        assert_eq!(limits("unlimited"), MAX_KEPT_OPEN);
    }

    #[test]
    fn a_name_with_spaces_and_parentheses_is_read_to_its_last_parenthesis() {
        // Field 14..17 = utime stime cutime cstime, 22 = starttime.
        let text = "4242 (Web Content (x)) S 1 4242 4242 0 -1 4194560 1 0 0 0 \
                    300 200 70 30 20 0 1 0 987654 1 1 18446744073709551615\n";
        let p = parse_pid_stat(text).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(p.name, "Web Content (x)");
        assert_eq!((p.pid, p.ppid), (4242, 1));
        assert_eq!((p.ticks, p.child_ticks, p.start_ticks), (500, 100, 987_654));
    }

    #[test]
    fn a_truncated_stat_is_an_error_not_zero_time() {
        let e = parse_pid_stat("12 (x) S 1 2 3").map(|_| ());
        assert!(matches!(e, Err(Error::Parse { .. })), "{e:?}");
    }

    #[test]
    fn a_fake_tree_is_read_and_a_process_that_ended_is_dropped() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let write = |pid: u32, utime: u64| {
            let d = dir.path().join("proc").join(pid.to_string());
            std::fs::create_dir_all(&d).unwrap_or_else(|e| panic!("{e}"));
            let stat = format!(
                "{pid} (busy) R 1 1 1 0 -1 0 0 0 0 0 {utime} 0 0 0 20 0 1 0 {} 1 1\n",
                pid * 10
            );
            std::fs::write(d.join("stat"), stat).unwrap_or_else(|e| panic!("{e}"));
        };
        write(10, 300);
        write(11, 200);
        std::fs::create_dir_all(dir.path().join("proc/self")).unwrap_or_else(|e| panic!("{e}"));
        let mut reader = ProcReader::new(dir.path());
        let mut got = reader.read().unwrap_or_else(|e| panic!("{e}"));
        got.sort_by_key(|p| p.pid);
        assert_eq!(
            got.iter().map(|p| (p.pid, p.ticks)).collect::<Vec<_>>(),
            [(10, 300), (11, 200)]
        );
        std::fs::remove_dir_all(dir.path().join("proc/11")).unwrap_or_else(|e| panic!("{e}"));
        write(10, 450);
        let got = reader.read().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            got.iter().map(|p| (p.pid, p.ticks)).collect::<Vec<_>>(),
            [(10, 450)]
        );
    }

    #[test]
    fn no_proc_folder_is_unavailable() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let e = ProcReader::new(dir.path()).read().map(|_| ());
        assert!(matches!(e, Err(Error::Unavailable(_))), "{e:?}");
    }
}
