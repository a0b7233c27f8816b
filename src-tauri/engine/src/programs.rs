//! Energy per program: which program draws the watts.
//!
//! Rules:
//! - Every sampling interval's headline and CPU-domain energy is added to the current window;
//!   every [`READ_EVERY`] the processes (`root/proc/[pid]/stat`) and the CPU's ticks
//!   (`root/proc/stat`) are read and the window is split among programs
//!   ([`wattbar_core::programs`]). Reading hundreds of processes costs milliseconds, so it is
//!   not done every sample; CPU times are cumulative, so each window's shares are exact.
//! - The CPU domain's idle part is its share of idle ticks (time share: the idle draw is not
//!   measured apart yet); it belongs to no program.
//! - A program is a process's command name, the kernel's threads one program `kernel`, a
//!   process started from its parent's executable part of its parent's program
//!   ([`wattbar_core::programs::programs_of`]); Wattbar itself is one of them.
//! - The model server is the program listening on the proxy's upstream port, where that is on
//!   this machine and its process can be read; else any program named like a model server
//!   ([`MODEL_SERVERS`]). It is shown with the models it serves ([`name_servers`]).
//! - Σ programs + idle + unattributed = the headline's energy, window by window.
//! - Where processes cannot be read (no `/proc`: macOS for now), nothing is attributed and the
//!   view says why.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;
use wattbar_core::programs::{split, CpuTimes, Measured};
use wattbar_core::Quality;
use wattbar_sources::linux::proc_stat::{parse_proc_stat, CpuTicks};
use wattbar_sources::linux::procs::ProcReader;

pub use crate::store::programs::{IDLE, UNATTRIBUTED};
/// The label of the programs without a series of their own in `/metrics`.
pub const OTHER: &str = "(other)";
/// Programs with a `/metrics` series of their own at most, so that cardinality stays bounded.
pub const MAX_PROGRAM_SERIES: usize = 20;

/// How often the processes are read.
/// Reading a process's `stat` costs the kernel about 5 µs: with 500 processes, reading every
/// 10 s adds about 0.06 % of a core (`scripts/bench-programs`).
pub const READ_EVERY: Duration = Duration::from_secs(10);
/// Clock ticks per second (`USER_HZ`): 100 on every Linux architecture this runs on.
const USER_HZ: f64 = 100.0;

/// One program's figures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProgramFigure {
    pub program: String,
    /// Mean watts over the last window.
    pub watts: f64,
    /// Energy since the engine started.
    pub joules: f64,
    /// Energy today (local day), what the ledger kept from before a restart included.
    pub today_joules: f64,
    /// The worst quality of the energy it was given (a share of an estimate is an estimate).
    pub quality: Option<Quality>,
    /// For a model server, the models it serves ([`name_servers`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub serving: Vec<String>,
}

impl ProgramFigure {
    /// `ollama (llama3.1:8b)`: the program, with the models it serves.
    pub fn shown_name(&self) -> String {
        if self.serving.is_empty() {
            self.program.clone()
        } else {
            format!("{} ({})", self.program, self.serving.join(", "))
        }
    }
}

/// Names of model servers' programs, for when the upstream's process cannot be told.
pub const MODEL_SERVERS: [&str; 4] = ["ollama", "llama-server", "vllm", "llama_cpp.server"];

/// Names the models the model server serves: those the proxy's upstream holds (`/api/ps`),
/// else those its recent answers came from. The server is the program listening on the
/// upstream's port where known, else each program named in [`MODEL_SERVERS`].
pub fn name_servers(view: &mut ProgramsView, loaded: Option<&[String]>, answered: &[String]) {
    let models = match loaded {
        Some(l) if !l.is_empty() => l,
        _ => answered,
    };
    let upstream = view.upstream_program.clone();
    for p in &mut view.programs {
        let serves = match &upstream {
            Some(name) => &p.program == name,
            None => MODEL_SERVERS.contains(&p.program.as_str()),
        };
        if serves {
            p.serving = models.to_vec();
        }
    }
}

/// What readers see.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProgramsView {
    /// Wall-clock end of the last window, and its length.
    pub at: Option<f64>,
    pub window_seconds: f64,
    /// Every program with energy, most watts first.
    pub programs: Vec<ProgramFigure>,
    pub idle_watts: f64,
    pub unattributed_watts: f64,
    pub idle_joules: f64,
    pub unattributed_joules: f64,
    pub idle_joules_today: f64,
    pub unattributed_joules_today: f64,
    /// Wattbar's own process (this engine's) since it started.
    pub self_joules: f64,
    /// How the split is made.
    pub method: String,
    /// Why nothing is attributed, where processes cannot be read.
    pub unavailable: Option<String>,
    /// The program listening on the proxy's upstream port: the model server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upstream_program: Option<String>,
    /// The programs with a `/metrics` series of their own (the [`MAX_PROGRAM_SERIES`] with the
    /// most energy), each with its energy when it got one: its series counts from there, and
    /// `(other)` keeps what it had, so no counter goes down when programs change places.
    #[serde(skip)]
    pub series: BTreeMap<String, f64>,
}

/// How [`Top`] orders the programs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Sort {
    /// Watts over the last window.
    #[default]
    Watts,
    /// Energy since the engine started.
    Energy,
}

/// The top programs, as `GET /v1/processes` and `wattbar-cli top --json` give them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Top {
    pub at: Option<f64>,
    /// Where the energies count from: `None`, the engine's start; else the start of the UTC
    /// hour `since=` fell in (the ledger keeps energy per hour), before a restart included.
    #[serde(default)]
    pub since: Option<f64>,
    pub window_seconds: f64,
    pub sort: Sort,
    pub programs: Vec<ProgramFigure>,
    /// Programs left out by the limit, and their energy.
    pub others: usize,
    pub others_joules: f64,
    pub idle_watts: f64,
    pub unattributed_watts: f64,
    pub idle_joules: f64,
    pub unattributed_joules: f64,
    pub self_joules: f64,
    pub method: String,
    pub unavailable: Option<String>,
}

impl ProgramsView {
    /// The `/metrics` series: each program with a series of its own, counted from when it got
    /// one, then `(other)`, which keeps what each had then and takes back all of a program that
    /// loses its series (so neither goes down), `(idle)` and `(unattributed)`.
    pub fn metric_series(&self) -> Vec<(String, f64)> {
        let mut other = 0.0;
        let mut out = Vec::new();
        for f in &self.programs {
            match self.series.get(&f.program) {
                Some(from) => {
                    out.push((f.program.clone(), f.joules - from));
                    other += from;
                }
                None => other += f.joules,
            }
        }
        out.extend([
            (OTHER.to_string(), other),
            (IDLE.to_string(), self.idle_joules),
            (UNATTRIBUTED.to_string(), self.unattributed_joules),
        ]);
        out
    }

    /// The first `limit` programs by `sort`, with the energy of each since `from` (the start of
    /// an hour) as the ledger kept it: `stored`, per program and part. Watts and quality are the
    /// last window's.
    pub fn top_since(
        &self,
        limit: usize,
        sort: Sort,
        from: f64,
        stored: &BTreeMap<String, f64>,
    ) -> Top {
        let part = |name: &str| stored.get(name).copied().unwrap_or(0.0);
        let mut view = self.clone();
        for p in &mut view.programs {
            p.joules = part(&p.program);
        }
        for (name, joules) in stored {
            let known = view.programs.iter().any(|p| &p.program == name);
            if !known && name != IDLE && name != UNATTRIBUTED {
                view.programs.push(ProgramFigure {
                    program: name.clone(),
                    watts: 0.0,
                    joules: *joules,
                    today_joules: 0.0,
                    quality: None,
                    serving: Vec::new(),
                });
            }
        }
        view.programs.sort_by(|a, b| {
            b.watts
                .total_cmp(&a.watts)
                .then(b.joules.total_cmp(&a.joules))
        });
        view.idle_joules = part(IDLE);
        view.unattributed_joules = part(UNATTRIBUTED);
        let mut top = view.top(limit, sort);
        top.since = Some(from);
        top
    }

    /// The first `limit` programs by `sort`.
    pub fn top(&self, limit: usize, sort: Sort) -> Top {
        let mut programs = self.programs.clone();
        if sort == Sort::Energy {
            programs.sort_by(|a, b| b.joules.total_cmp(&a.joules));
        }
        let rest = programs.split_off(limit.min(programs.len()));
        Top {
            at: self.at,
            since: None,
            window_seconds: self.window_seconds,
            sort,
            programs,
            others: rest.len(),
            others_joules: rest.iter().map(|p| p.joules).sum(),
            idle_watts: self.idle_watts,
            unattributed_watts: self.unattributed_watts,
            idle_joules: self.idle_joules,
            unattributed_joules: self.unattributed_joules,
            self_joules: self.self_joules,
            method: self.method.clone(),
            unavailable: self.unavailable.clone(),
        }
    }
}

#[derive(Debug, Default)]
struct Window {
    headline: f64,
    cpu: Option<f64>,
    seconds: f64,
    quality: Option<Quality>,
}

/// The process listening on the proxy's upstream port, as last found.
#[derive(Debug, Default)]
struct Upstream {
    port: Option<u16>,
    process: Option<(u32, u64)>,
    /// Reads to skip before looking the port up again: scanning every process's descriptors is
    /// not done at every read.
    wait: u32,
}

/// Reads between two lookups of a port nobody was found on: a minute.
const LOOKUP_EVERY: u32 = 6;

pub struct ProgramMeter {
    root: PathBuf,
    upstream: Upstream,
    reader: ProcReader,
    stat: PathBuf,
    uptime: PathBuf,
    cpu: CpuTimes,
    ticks: Option<CpuTicks>,
    window: Window,
    last_read: Option<Duration>,
    totals: BTreeMap<String, (f64, Option<Quality>)>,
    idle: f64,
    unattributed: f64,
    self_joules: f64,
    /// Today's joules per program, and the local day they are for.
    today: BTreeMap<String, f64>,
    day: Option<String>,
    /// Joules per program (and the parts no program owns) not yet handed to the ledger.
    pending: BTreeMap<String, f64>,
    series: BTreeMap<String, f64>,
    view: ProgramsView,
}

const METHOD: &str = "the CPU domain's energy split by each program's share of CPU time over \
                      each 10 s window; its idle part is the share of idle time";

impl ProgramMeter {
    /// Reads processes under `root` (`/` on a real machine); `today`: the joules per program
    /// the ledger kept for the local `day` (with [`IDLE`] and [`UNATTRIBUTED`]).
    pub fn new(root: &Path, today: BTreeMap<String, f64>, day: Option<String>) -> Self {
        // Until the first window, the view shows what the ledger kept for today.
        let kept = |name: &str| today.get(name).copied().unwrap_or(0.0);
        let mut restored: Vec<ProgramFigure> = today
            .iter()
            .filter(|(name, _)| *name != IDLE && *name != UNATTRIBUTED)
            .map(|(name, joules)| ProgramFigure {
                program: name.clone(),
                watts: 0.0,
                joules: 0.0,
                today_joules: *joules,
                quality: None,
                serving: Vec::new(),
            })
            .collect();
        restored.sort_by(|a, b| b.today_joules.total_cmp(&a.today_joules));
        let view = ProgramsView {
            programs: restored,
            idle_joules_today: kept(IDLE),
            unattributed_joules_today: kept(UNATTRIBUTED),
            method: METHOD.to_string(),
            ..ProgramsView::default()
        };
        ProgramMeter {
            root: root.to_path_buf(),
            upstream: Upstream::default(),
            reader: ProcReader::new(root),
            stat: root.join("proc/stat"),
            uptime: root.join("proc/uptime"),
            cpu: CpuTimes::default(),
            ticks: None,
            window: Window::default(),
            last_read: None,
            totals: BTreeMap::new(),
            idle: 0.0,
            unattributed: 0.0,
            self_joules: 0.0,
            today,
            day,
            pending: BTreeMap::new(),
            series: BTreeMap::new(),
            view,
        }
    }

    pub fn view(&self) -> &ProgramsView {
        &self.view
    }

    /// The joules per program (and per part) since the last call, for the ledger.
    pub fn take_pending(&mut self) -> BTreeMap<String, f64> {
        std::mem::take(&mut self.pending)
    }

    /// The port of the proxy's upstream when it is on this machine: the process listening there
    /// is the model server.
    pub fn set_upstream_port(&mut self, port: Option<u16>) {
        if self.upstream.port != port {
            self.upstream = Upstream {
                port,
                ..Upstream::default()
            };
        }
    }

    /// The program of the process listening on the upstream's port, among `used`.
    fn upstream_program(&mut self, used: &[wattbar_core::programs::Used]) -> Option<String> {
        let port = self.upstream.port?;
        let find = |key: (u32, u64)| {
            used.iter()
                .find(|u| (u.pid, u.start_ticks) == key)
                .map(|u| u.program.clone())
        };
        if let Some(program) = self.upstream.process.and_then(find) {
            return Some(program);
        }
        // Not found yet, or it ended (the server restarted): look again, now and then.
        self.upstream.process = None;
        if self.upstream.wait > 0 {
            self.upstream.wait -= 1;
            return None;
        }
        self.upstream.wait = LOOKUP_EVERY - 1;
        let pid = wattbar_sources::linux::listener::find_listener(&self.root, port)
            .ok()
            .flatten()?;
        let found = used.iter().find(|u| u.pid == pid)?;
        self.upstream.process = Some((found.pid, found.start_ticks));
        Some(found.program.clone())
    }

    /// Adds one interval's energy to the window.
    pub fn add(&mut self, headline: f64, cpu: Option<f64>, seconds: f64, quality: Option<Quality>) {
        let w = &mut self.window;
        w.headline += headline;
        if let Some(c) = cpu {
            *w.cpu.get_or_insert(0.0) += c;
        }
        w.seconds += seconds;
        w.quality = w.quality.max(quality);
    }

    /// Reads the processes and splits the window when [`READ_EVERY`] has passed since the last
    /// read (`elapsed`: the engine's clock). True when the view changed.
    pub fn read_if_due(&mut self, elapsed: Duration, unix: f64) -> bool {
        if self
            .last_read
            .is_some_and(|l| elapsed.saturating_sub(l) < READ_EVERY)
        {
            return false;
        }
        self.last_read = Some(elapsed);
        match self.read(unix) {
            Ok(changed) => changed,
            Err(reason) => {
                let changed = self.view.unavailable.as_ref() != Some(&reason);
                self.view.unavailable = Some(reason);
                self.window = Window::default();
                changed
            }
        }
    }

    fn read(&mut self, unix: f64) -> Result<bool, String> {
        // The moment of the read is taken before the listing: a process that starts while
        // the listing runs then counts as new at the next read, not as already seen.
        let uptime = std::fs::read_to_string(&self.uptime)
            .map_err(|e| format!("processes cannot be listed: {}: {e}", self.uptime.display()))?;
        let now_ticks = uptime
            .split_whitespace()
            .next()
            .and_then(|s| s.parse::<f64>().ok())
            .map(|s| (s * USER_HZ) as u64)
            .ok_or_else(|| format!("{}: no uptime", self.uptime.display()))?;
        let procs = self.reader.read().map_err(|e| e.to_string())?;
        let stat = std::fs::read_to_string(&self.stat)
            .map_err(|e| format!("{}: {e}", self.stat.display()))?;
        let ticks = parse_proc_stat(&stat).map_err(|e| e.to_string())?;
        let used = self.cpu.step(procs, now_ticks);
        let before = self.ticks.replace(ticks);
        let window = std::mem::take(&mut self.window);
        let (Some(used), Some(before)) = (used, before) else {
            return Ok(false);
        };
        let busy = ticks.busy.saturating_sub(before.busy) as f64;
        let total = ticks.total.saturating_sub(before.total) as f64;
        let upstream_program = self.upstream_program(&used);
        let me = std::process::id();
        let mine = used
            .iter()
            .find(|u| u.pid == me)
            .map(|u| (u.program.clone(), u.ticks));
        let mut by_program: BTreeMap<String, f64> = BTreeMap::new();
        for u in used {
            *by_program.entry(u.program).or_default() += u.ticks;
        }
        let cpu_idle = window
            .cpu
            .filter(|_| total > 0.0)
            .map(|c| c * (total - busy).max(0.0) / total);
        let s = split(
            Measured {
                headline: window.headline,
                cpu: window.cpu,
                cpu_idle,
                busy_ticks: busy,
            },
            &by_program,
        );
        let seconds = window.seconds;
        let per_second = |j: f64| if seconds > 0.0 { j / seconds } else { 0.0 };
        let (day, _) = crate::store::local_day_month(unix);
        if self.day.as_deref() != Some(day.as_str()) {
            self.day = Some(day);
            self.today.clear();
        }
        let parts = [(IDLE, s.idle), (UNATTRIBUTED, s.unattributed)];
        for (name, joules) in s
            .programs
            .iter()
            .map(|(n, j)| (n.as_str(), *j))
            .chain(parts)
        {
            *self.pending.entry(name.to_string()).or_default() += joules;
            *self.today.entry(name.to_string()).or_default() += joules;
        }
        for (name, joules) in &s.programs {
            let t = self.totals.entry(name.clone()).or_insert((0.0, None));
            t.0 += joules;
            t.1 = t.1.max(window.quality);
        }
        self.idle += s.idle;
        self.unattributed += s.unattributed;
        if let Some((name, ticks)) = mine {
            let program_ticks = by_program.get(&name).copied().unwrap_or(0.0);
            let joules = s.programs.get(&name).copied().unwrap_or(0.0);
            if program_ticks > 0.0 {
                self.self_joules += joules * ticks / program_ticks;
            }
        }
        let today = |name: &str| self.today.get(name).copied().unwrap_or(0.0);
        let names: std::collections::BTreeSet<&String> = self
            .totals
            .keys()
            .chain(
                self.today
                    .keys()
                    .filter(|k| *k != IDLE && *k != UNATTRIBUTED),
            )
            .collect();
        let mut programs: Vec<ProgramFigure> = names
            .into_iter()
            .map(|name| {
                let (joules, quality) = self.totals.get(name).copied().unwrap_or((0.0, None));
                ProgramFigure {
                    program: name.clone(),
                    watts: per_second(s.programs.get(name).copied().unwrap_or(0.0)),
                    joules,
                    today_joules: today(name),
                    quality,
                    serving: Vec::new(),
                }
            })
            .collect();
        programs.sort_by(|a, b| {
            b.watts
                .total_cmp(&a.watts)
                .then(b.joules.total_cmp(&a.joules))
        });
        let mut by_energy: Vec<&ProgramFigure> =
            programs.iter().filter(|p| p.joules > 0.0).collect();
        by_energy.sort_by(|a, b| b.joules.total_cmp(&a.joules));
        by_energy.truncate(MAX_PROGRAM_SERIES);
        self.series
            .retain(|name, _| by_energy.iter().any(|p| &p.program == name));
        for p in by_energy {
            self.series.entry(p.program.clone()).or_insert(p.joules);
        }
        self.view = ProgramsView {
            at: Some(unix),
            window_seconds: seconds,
            programs,
            idle_watts: per_second(s.idle),
            unattributed_watts: per_second(s.unattributed),
            idle_joules: self.idle,
            unattributed_joules: self.unattributed,
            idle_joules_today: today(IDLE),
            unattributed_joules_today: today(UNATTRIBUTED),
            self_joules: self.self_joules,
            method: METHOD.to_string(),
            unavailable: None,
            upstream_program,
            series: self.series.clone(),
        };
        Ok(true)
    }
}

#[cfg(test)]
mod tests;
