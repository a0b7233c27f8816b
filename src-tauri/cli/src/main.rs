//! wattbar-cli: the Wattbar engine without a desktop. The arguments are in [`args`]; each command
//! (or small family of commands) has its module in [`cmd`]; what several share beside them:
//! [`engine`] (an engine in this process), [`client`] (the running engine's API), [`ledger`]
//! (the ledger read-only) and [`integrate`] (energy from a trace).

/// `println!` that gives the write's error back: a reader gone (`| head`) ends the output
/// cleanly ([`is_broken_pipe`]) instead of the panic `println!` makes of it.
macro_rules! out {
    () => {
        std::io::Write::write_all(&mut std::io::stdout(), b"\n")
    };
    ($($arg:tt)*) => {
        std::io::Write::write_fmt(
            &mut std::io::stdout(),
            format_args!("{}\n", format_args!($($arg)*)),
        )
    };
}
pub(crate) use out;

mod args;
mod client;
mod cmd;
mod engine;
mod integrate;
mod ledger;

use anyhow::Result;
use args::{Cli, Cmd};
use clap::Parser;
use cmd::watch::Format;
use cmd::{
    best, calibrate, export, fleet, inspect, key, llm, low_power, profile, report, reset_session,
    serve, service, top, totals, version, watch,
};

/// A failure is the user's to act on, not a crash: its message and causes, never a backtrace
/// (`RUST_BACKTRACE=1`, common among Rust users, would otherwise add a screen of frames).
fn main() -> std::process::ExitCode {
    match run(Cli::parse()) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        // The reader of the output went away (`wattbar-cli inference | head -1`): done.
        Err(e) if is_broken_pipe(&e) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("Error: {e}");
            for cause in e.chain().skip(1) {
                eprintln!("  because: {cause}");
            }
            std::process::ExitCode::FAILURE
        }
    }
}

/// Whether writing the output failed because its reader went away.
pub(crate) fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

fn run(cli: Cli) -> Result<()> {
    // The daemon logs what it does; one-shot commands only what went wrong. RUST_LOG overrides.
    let default_level = match cli.command {
        Cmd::Serve { .. } => "info",
        _ => "warn",
    };
    wattbar_engine::logging::init(default_level);
    // The main thread serves the API; sampling and SQLite run on the engine's own thread, so
    // nothing slow ever holds it. More async workers measured more memory and slower replies.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    // A setting a sweep changed and could not put back (a kill -9, a power loss) is put back
    // at the next start of any Wattbar program, which says so.
    if let Ok(dir) = wattbar_engine::home::paths::data_dir() {
        match runtime.block_on(wattbar_engine::knobs::restore_left_over(&dir)) {
            Some(Ok(done)) => eprintln!("wattbar: {done}"),
            Some(Err(e)) => eprintln!("wattbar: a sweep's setting is not back yet: {e}"),
            None => {}
        }
    }
    match cli.command {
        Cmd::Watch {
            interval,
            count,
            json,
            csv,
            batch,
            wall,
        } => {
            let format = match (json, csv) {
                (true, _) => Format::Json,
                (_, true) => Format::Csv,
                _ => Format::Human,
            };
            watch::watch(&runtime, interval, count, format, batch, wall)
        }
        Cmd::Sources => inspect::sources(),
        Cmd::Integrate { file } => inspect::integrate_file(&file),
        Cmd::Totals { json } => totals::totals(json),
        Cmd::Calibrate { from_csv, json } => calibrate::calibrate(from_csv.as_deref(), json),
        Cmd::ResetSession => reset_session::reset_session(),
        serve @ Cmd::Serve { .. } => runtime.block_on(serve::serve(serve)),
        Cmd::Token => {
            let dir = wattbar_engine::home::paths::data_dir()?;
            out!("{}", wattbar_engine::home::secrets::load_or_create(&dir)?)?;
            Ok(())
        }
        Cmd::LowPower { state, api } => low_power::low_power(state, api),
        Cmd::Key { cmd } => key::key(cmd),
        Cmd::Usage {
            key,
            client,
            model,
            since,
            group,
        } => key::usage(key, client, model, &since, group),
        Cmd::Models {
            json,
            best: true,
            min_accuracy,
            max_itl,
            eval,
            ..
        } => best::models_best(
            &wattbar_core::eval::best::Targets {
                min_accuracy,
                by_lower_bound: false,
                max_itl_seconds: max_itl.map(|d| d.as_secs_f64()),
                eval,
            },
            json,
        ),
        Cmd::Models {
            json,
            standards: true,
            ..
        } => best::models_standards(json),
        Cmd::Models { json, csv, .. } => llm::models(match (json, csv) {
            (true, _) => args::TableFormat::Json,
            (_, true) => args::TableFormat::Csv,
            _ => args::TableFormat::Human,
        }),
        Cmd::Inference { since, limit, json } => llm::inference(&since, limit, json),
        Cmd::Fleet {
            hosts,
            hostfile,
            prometheus,
            interval,
            timeout,
            stale,
            json,
            count,
        } => {
            let source = match (prometheus, hostfile) {
                (Some(url), _) => fleet::Source::Prometheus(url),
                (None, Some(file)) => fleet::Source::Hosts(fleet::read_hostfile(&file)?),
                (None, None) => fleet::Source::Hosts(hosts),
            };
            fleet::fleet(
                &runtime,
                fleet::Options {
                    source,
                    interval,
                    timeout,
                    stale,
                    json,
                    count,
                },
            )
        }
        Cmd::Top {
            json,
            interval,
            count,
            limit,
            sort,
        } => top::top(
            &runtime,
            top::Options {
                json,
                interval,
                count,
                limit: usize::try_from(limit).unwrap_or(usize::MAX),
                sort: if sort == "energy" {
                    wattbar_engine::programs::Sort::Energy
                } else {
                    wattbar_engine::programs::Sort::Watts
                },
            },
        ),
        Cmd::Parse { kind, file } => inspect::parse(kind, &file),
        Cmd::Probe {
            sysfs_root,
            then,
            after,
        } => inspect::probe(&sysfs_root, then.as_deref(), after),
        Cmd::Profile {
            action: Some(args::ProfileAction::Compare { dirs, json, svg }),
            ..
        } => profile::compare::run(&dirs, json, svg.as_deref()),
        Cmd::Profile {
            action: None,
            model,
            prompts,
            upstream,
            api,
            max,
            eval,
            out,
            idle,
            interval,
            format,
            grader,
            allow_cmd_grader,
            tolerance,
            max_tokens,
            sweep,
            choose,
            eta,
            settle,
            report,
        } => {
            let (Some(model), Some(prompts)) = (model, prompts) else {
                anyhow::bail!("profile needs --model and --prompts");
            };
            let sweep = match sweep {
                Some(knob) => Some(profile::sweep::SweepOptions {
                    knob: knob.into(),
                    rule: match eta {
                        Some(eta) => wattbar_core::sweep::Rule::cost(eta),
                        None => wattbar_core::sweep::Rule::parse(&choose),
                    }
                    .map_err(anyhow::Error::msg)?,
                    settle,
                }),
                None => None,
            };
            profile::profile(
                &runtime,
                profile::Options {
                    out: out.unwrap_or_else(|| profile::default_out(&model)),
                    model,
                    prompts,
                    upstream,
                    api,
                    max,
                    eval,
                    idle,
                    interval,
                    format,
                    grader,
                    allow_cmd_grader,
                    tolerance,
                    max_tokens,
                    sweep,
                    standards: matches!(report, Some(args::ProfileReport::Standards)),
                },
            )
        }
        Cmd::Report { from, to, out } => report::report(&from, &to, &out),
        Cmd::Version {
            check,
            manifest,
            json,
        } => version::version(check, manifest, json),
        Cmd::Service { action } => {
            let code = service::service(action)?;
            drop(runtime);
            std::process::exit(code)
        }
        Cmd::Run(args) => {
            let code = cmd::run::run(&runtime, args)?;
            drop(runtime);
            std::process::exit(code)
        }
        Cmd::Export {
            from,
            to,
            step,
            format,
            domains,
        } => export::export(&from, &to, step, format, &domains),
    }
}
