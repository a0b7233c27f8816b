//! The command line: every command and its arguments. Fixed choices are clap `ValueEnum`s, so a
//! wrong word is refused by the parser with the list of right ones.

use clap::{Parser, Subcommand, ValueEnum};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;
use wattbar_core::prefs::parse_duration;
use wattbar_core::Preferences;
use wattbar_serve::api;

mod actions;
mod values;
pub use actions::*;
pub use values::*;

#[derive(Parser)]
#[command(
    name = "wattbar-cli",
    version = wattbar_release::LONG_VERSION,
    about = "Wattbar's power engine, headless"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Cmd,
}

/// The wall meter named on the command line, its secrets in files of their own.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct WallMeterArgs {
    /// A smart plug the machine is plugged into (Shelly, Tasmota, kasa://HOST, or a Home
    /// Assistant power sensor's URL, http or https), read beside the sensors as the `wall`.
    /// Never with a password in it: every local user can read a command line. Default:
    /// WATTBAR_WALL_METER.
    #[arg(long, value_name = "URL")]
    pub wall_meter: Option<String>,
    /// A file whose first line is the plug's password (a Shelly's digest password); only its
    /// owner may read it (mode 600).
    #[arg(long, value_name = "FILE", requires = "wall_meter")]
    pub wall_meter_password_file: Option<PathBuf>,
    /// A file whose first line is Home Assistant's long-lived access token; only its owner may
    /// read it (mode 600).
    #[arg(long, value_name = "FILE", requires = "wall_meter")]
    pub wall_meter_token_file: Option<PathBuf>,
    /// An https meter's own certificate, trusted by its SHA-256 alone (as `openssl x509 -noout
    /// -fingerprint -sha256` prints it): a Home Assistant with a self-signed certificate. A
    /// refusal of an unpinned one names the fingerprint it saw.
    #[arg(long, value_name = "SHA256", requires = "wall_meter", value_parser = parse_pin)]
    pub wall_meter_pin: Option<wattbar_core::pin::Pin>,
}

fn parse_pin(text: &str) -> Result<wattbar_core::pin::Pin, String> {
    wattbar_core::pin::Pin::parse(text)
}

// Parsed once per run: the size of its largest variant costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand)]
pub enum Cmd {
    /// Print one line per sample: watts, quality, source and session energy. When another
    /// engine records into the data folder, follow it through its API instead.
    Watch {
        /// Sampling interval, e.g. 1s, 500ms (100 ms – 60 s).
        #[arg(long, default_value = "1s", value_parser = parse_interval)]
        interval: Duration,
        /// Stop after this many samples.
        #[arg(long)]
        count: Option<u64>,
        /// One JSON object per line.
        #[arg(long, conflicts_with = "csv")]
        json: bool,
        /// Record a replay trace: `t,watts,domain,quality`, t in seconds from the first sample.
        #[arg(long)]
        csv: bool,
        /// How often samples are written to the store, e.g. 5s.
        #[arg(long, default_value = "10s", value_parser = parse_batch)]
        batch: Duration,
        #[command(flatten)]
        wall: WallMeterArgs,
    },
    /// Each source on this machine, in priority order: available or not, why, and its quality (JSON).
    Sources,
    /// Energy of a CSV with `t,watts` or `t,joules` (t in seconds), optionally a `domain` column (JSON).
    Integrate { file: PathBuf },
    /// Session, today, this month and lifetime from the store, as kWh, cost and currency.
    Totals {
        #[arg(long)]
        json: bool,
    },
    /// The line from the machine's parts to a whole-machine reference (a plug, a battery): what
    /// the running engine learned, or, with --from-csv, the fit of a recorded trace with the
    /// columns t,reference_watts,components_watts. A refusal exits 1 with its reason.
    Calibrate {
        #[arg(long)]
        from_csv: Option<PathBuf>,
        #[arg(long)]
        json: bool,
    },
    /// Read every Linux source once from a sysfs root; with --then, again from a second root as
    /// if --after seconds had passed, which turns energy counters into watts (JSON).
    Probe {
        #[arg(long)]
        sysfs_root: PathBuf,
        #[arg(long, requires = "after")]
        then: Option<PathBuf>,
        #[arg(long, requires = "then")]
        after: Option<f64>,
    },
    /// Print what Wattbar reads from a saved capture (JSON): a macOS tool's output, a smart
    /// plug's answer.
    Parse { kind: CaptureKind, file: PathBuf },
    /// End the session and start another: through the running engine's API, or in the store
    /// when no engine runs. Lifetime is untouched.
    ResetSession,
    /// Run the engine with the local HTTP API: Prometheus /metrics, /v1/… JSON and SSE, and the
    /// dashboard at /. Loopback only unless --allow-remote. SIGTERM writes the store and exits 0.
    Serve {
        /// Address and port to listen on.
        #[arg(long, default_value = api::DEFAULT_LISTEN)]
        listen: SocketAddr,
        /// Allow a --listen (or --llm-proxy) address other than loopback (anyone who reaches the
        /// API can read; anyone who reaches the proxy can use the model server).
        #[arg(long)]
        allow_remote: bool,
        /// With a non-loopback listen, a host name clients may use besides this machine's own
        /// names and addresses (repeatable), e.g. the name Prometheus scrapes.
        #[arg(long = "allow-host", value_name = "NAME", value_parser = api::parse_host_name)]
        allow_host: Vec<String>,
        /// Sampling interval, e.g. 1s, 100ms; default: the preference.
        #[arg(long, value_parser = parse_interval)]
        interval: Option<Duration>,
        /// How often samples are written to the store, e.g. 5s.
        #[arg(long, default_value = "10s", value_parser = parse_batch)]
        batch: Duration,
        /// The dashboard's files (default: found beside the binary or in the source tree).
        #[arg(long)]
        ui: Option<PathBuf>,
        /// Also run the inference proxy here: point LLM clients at it
        /// (OLLAMA_HOST=127.0.0.1:11435) and each request's energy is recorded.
        #[arg(long, value_name = "ADDR")]
        llm_proxy: Option<SocketAddr>,
        /// The model server the proxy forwards to; default: OLLAMA_HOST, else
        /// http://127.0.0.1:11434.
        #[arg(long, value_name = "URL", requires = "llm_proxy")]
        llm_upstream: Option<String>,
        /// Follow a model server by its own counters, with no proxy: llama-server (--metrics),
        /// vLLM, SGLang (--enable-metrics) or TGI, e.g. http://127.0.0.1:8080. Its tokens per
        /// window, and their energy, are at /v1/server-metrics. May be given again.
        #[arg(long, value_name = "URL")]
        server_metrics: Vec<String>,
        /// Publish to this MQTT broker with Home Assistant discovery: mqtt://[user@]host[:port]
        /// or mqtts://…; the password, if any, in the file --mqtt-password-file names.
        /// Default: the preference `mqtt_url`.
        #[arg(long, value_name = "URL")]
        mqtt: Option<String>,
        /// A file holding the broker's password alone (keep it mode 0600); default:
        /// mqtt-password in the data folder, when it is there.
        #[arg(long, value_name = "FILE")]
        mqtt_password_file: Option<PathBuf>,
        /// Topics go under this prefix; default: wattbar/<host name>.
        #[arg(long, value_name = "PREFIX")]
        mqtt_topic_prefix: Option<String>,
        /// The MQTT client id; default: wattbar-<host name>.
        #[arg(long, value_name = "ID")]
        mqtt_client_id: Option<String>,
        /// States at most this often (and at once when low-power mode changes), e.g. 10s.
        #[arg(long, value_parser = parse_fleet_duration)]
        mqtt_interval: Option<Duration>,
        /// Push OpenTelemetry metrics (OTLP/HTTP, protobuf) to this collector, e.g.
        /// http://localhost:4318 (its /v1/metrics) or a full metrics URL. Headers for it (a
        /// token) are read from OTEL_EXPORTER_OTLP_HEADERS, as every OpenTelemetry exporter
        /// reads them, and go to this endpoint's origin alone.
        #[arg(long, value_name = "URL")]
        otlp_endpoint: Option<String>,
        /// Push every so often, e.g. 60s.
        #[arg(long, value_parser = parse_fleet_duration)]
        otlp_interval: Option<Duration>,
        #[command(flatten)]
        wall: WallMeterArgs,
    },
    /// This program's version and commit; with --check, whether a newer release exists, from
    /// the signed manifest at the preference update_manifest_url (off by default) or --manifest.
    /// Nothing is downloaded: it says how to update (apt, dnf, brew or a source build).
    Version {
        #[arg(long)]
        check: bool,
        /// The manifest's URL, instead of the preference.
        #[arg(long, value_name = "URL", requires = "check")]
        manifest: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// Run `serve` as a service of the system's own manager: a systemd unit on Linux, a launchd
    /// agent on macOS. Writes or removes the file and says the command that starts it.
    Service {
        #[command(subcommand)]
        action: ServiceAction,
    },
    /// Energy per model from the inference ledger: requests, tokens, J/token gross and net,
    /// tokens/s, tokens/s per W and score, per source (the proxy's records, or a model server's
    /// own counters).
    Models {
        #[arg(long, conflicts_with = "csv")]
        json: bool,
        #[arg(long)]
        csv: bool,
        /// The cheapest model good enough, from the profiles kept (`profile`): the lowest energy
        /// per query among those that meet the targets, with the evidence.
        #[arg(long, conflicts_with = "csv")]
        best: bool,
        /// Each model's newest profile per evaluation in the public leaderboards' units (AI
        /// Energy Score, ML.ENERGY, Intelligence per Watt, SCI for AI, MLPerf Power), each with
        /// its scope and bound, or why its scope cannot give it.
        #[arg(long, conflicts_with_all = ["csv", "best"])]
        standards: bool,
        /// With --best: the lowest accuracy, a fraction.
        #[arg(long, requires = "best", value_name = "FRACTION", value_parser = parse_fraction,
              default_value_t = wattbar_core::eval::best::DEFAULT_MIN_ACCURACY)]
        min_accuracy: f64,
        /// With --best: the highest median inter-token latency, such as 100ms.
        #[arg(long, requires = "best", value_parser = parse_latency)]
        max_itl: Option<Duration>,
        /// With --best: the evaluation (as `profile --eval` named it); default: the newest
        /// profile's.
        #[arg(long, requires = "best", value_name = "NAME")]
        eval: Option<String>,
    },
    /// Which programs draw the watts: a table by watts, updated as the engine reads the
    /// processes (every 10 s). Beside a running engine it follows that one; else it runs its own.
    Top {
        /// One JSON object per update, the shape of `GET /v1/processes`.
        #[arg(long)]
        json: bool,
        /// Print at most this often, e.g. 10s, 30s.
        #[arg(long, default_value = "10s", value_parser = parse_interval)]
        interval: Duration,
        /// Stop after this many updates.
        #[arg(long)]
        count: Option<u64>,
        /// Programs listed.
        #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=1000))]
        limit: u64,
        /// Order by watts over the last window, or by energy since the engine started.
        #[arg(long, default_value = "watts", value_parser = ["watts", "energy"])]
        sort: String,
    },
    /// Many machines' watts side by side, live: each machine's API (`--hosts`, `--hostfile`),
    /// or a Prometheus server that scrapes them (`--prometheus`). The total sums only the hosts
    /// that answered with a fresh figure, and says how many of how many.
    #[command(group(clap::ArgGroup::new("fleet").required(true).args(["hosts", "hostfile", "prometheus"])))]
    Fleet {
        /// Machines' APIs: host:port, comma-separated (port 9471 when none is given). Each must
        /// serve its API where this machine reaches it (`serve --listen 0.0.0.0:9471
        /// --allow-remote`).
        #[arg(long, value_delimiter = ',')]
        hosts: Vec<String>,
        /// A file of hosts, one per line (`#` comments).
        #[arg(long)]
        hostfile: Option<PathBuf>,
        /// A Prometheus server that scrapes the machines, e.g. http://localhost:9090.
        #[arg(long)]
        prometheus: Option<String>,
        /// Refresh every so often, e.g. 1s; default: 2 s for up to 16 hosts, 3 s to 64, else 5 s.
        #[arg(long, value_parser = parse_fleet_duration)]
        interval: Option<Duration>,
        /// The longest wait for a host's (or Prometheus') answer.
        #[arg(long, default_value = "5s", value_parser = parse_fleet_duration)]
        timeout: Duration,
        /// A host whose last sample is older is stale, not counted; default: three refreshes,
        /// at least 10 s.
        #[arg(long, value_parser = parse_fleet_duration)]
        stale: Option<Duration>,
        /// One JSON document per refresh: {"total_watts", "hosts_up", "hosts_total", "hosts"}.
        #[arg(long)]
        json: bool,
        /// Stop after this many refreshes.
        #[arg(long)]
        count: Option<u64>,
    },
    /// The inference records, newest first.
    Inference {
        /// Start: a duration back from now such as 24h or 7d, or Unix seconds.
        #[arg(long, default_value = "24h")]
        since: String,
        #[arg(long, default_value_t = 100)]
        limit: usize,
        #[arg(long)]
        json: bool,
    },
    /// The keys the inference proxy issues (`Authorization: Bearer wb_…`), each with an energy
    /// budget per UTC day, week or month: through the running engine, else in the data folder.
    Key {
        #[command(subcommand)]
        cmd: KeyCmd,
    },
    /// Requests, tokens and joules per day (or week, month, key, client, model), from the
    /// inference records kept: as JSON.
    Usage {
        #[arg(long)]
        key: Option<String>,
        /// The client, as `X-Wattbar-Client` named it (else the key's name).
        #[arg(long)]
        client: Option<String>,
        #[arg(long)]
        model: Option<String>,
        /// Start: a duration back from now such as 24h or 7d, or Unix seconds.
        #[arg(long, default_value = "30d")]
        since: String,
        #[arg(long, default_value = "day", value_parser = parse_group)]
        group: wattbar_engine::store::keys::Group,
    },
    /// Print the bearer token the API's writes need (made on first use, mode 0600).
    Token,
    /// Ask the running engine (serve or the tray app) to turn low-power mode on or off, or show it.
    LowPower {
        #[arg(value_enum, default_value = "status")]
        state: LowPowerArg,
        /// The API's address; default: the running engine's, else 127.0.0.1:9471.
        #[arg(long)]
        api: Option<SocketAddr>,
    },
    /// Measure the energy of a command: the whole machine, per domain, over exactly the
    /// child's lifetime, with an idle baseline before it. Exits with the child's status.
    /// The child may mark phases by writing JSON lines to the file named in WATTBAR_RUN_EVENTS.
    Run(RunArgs),
    /// Run a model over a set of prompts, one at a time, each measured as the inference proxy
    /// measures a request: records.jsonl and summary.json in --out, the records added to the
    /// model ledger. `profile compare DIR…` sets runs side by side.
    #[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
    Profile {
        #[command(subcommand)]
        action: Option<ProfileAction>,
        #[arg(long, required = true)]
        model: Option<String>,
        /// JSON lines: `{"prompt": "...", "id": ..., "answer": "...", "grader": "..."}` (all but
        /// the prompt optional), or GSM8K's `{"question", "answer"}` with `--format gsm8k`.
        #[arg(long, required = true)]
        prompts: Option<PathBuf>,
        /// How the prompts file is written.
        #[arg(long, value_enum, default_value = "wattbar")]
        format: crate::cmd::profile::prompts::Format,
        /// How each answer is graded against its reference: exact, contains, number, mcq,
        /// regex:PATTERN or cmd:PROGRAM (the record as JSON on stdin; exit 0 correct, 1
        /// incorrect). Default: number for GSM8K, else contains.
        #[arg(long, value_name = "NAME")]
        grader: Option<String>,
        /// Let a `cmd:` grader (from --grader or a prompts line) run its shell command; without
        /// it a profile that names one is refused before anything is sent.
        #[arg(long)]
        allow_cmd_grader: bool,
        /// How far `number` may be from the reference and still be correct.
        #[arg(long, default_value_t = 0.0)]
        tolerance: f64,
        /// At most this many generated tokens an answer (`max_tokens`, Ollama's `num_predict`).
        #[arg(long, value_name = "N")]
        max_tokens: Option<u32>,
        /// The model server; default: OLLAMA_HOST, else http://127.0.0.1:11434.
        #[arg(long, value_name = "URL")]
        upstream: Option<String>,
        /// The server's API.
        #[arg(long, value_enum, default_value = "ollama")]
        api: crate::cmd::profile::ask::Api,
        /// At most this many prompts, from the top.
        #[arg(long)]
        max: Option<usize>,
        /// What the evaluation is called in the ledger, where `models --best` compares models
        /// of one evaluation; default: the prompts file's name, with the count under `--max`.
        #[arg(long, value_name = "NAME")]
        eval: Option<String>,
        /// Where records.jsonl and summary.json go; default ./wattbar-profile-MODEL.
        #[arg(long, value_name = "DIR")]
        out: Option<PathBuf>,
        /// How long the idle machine is measured before the first prompt; 0 skips it.
        #[arg(long, default_value = "5s", value_parser = parse_idle)]
        idle: Duration,
        /// How often power is sampled when no running engine measures for us.
        #[arg(long, default_value = "100ms", value_parser = parse_interval)]
        interval: Duration,
        /// Profile once at each setting of KNOB this machine allows, then put it back:
        /// `powermode`, the OS power profile (power-profiles-daemon's; Low Power Mode on macOS);
        /// `rapl-limit`, RAPL's package power limit (Linux, as root), from the limit in force
        /// down to half the package's rated power; `power-limit`, GPU 0's power limit through
        /// NVML (as root), from its default down to its minimum; `clocks`, GPU 0's graphics
        /// clock unlocked, then locked at 85, 70 and 55 % of its highest (as root).
        /// Each step in --out/KNOB-VALUE, the table and the choice in --out/sweep.json.
        #[arg(long, value_enum, value_name = "KNOB")]
        sweep: Option<SweepKnob>,
        /// How the sweep chooses: `slowdown<=P%`, the least energy at most P % slower (output
        /// tokens/s) than the setting it started at.
        #[arg(
            long,
            value_name = "RULE",
            default_value = "slowdown<=5%",
            requires = "sweep"
        )]
        choose: String,
        /// Choose by Zeus's cost instead: η·energy + (1 − η)·max power·time, η from 0 (time
        /// alone) to 1 (energy alone).
        #[arg(long, value_name = "η", requires = "sweep")]
        eta: Option<f64>,
        /// Also give the run's figures as the public leaderboards define them (`standards`: AI
        /// Energy Score, ML.ENERGY, Intelligence per Watt, SCI for AI, MLPerf Power), each with
        /// its scope and bound or why this run cannot give it; written to --out/standards.json.
        #[arg(long, value_enum, value_name = "KIND")]
        report: Option<ProfileReport>,
        /// How long each setting is left to settle before its step.
        #[arg(long, default_value = "2s", value_parser = parse_idle, requires = "sweep")]
        settle: Duration,
    },
    /// Draw the ledger's report: power over the period, energy and cost per day, energy per
    /// token per model. SVG or PNG (at least 1200×600), no system fonts needed.
    Report {
        /// Start: a duration back from now such as 7d or 24h, or Unix seconds.
        #[arg(long, default_value = "7d")]
        from: String,
        /// End: Unix seconds, or `now`.
        #[arg(long, default_value = "now")]
        to: String,
        /// A .svg or .png file, or a folder for both.
        #[arg(long, default_value = "wattbar-report.svg")]
        out: PathBuf,
    },
    /// History from the store: one row per minute or hour with mean and max watts and joules.
    Export {
        /// Start: Unix seconds, or a duration back from now such as 24h or 30m.
        #[arg(long, default_value = "24h")]
        from: String,
        /// End: Unix seconds, or `now`.
        #[arg(long, default_value = "now")]
        to: String,
        #[arg(long, value_enum, default_value = "1m")]
        step: StepArg,
        #[arg(long, value_enum, default_value = "csv")]
        format: ExportFormat,
        /// Only these domains (repeatable): `system` is the headline, others the breakdown
        /// (cpu, gpu, dram, …). Default: the headline and every domain stored.
        #[arg(long = "domain", value_name = "D")]
        domains: Vec<String>,
    },
}

#[derive(clap::Args, Clone)]
pub struct RunArgs {
    /// How often power is sampled when no running engine measures for us (100 ms – 60 s).
    #[arg(long, default_value = "100ms", value_parser = parse_interval)]
    pub interval: Duration,
    /// How long the idle machine is measured before the first run, e.g. 5s; 0 skips it.
    #[arg(long, default_value = "5s", value_parser = parse_idle)]
    pub idle: Duration,
    /// Measured runs of each command.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub runs: u32,
    /// Runs of each command before the measured ones, not counted.
    #[arg(long, default_value_t = 0)]
    pub warmup: u32,
    /// A command given as one shell string, run with `sh -c` (repeatable: commands are
    /// compared side by side).
    #[arg(long = "cmd", value_name = "SHELL")]
    pub cmd: Vec<String>,
    /// Write summary.json, samples.csv, events.jsonl and report.svg into this folder.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// One JSON object on stdout (the summary on stderr stays).
    #[arg(long)]
    pub json: bool,
    /// Wait for the start whose window of the job's length has the lowest mean price
    /// (`cheapest`, by `price_feed`) or grid intensity (`greenest`, by `carbon_feed`).
    #[arg(long, value_enum, value_name = "BY")]
    pub defer: Option<DeferArg>,
    /// How far ahead the job may be put off, e.g. 8h: it ends by then.
    #[arg(long, default_value = "8h", value_parser = parse_positive, requires = "defer",
          allow_hyphen_values = true)]
    pub within: Duration,
    /// How long the job runs, e.g. 30m.
    #[arg(long, value_parser = parse_positive, requires = "defer", conflicts_with = "estimate_from",
          allow_hyphen_values = true)]
    pub duration: Option<Duration>,
    /// How long the job runs, from an earlier run's summary (`run --json` or `--out`'s
    /// summary.json): the mean of its runs.
    #[arg(long, value_name = "SUMMARY", requires = "defer")]
    pub estimate_from: Option<PathBuf>,
    /// Print the start chosen and run nothing.
    #[arg(long, requires = "defer")]
    pub dry_run: bool,
    /// The command and its arguments, run as they are (no shell).
    #[arg(last = true, value_name = "CMD")]
    pub command: Vec<String>,
}

#[cfg(test)]
mod tests;
