//! `wattbar-cli run`: the energy of a command.
//!
//! The machine is measured as a whole, per domain, over exactly each child's lifetime; an idle
//! baseline before the first run gives net figures beside the gross ones. See [`meter`] for
//! where the energy comes from, [`child`] for how the command runs and exits, [`events`] for the
//! phases a child can mark, and [`summary`] for the figures.

mod child;
pub(crate) mod defer;
mod events;
mod gpu;
pub(crate) mod meter;
mod output;
mod report;
pub(crate) mod samples;
pub(crate) mod summary;
mod trace;
mod tree;

use crate::args::RunArgs;
use anyhow::{bail, Result};
use child::{Interrupts, Lifetime, Program};
use defer::Deferred;
use events::{Event, Tail};
use meter::Meter;
use serde_json::Map;
use std::io::Write;
use std::time::Duration;
use summary::{Baseline, CommandResult, Pricing, RunContext, RunFigures, Summary};
use trace::RunTrace;
use wattbar_engine::unix_now;

/// The events file is read once per sampling interval, within these bounds: a line without `ts`
/// is stamped to the measurement's own resolution, and waking more often would cost more than
/// the sampling itself.
const EVENTS_POLL_MIN: Duration = Duration::from_millis(50);
const EVENTS_POLL_MAX: Duration = Duration::from_secs(1);

fn programs(args: &RunArgs) -> Result<Vec<Program>> {
    match (args.cmd.is_empty(), args.command.is_empty()) {
        (false, false) => bail!("give the command after -- or as --cmd strings, not both"),
        (true, true) => bail!("nothing to run: wattbar-cli run [OPTIONS] -- CMD ARGS..."),
        (false, true) => Ok(args.cmd.iter().cloned().map(Program::Shell).collect()),
        (true, false) => Ok(vec![Program::Argv(args.command.clone())]),
    }
}

/// Runs everything `args` asks for and returns the exit status to leave with.
pub fn run(runtime: &tokio::runtime::Runtime, args: RunArgs) -> Result<i32> {
    let programs = programs(&args)?;
    if let Some(dir) = &args.out {
        std::fs::create_dir_all(dir)
            .map_err(|e| anyhow::anyhow!("cannot make {}: {e}", dir.display()))?;
    }
    runtime.block_on(measure(args, programs))
}

struct Measured {
    runs: Vec<(usize, RunFigures)>,
    events: Vec<(usize, u32, Event)>,
    exit_code: i32,
}

async fn measure(args: RunArgs, programs: Vec<Program>) -> Result<i32> {
    let prefs = crate::engine::read_prefs()?;
    let chosen = match defer::deferred(&args, &prefs).await? {
        Deferred::Now => None,
        Deferred::After(choice) => Some(*choice),
        Deferred::Exit(status) => return Ok(status),
    };
    let pricing = Pricing {
        prices: defer::pricing(&prefs, unix_now(), chosen.as_ref()),
        currency: prefs.currency.as_str().to_string(),
    };
    let mut interrupts = Interrupts::catch()?;
    // An engine without an API (`watch`) cannot be followed: this command samples for itself.
    let meter = match crate::client::running() {
        Ok(Some(client)) => Meter::engine(client)?,
        _ => {
            let chain = crate::engine::open_sources(Default::default()).await?;
            Meter::here(chain, prefs, args.interval).await?
        }
    };
    let options = wattbar_engine::ChainOptions::from_env();
    let gpus = match &options.replay {
        Some(_) => None,
        None => Some(gpu::GpuWatch::start(args.interval, &options.root)),
    };
    let gpus = Gpus(gpus);
    let result = measure_with(&args, &programs, &meter, &gpus, &pricing, &mut interrupts).await;
    meter.stop().await;
    let (summary, kept) = result?;
    // From here on the child has run: a failure to report is said, and the child's status
    // is still what Wattbar leaves with.
    eprint!("{}", summary::human(&summary));
    if let Some(c) = &chosen {
        eprintln!("{}", defer::outcome(c, &summary));
    }
    if args.json {
        let written = serde_json::to_string(&summary)
            .map_err(anyhow::Error::from)
            .and_then(|json| Ok(writeln!(std::io::stdout(), "{json}")?));
        if let Err(e) = written {
            eprintln!("wattbar run: the JSON summary could not be written: {e}");
        }
    }
    if let Some(dir) = &args.out {
        match output::write_all(dir, &summary, &kept) {
            Ok(()) => eprintln!("wattbar run: wrote {}", dir.display()),
            Err(e) => eprintln!("wattbar run: {e:#}"),
        }
    }
    Ok(summary.exit_code)
}

/// The GPU watcher, or none while replaying a trace (the trace stands in for the machine).
struct Gpus(Option<gpu::GpuWatch>);

impl Gpus {
    fn figures(&self, from: f64, to: f64) -> (Vec<gpu::GpuFigure>, Option<String>) {
        match &self.0 {
            Some(w) => w.figures(from, to),
            None => (Vec::new(), Some("not read while replaying a trace".into())),
        }
    }

    fn tree_share(&self, from: f64, to: f64) -> Option<(f64, f64)> {
        self.0.as_ref().and_then(|w| w.tree_share(from, to))
    }
}

async fn measure_with(
    args: &RunArgs,
    programs: &[Program],
    meter: &Meter,
    gpus: &Gpus,
    pricing: &Pricing,
    interrupts: &mut Interrupts,
) -> Result<(Summary, RunTrace)> {
    let started = unix_now();
    meter.wait_past(started).await?;
    let baseline = if args.idle.is_zero() {
        None
    } else {
        let from = unix_now();
        tokio::select! {
            _ = tokio::time::sleep(args.idle) => {}
            n = interrupts.next() => {
                // Nothing ran: leave as a shell would for that signal, with nothing measured.
                eprintln!("wattbar run: signal {n} during the idle baseline; nothing was run");
                let summary = Summary {
                    wattbar: env!("CARGO_PKG_VERSION"),
                    measured: meter.describe(),
                    interval_seconds: meter.interval().as_secs_f64(),
                    baseline: None,
                    results: Vec::new(),
                    exit_code: 128 + n,
                };
                return Ok((summary, RunTrace::nothing()));
            }
        }
        let to = unix_now();
        meter.wait_past(to).await?;
        let how = format!(
            "the machine measured for {:.1} s before the first run, {}",
            to - from,
            meter.describe()
        );
        Some(Baseline::of(&meter.energy(from, to)?, how))
    };
    // A folder of the run's own (mode 0700): nobody else can plant or read the events file.
    let events_dir = tempfile::Builder::new().prefix("wattbar-run-").tempdir()?;
    let events_path = events_dir.path().join("events.jsonl");
    let mut measured = Measured {
        runs: Vec::new(),
        events: Vec::new(),
        exit_code: 0,
    };
    let setup = Setup {
        args,
        meter,
        gpus,
        pricing,
        baseline: baseline.as_ref(),
        events_path: &events_path,
    };
    let result = run_all(&setup, programs, interrupts, &mut measured).await;
    drop(events_dir);
    result?;
    let results = programs
        .iter()
        .enumerate()
        .map(|(i, p)| {
            CommandResult::of(
                p.label(),
                measured
                    .runs
                    .iter()
                    .filter(|(c, _)| *c == i)
                    .map(|(_, r)| r.clone())
                    .collect(),
            )
        })
        .collect();
    let ended = measured.runs.last().map_or(unix_now(), |(_, r)| r.end);
    let summary = Summary {
        wattbar: env!("CARGO_PKG_VERSION"),
        measured: meter.describe(),
        interval_seconds: meter.interval().as_secs_f64(),
        baseline,
        results,
        exit_code: measured.exit_code,
    };
    Ok((
        summary,
        RunTrace {
            events: measured.events,
            samples: meter.take_samples(),
            from: started,
            to: ended,
        },
    ))
}

/// What every run of a measurement shares.
struct Setup<'a> {
    args: &'a RunArgs,
    meter: &'a Meter,
    gpus: &'a Gpus,
    pricing: &'a Pricing,
    baseline: Option<&'a Baseline>,
    events_path: &'a std::path::Path,
}

async fn run_all(
    setup: &Setup<'_>,
    programs: &[Program],
    interrupts: &mut Interrupts,
    measured: &mut Measured,
) -> Result<()> {
    let Setup {
        args,
        meter,
        gpus,
        pricing,
        baseline,
        events_path,
    } = *setup;
    for (c, program) in programs.iter().enumerate() {
        // Warm-ups first, then the measured runs; a signal stops before the next one starts.
        for i in 0..args.warmup + args.runs {
            if let Some(sig) = interrupts.received {
                measured.exit_code = 128 + sig;
                return Ok(());
            }
            let (life, events) = run_once(
                program,
                events_path,
                args.json,
                meter.interval(),
                interrupts,
            )
            .await?;
            if i < args.warmup {
                if !life.outcome.success() {
                    eprintln!(
                        "wattbar run: warm-up {} of {}: {}",
                        i + 1,
                        program.label(),
                        life.outcome.describe()
                    );
                    measured.exit_code = life.outcome.exit_code();
                    return Ok(());
                }
                continue;
            }
            let n = i - args.warmup + 1;
            if let child::Outcome::NotStarted(why) = &life.outcome {
                eprintln!(
                    "wattbar run: {} could not be started: {why}",
                    program.label()
                );
                measured.exit_code = life.outcome.exit_code();
                return Ok(());
            }
            // The child has run: a measurement that fails is this run's warning, not an
            // error that would lose its exit status.
            let mut problems = Vec::new();
            let measured_window = match meter.wait_past(life.end).await {
                Ok(()) => meter.energy(life.start, life.end),
                Err(e) => Err(e),
            };
            let mut window = match measured_window {
                Ok(w) => w,
                Err(e) => {
                    problems.push(format!("the energy could not be measured: {e:#}"));
                    unmeasured(life.start, life.end)
                }
            };
            let mut phases = Vec::new();
            for p in events::phases(&events, life.start, life.end) {
                match meter.energy(p.from, p.to) {
                    Ok(w) => phases.push((p, w)),
                    Err(e) => problems.push(format!("phase {}: {e:#}", p.name)),
                }
            }
            if !meter.keeps_domains_from(life.start) {
                window.by_domain.clear();
                for (_, w) in &mut phases {
                    w.by_domain.clear();
                }
                problems.push(
                    "the running engine keeps per-domain energy for its last 15 minutes only: \
                     this run's energy is given for the whole machine, not per domain"
                        .into(),
                );
            }
            let cx = RunContext {
                run: n,
                command: program.label(),
                exit_code: life.outcome.exit_code(),
                outcome: life.outcome.describe(),
                interval: meter.interval(),
                baseline,
                pricing,
                cpu_busy_percent: life.cpu_busy_percent,
                attributed: tree::attributed(
                    life.tree.clone(),
                    gpus.tree_share(life.start, life.end),
                    &window,
                    baseline.and_then(|b| b.by_domain.get("cpu").copied()),
                ),
                gpus: gpus.figures(life.start, life.end),
                unavailable: meter
                    .unavailable()
                    .iter()
                    .map(|u| format!("{}: {}", u.source, u.reason))
                    .collect::<Vec<_>>()
                    .join("; "),
            };
            let mut figures =
                summary::run_figures(cx, &window, &meter.states(life.start, life.end), phases);
            figures.warnings.extend(problems);
            let mut start = Map::new();
            start.insert("command".into(), program.label().into());
            let mut end = Map::new();
            end.insert("exit_code".into(), life.outcome.exit_code().into());
            end.insert("joules".into(), figures.gross_joules.into());
            measured
                .events
                .push((c, n, Event::new(life.start, "start", start)));
            measured
                .events
                .extend(events.into_iter().map(|e| (c, n, e)));
            measured
                .events
                .push((c, n, Event::new(life.end, "end", end)));
            measured.runs.push((c, figures));
            if !life.outcome.success() {
                measured.exit_code = life.outcome.exit_code();
                return Ok(());
            }
            if let Some(n) = interrupts.received {
                measured.exit_code = 128 + n;
                return Ok(());
            }
        }
    }
    Ok(())
}

/// A window nothing is known of.
fn unmeasured(from: f64, to: f64) -> wattbar_core::inference::WindowEnergy {
    wattbar_core::inference::WindowEnergy {
        from,
        to,
        joules: None,
        bound_joules: None,
        by_domain: Vec::new(),
        mean_watts: None,
        samples: 0,
        covered_fraction: 0.0,
        quality: None,
        sources: Vec::new(),
        coverage: None,
    }
}

struct Life {
    start: f64,
    end: f64,
    outcome: child::Outcome,
    cpu_busy_percent: Option<f64>,
    /// The CPU ticks of the command's own process tree, and of all CPUs, over the run.
    tree: Result<tree::TreeTicks, String>,
}

/// One child from start to end, with the events it wrote meanwhile.
async fn run_once(
    program: &Program,
    events_path: &std::path::Path,
    json: bool,
    poll: Duration,
    interrupts: &mut Interrupts,
) -> Result<(Life, Vec<Event>)> {
    let poll = poll.clamp(EVENTS_POLL_MIN, EVENTS_POLL_MAX);
    let mut tail = Tail::create(events_path)?;
    let mut found: Vec<Event> = Vec::new();
    let take = |results: Vec<Result<Event, String>>, found: &mut Vec<Event>| {
        for r in results {
            match r {
                Ok(e) => found.push(e),
                Err(why) => eprintln!("wattbar run: {why}; skipped"),
            }
        }
    };
    let mut cpu = Cpu::start();
    let tree_before = tree::read();
    let child = child::run(program, events_path, json, interrupts);
    tokio::pin!(child);
    let Lifetime {
        start,
        end,
        outcome,
    } = loop {
        tokio::select! {
            life = &mut child => break life,
            _ = tokio::time::sleep(poll) => take(tail.poll(unix_now(), false), &mut found),
        }
    };
    let busy = cpu.busy_percent(end - start);
    let tree = tree_before.and_then(|b| tree::read().map(|a| tree::between(&b, &a)));
    take(tail.poll(end, true), &mut found);
    for e in found
        .iter()
        .filter(|e| e.ts < start - 60.0 || e.ts > end + 60.0)
    {
        eprintln!(
            "wattbar run: event {} at {} is more than a minute outside the run ({start:.3}–{end:.3}): \
             ts is Unix seconds; it is held to the run",
            e.kind, e.ts
        );
    }
    Ok((
        Life {
            start,
            end,
            outcome,
            cpu_busy_percent: busy,
            tree,
        },
        found,
    ))
}

/// The share of all CPUs busy between two moments, as the operating system counts it.
struct Cpu(sysinfo::System);

impl Cpu {
    fn start() -> Cpu {
        let mut s = sysinfo::System::new();
        s.refresh_cpu_usage();
        Cpu(s)
    }

    /// `None` for a stretch too short for the operating system's counters to tell.
    fn busy_percent(&mut self, seconds: f64) -> Option<f64> {
        if seconds < sysinfo::MINIMUM_CPU_UPDATE_INTERVAL.as_secs_f64() {
            return None;
        }
        self.0.refresh_cpu_usage();
        let busy = f64::from(self.0.global_cpu_usage());
        busy.is_finite().then_some(busy)
    }
}
