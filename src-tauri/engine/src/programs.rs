//! Energy per program: which program draws the watts.
//!
//! Rules:
//! - Every sampling interval's headline and CPU-domain energy is added to the current window;
//!   every [`READ_EVERY`] (every [`READ_EVERY_AT_REST`] while the machine rests: [`cadence`])
//!   the processes (`root/proc/[pid]/stat`) and the CPU's ticks (`root/proc/stat`) are read and
//!   the window is split among programs ([`wattbar_core::programs`]). Reading hundreds of
//!   processes costs milliseconds, so it is not done every sample; CPU times are cumulative,
//!   so each window's shares are exact.
//! - The CPU domain's idle part is its idle draw × the window, learnt from the last hour's
//!   windows ([`wattbar_core::programs::idle`]); until that is known, its share of idle ticks.
//!   It belongs to no program.
//! - A program is a process's command name, the kernel's threads one program `kernel`, a
//!   process started from its parent's executable part of its parent's program
//!   ([`wattbar_core::programs::programs_of`]); Wattbar itself is one of them.
//! - The model server is the program listening on the proxy's upstream port, where that is on
//!   this machine and its process can be read; else any program named like a model server
//!   ([`MODEL_SERVERS`]). It is shown with the models it serves ([`name_servers`]).
//! - Where asked ([`ProgramMeter::find_model_servers`]), the loopback ports that the processes
//!   of programs named like model servers listen on are found at the reads ([`listening`]), so
//!   that those servers' own counters can be followed.
//! - Σ programs + idle + unattributed = the headline's energy, window by window.
//! - Where the process table gives each process's energy as the kernel counts it (macOS, as
//!   root), programs share the CPU domain by it instead of CPU time.
//! - Where processes cannot be read, or a window had no measured power, nothing is attributed,
//!   the watts are unknown (never 0 W) and the view says why.
//! - Programs are kept by name up to [`MAX_PROGRAMS`] beside those of the last window; the rest
//!   are added into [`OTHER`] ([`fold_into_other`]).
//! - Wattbar's own energy (`self_joules`) is its CPU time in nanoseconds
//!   (`CLOCK_PROCESS_CPUTIME_ID`: every thread's, those that ended too) at the CPU domain's active
//!   joules per busy second: an engine that uses 0.02 % of a core has no 10 ms tick of its own in
//!   a window, yet it draws.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;
use wattbar_core::programs::idle::{at_rest, IdleDraw, IdleLearner};
use wattbar_core::programs::process_gpu::ProcessGpuWindow;
use wattbar_core::programs::{
    split_with_gpus, CpuTimes, DeviceUse, IdleModel, Measured, TICKS_PER_SECOND,
};
use wattbar_core::Quality;
use wattbar_sources::processes::ProcessTable;

pub use wattbar_ledger::store::programs::{IDLE, UNATTRIBUTED};
pub mod cadence;
mod gpu;
mod listening;
mod upstream;
mod view;
pub use cadence::{READ_EVERY, READ_EVERY_AT_REST};
pub use listening::Listener;
pub use view::{
    fold_into_other, most_watts_first, name_servers, ProgramFigure, ProgramsView, Sort, Top,
    MAX_PROGRAMS, MAX_PROGRAM_SERIES, MODEL_SERVERS, OTHER,
};

#[derive(Debug, Default)]
struct Window {
    headline: f64,
    cpu: Option<f64>,
    seconds: f64,
    quality: Option<Quality>,
    /// Each GPU's energy, by (source, device).
    gpus: BTreeMap<(String, String), f64>,
    gpu_quality: Option<Quality>,
}

/// The share of a window's CPU time that processes whose energy cannot be read may have while
/// programs still share the CPU domain by energy.
const MAX_UNREAD_SHARE: f64 = 0.05;

pub struct ProgramMeter {
    root: PathBuf,
    upstream: upstream::Upstream,
    /// The model servers' loopback ports, while they are looked for.
    listening: Option<listening::Listening>,
    table: ProcessTable,
    cpu: CpuTimes,
    /// All CPUs' busy and total ticks at the last read.
    ticks: Option<(u64, u64)>,
    idle_draw: IdleLearner,
    window: Window,
    cadence: cadence::Cadence,
    totals: BTreeMap<String, (f64, Option<Quality>)>,
    idle: f64,
    unattributed: f64,
    self_joules: f64,
    /// This process's CPU time so far, and where it is read from.
    own_cpu: Option<Duration>,
    own_cpu_time: fn() -> Option<Duration>,
    /// Today's joules per program, and the local day they are for.
    today: BTreeMap<String, f64>,
    day: Option<String>,
    /// Joules per program (and the parts no program owns) not yet handed to the ledger.
    pending: BTreeMap<String, f64>,
    series: BTreeMap<String, f64>,
    /// The last windows' GPU energy per process, oldest first, for the model servers' windows.
    gpu_windows: Vec<ProcessGpuWindow>,
    view: ProgramsView,
}

/// GPU windows kept: a quarter of an hour of reads.
const KEPT_GPU_WINDOWS: usize = 90;

/// How the split is made, with the CPU domain's idle draw where known; `energy_from`: what the
/// programs' shares come from where it is not CPU time.
fn method(draw: Option<&IdleDraw>, energy_from: Option<&str>) -> String {
    let share = energy_from.unwrap_or("busy CPU time");
    match draw {
        Some(d) => format!(
            "the CPU domain's energy less its idle draw ({}), split by each program's share of \
             {share} over each 10 s window",
            d.describe()
        ),
        None => format!(
            "the CPU domain's energy split by each program's share of {share} over each 10 s \
             window; until its idle draw is known (windows at rest, or at loads spread over at \
             least 20 % of the CPUs), its idle part is the share of idle time"
        ),
    }
}

impl ProgramMeter {
    /// Reads processes under `root` (`/` on a real machine); `today`: the joules per program
    /// the ledger kept for the local `day` (with [`IDLE`] and [`UNATTRIBUTED`]).
    pub fn new(root: &Path, today: BTreeMap<String, f64>, day: Option<String>) -> Self {
        Self::with_table(root, ProcessTable::new(root), today, day)
    }

    /// [`ProgramMeter::new`] reading processes from `table`.
    pub fn with_table(
        root: &Path,
        table: ProcessTable,
        today: BTreeMap<String, f64>,
        day: Option<String>,
    ) -> Self {
        let mut today = today;
        let parts = |name: &str| name == IDLE || name == UNATTRIBUTED;
        fold_into_other(&mut today, |j| *j, parts, |o, j| *o += j);
        // Until the first window, the view shows what the ledger kept for today.
        let kept = |name: &str| today.get(name).copied().unwrap_or(0.0);
        let mut restored: Vec<ProgramFigure> = today
            .iter()
            .filter(|(name, _)| *name != IDLE && *name != UNATTRIBUTED)
            .map(|(name, joules)| ProgramFigure {
                program: name.clone(),
                watts: None,
                gpu_watts: None,
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
            method: method(None, None),
            ..ProgramsView::default()
        };
        ProgramMeter {
            root: root.to_path_buf(),
            upstream: upstream::Upstream::default(),
            listening: None,
            table,
            cpu: CpuTimes::default(),
            ticks: None,
            idle_draw: IdleLearner::default(),
            window: Window::default(),
            cadence: cadence::Cadence::default(),
            totals: BTreeMap::new(),
            idle: 0.0,
            unattributed: 0.0,
            self_joules: 0.0,
            own_cpu: None,
            own_cpu_time: crate::time::own_cpu_time,
            today,
            day,
            pending: BTreeMap::new(),
            series: BTreeMap::new(),
            gpu_windows: Vec::new(),
            view,
        }
    }

    pub fn view(&self) -> &ProgramsView {
        &self.view
    }

    /// The last windows' GPU energy per process, oldest first.
    pub fn process_gpu(&self) -> &[ProcessGpuWindow] {
        &self.gpu_windows
    }

    /// Reads this process's CPU time with `f` instead of the system's clock (tests).
    pub fn with_own_cpu_time(mut self, f: fn() -> Option<Duration>) -> Self {
        self.own_cpu_time = f;
        self
    }

    /// This process's CPU time since the last call, in clock ticks (fractions kept); `None`
    /// at the first call or where it cannot be read.
    fn own_ticks(&mut self) -> Option<f64> {
        let now = (self.own_cpu_time)();
        let before = std::mem::replace(&mut self.own_cpu, now);
        now.zip(before)
            .map(|(n, b)| n.saturating_sub(b).as_secs_f64() * TICKS_PER_SECOND)
    }

    /// The view after a window with no measured power: the programs' watts are unknown, and the
    /// view says why. True when the view changed.
    fn unmeasured(&mut self, unix: f64) -> bool {
        let why = "no power was measured over the last window: no program's watts are known";
        let before = self.view.unavailable.clone();
        for p in &mut self.view.programs {
            p.watts = None;
            p.gpu_watts = None;
        }
        self.view.at = Some(unix);
        self.view.idle_watts = None;
        self.view.unattributed_watts = None;
        self.view.unavailable = Some(why.to_string());
        before.as_deref() != Some(why)
    }

    /// The joules per program (and per part) since the last call, for the ledger.
    pub fn take_pending(&mut self) -> BTreeMap<String, f64> {
        std::mem::take(&mut self.pending)
    }

    /// The port of the proxy's upstream when it is on this machine: the process listening there
    /// is the model server.
    pub fn set_upstream_port(&mut self, port: Option<u16>) {
        self.upstream.set_port(port);
    }

    /// Whether the ports model servers listen on are looked for, at each read.
    pub fn find_model_servers(&mut self, on: bool) {
        if on != self.listening.is_some() {
            self.listening = on.then(listening::Listening::default);
        }
    }

    /// The model servers' processes found listening on loopback, as of the last read.
    pub fn model_servers(&self) -> Vec<Listener> {
        self.listening
            .as_ref()
            .map(listening::Listening::listeners)
            .unwrap_or_default()
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

    /// Adds one interval's energy of a GPU (`source`'s `device`) to the window.
    pub fn add_gpu(&mut self, source: &str, device: &str, joules: f64, quality: Option<Quality>) {
        let w = &mut self.window;
        *w.gpus
            .entry((source.to_string(), device.to_string()))
            .or_default() += joules;
        w.gpu_quality = w.gpu_quality.max(quality);
    }

    /// [`ProgramMeter::read_if_due_with`], with no GPU's use known.
    pub fn read_if_due(&mut self, elapsed: Duration, unix: f64) -> bool {
        self.read_if_due_with(elapsed, unix, Vec::new)
    }

    /// Reads the processes and splits the window when due ([`cadence`]; `elapsed`: the engine's
    /// clock). `gpu_use` says which processes used the GPUs since
    /// it was last asked: it is asked at each read. True when the view changed.
    pub fn read_if_due_with(
        &mut self,
        elapsed: Duration,
        unix: f64,
        gpu_use: impl FnOnce() -> Vec<DeviceUse>,
    ) -> bool {
        if !self
            .cadence
            .due(elapsed, self.window.headline, self.window.seconds)
        {
            return false;
        }
        self.cadence.read(elapsed);
        match self.read(unix, gpu_use()) {
            Ok(changed) => changed,
            Err(reason) => {
                let changed = self.view.unavailable.as_ref() != Some(&reason);
                self.view.unavailable = Some(reason);
                self.window = Window::default();
                changed
            }
        }
    }

    fn read(&mut self, unix: f64, gpu_use: Vec<DeviceUse>) -> Result<bool, String> {
        let read = self.table.read().map_err(|e| e.to_string())?;
        let ticks = (read.busy_ticks, read.total_ticks);
        let used = self.cpu.step(read.procs, read.now_ticks);
        let before = self.ticks.replace(ticks);
        let window = std::mem::take(&mut self.window);
        let own_ticks = self.own_ticks();
        if let (Some(l), Some(used)) = (&mut self.listening, &used) {
            l.update(&self.root, used, &MODEL_SERVERS);
        }
        let (Some(used), Some(before)) = (used, before) else {
            return Ok(false);
        };
        if window.seconds <= 0.0 {
            return Ok(self.unmeasured(unix));
        }
        let busy = ticks.0.saturating_sub(before.0) as f64;
        let total = ticks.1.saturating_sub(before.1) as f64;
        // Where the kernel counts each process's energy, programs share the CPU domain by it,
        // else by CPU time: by energy only while the processes whose count cannot be read used
        // little of the window's CPU time (their part stays unattributed either way).
        let seen_ticks: f64 = used.iter().map(|u| u.ticks).sum();
        let unread_ticks: f64 = used
            .iter()
            .filter(|u| u.energy_nj.is_none())
            .map(|u| u.ticks)
            .sum();
        let energy_from = read
            .energy_from
            .filter(|_| seen_ticks > 0.0 && unread_ticks <= MAX_UNREAD_SHARE * seen_ticks);
        let upstream_program = self.upstream.program(&self.root, &used);
        let me = std::process::id();
        let weight = |u: &wattbar_core::programs::Used| match energy_from {
            Some(_) => u.energy_nj.unwrap_or(0.0),
            None => u.ticks,
        };
        let mine = used
            .iter()
            .find(|u| u.pid == me)
            .map(|u| (u.program.clone(), weight(u)));
        let parents: BTreeMap<u32, u32> = used.iter().map(|u| (u.pid, u.ppid)).collect();
        let mut by_program: BTreeMap<String, f64> = BTreeMap::new();
        let mut program_of: BTreeMap<u32, String> = BTreeMap::new();
        for u in used {
            *by_program.entry(u.program.clone()).or_default() += weight(&u);
            program_of.insert(u.pid, u.program);
        }
        // By energy, programs get the part of the active energy that the processes read account
        // for in busy time; the rest (processes that ended unseen, those not read) stays
        // unattributed, as by CPU time.
        let share_of = match energy_from {
            Some(_) => {
                let energy: f64 = by_program.values().sum();
                let covered = ((seen_ticks - unread_ticks) / busy.max(seen_ticks)).clamp(0.0, 1.0);
                if covered > 0.0 {
                    energy / covered
                } else {
                    busy
                }
            }
            None => busy,
        };
        let (gpus, gpu_note) = gpu::gpu_shares(&window.gpus, &gpu_use, &program_of);
        if !window.gpus.is_empty() {
            self.gpu_windows.push(ProcessGpuWindow::of(
                unix - window.seconds,
                unix,
                &window.gpus,
                &gpu_use,
                &parents,
            ));
            let old = self.gpu_windows.len().saturating_sub(KEPT_GPU_WINDOWS);
            self.gpu_windows.drain(..old);
        }
        if total > 0.0 && window.seconds > 0.0 {
            let cpus = total / (TICKS_PER_SECOND * window.seconds);
            if let Some(cpu) = window.cpu {
                self.idle_draw
                    .observe(cpu, window.seconds, busy / total, cpus);
            }
            if at_rest(busy / total, cpus) && self.idle_draw.draw().is_some() {
                self.cadence.rested(window.headline / window.seconds);
            }
        }
        let draw = self.idle_draw.draw();
        // The idle draw where known; until then the share of idle time.
        let idle = match draw {
            Some(d) => IdleModel::Draw {
                watts: d.watts,
                seconds: window.seconds,
            },
            None => IdleModel::IdleTime {
                busy_ticks: busy,
                total_ticks: total,
            },
        };
        let s = split_with_gpus(
            Measured {
                headline: window.headline,
                cpu: window.cpu,
                busy_ticks: share_of,
            },
            &by_program,
            idle,
            &gpus,
        );
        let seconds = window.seconds;
        let per_second = |j: f64| if seconds > 0.0 { j / seconds } else { 0.0 };
        let (day, _) = wattbar_ledger::store::local_day_month(unix);
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
            let on_gpu = s.gpu.get(name).copied().unwrap_or(0.0);
            let t = self.totals.entry(name.clone()).or_insert((0.0, None));
            t.0 += joules;
            // A share of an estimate is an estimate: the worst of the domains it came from.
            if *joules > on_gpu {
                t.1 = t.1.max(window.quality);
            }
            if on_gpu > 0.0 {
                t.1 = t.1.max(window.gpu_quality);
            }
        }
        self.idle += s.idle;
        self.unattributed += s.unattributed;
        match (energy_from, own_ticks, mine) {
            // By the kernel's count of each process's energy, Wattbar's is its share of its
            // program's.
            (Some(_), _, Some((name, weight))) | (None, None, Some((name, weight))) => {
                let program_weight = by_program.get(&name).copied().unwrap_or(0.0);
                let joules = s.programs.get(&name).copied().unwrap_or(0.0)
                    - s.gpu.get(&name).copied().unwrap_or(0.0);
                if program_weight > 0.0 {
                    self.self_joules += joules * weight / program_weight;
                }
            }
            (None, Some(ticks), _) => self.self_joules += s.per_tick * ticks,
            _ => {}
        }
        let active =
            |name: &str| s.programs.contains_key(name) || name == IDLE || name == UNATTRIBUTED;
        fold_into_other(
            &mut self.totals,
            |t| t.0,
            active,
            |o, (j, q)| *o = (o.0 + j, o.1.max(q)),
        );
        fold_into_other(&mut self.today, |j| *j, active, |o, j| *o += j);
        let today = |name: &str| self.today.get(name).copied().unwrap_or(0.0);
        let programs = view::figures(&self.totals, &self.today, &s, seconds);
        view::keep_series(&mut self.series, &programs);
        self.view = ProgramsView {
            at: Some(unix),
            window_seconds: seconds,
            programs,
            idle_watts: Some(per_second(s.idle)),
            unattributed_watts: Some(per_second(s.unattributed)),
            idle_joules: self.idle,
            unattributed_joules: self.unattributed,
            idle_joules_today: today(IDLE),
            unattributed_joules_today: today(UNATTRIBUTED),
            self_joules: self.self_joules,
            method: method(draw.as_ref(), energy_from),
            idle_draw_watts: draw.map(|d| d.watts),
            unavailable: None,
            gpu_note,
            upstream_program,
            series: self.series.clone(),
        };
        Ok(true)
    }
}

#[cfg(test)]
mod tests;
