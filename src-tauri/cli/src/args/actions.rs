//! The actions of `profile` and `key`, what `profile` sweeps and reports, and the groups `usage`
//! sums by.

use super::*;

/// What `profile` does besides running a profile.
#[derive(Debug, Subcommand)]
pub enum ProfileAction {
    /// Profile runs side by side: accuracy with its 95 % interval (Wilson), J per query, J per
    /// correct answer, correct answers per kJ, inter-token latency, and the efficient front. Runs
    /// of other machines, energy sources or graders are listed apart, never ranked together.
    Compare {
        /// Each run's folder (its `summary.json`).
        #[arg(required = true)]
        dirs: Vec<PathBuf>,
        /// The comparison as JSON.
        #[arg(long)]
        json: bool,
        /// Also draw accuracy against energy per query, with each front, to this SVG file.
        #[arg(long, value_name = "FILE")]
        svg: Option<PathBuf>,
    },
}

#[derive(Debug, Subcommand)]
pub enum KeyCmd {
    /// Make a key; its secret is printed this once.
    Add(AddKey),
    /// Every key, its budget and where it stands; never a secret.
    List,
    /// Remove a key: its secret is refused from now on; its records keep its name.
    Remove { name: String },
    /// Give a key a new secret; the old one is refused from now on.
    Rotate { name: String },
}

#[derive(Debug, clap::Args)]
pub struct AddKey {
    pub name: String,
    /// Energy per UTC window: 50kJ/day, 200Wh/week, 2kWh/month. None: counted, not limited.
    #[arg(long)]
    pub budget: Option<String>,
    /// Money per UTC window in the preferences' currency: 0.50/day. Each request is held and
    /// charged at the price in force when it begins.
    #[arg(long)]
    pub money: Option<String>,
    /// The scope whose joules the budget counts: wall, system or components. None: what each
    /// request measured.
    #[arg(long)]
    pub scope: Option<String>,
    /// Lower a request's max_tokens to what the budget has left, rather than refuse it.
    #[arg(long)]
    pub clamp: bool,
    /// Put NeuralWatt's `: energy` and `: cost` lines in every answer of this key.
    #[arg(long)]
    pub energy_line: bool,
}

/// A usage grouping: day, week, month, key, client, model or all.
pub fn parse_group(text: &str) -> Result<wattbar_engine::store::keys::Group, String> {
    wattbar_engine::store::keys::Group::parse(text)
        .ok_or_else(|| format!("{text:?} is not day, week, month, key, client, model or all"))
}

/// What `profile --report` adds.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum ProfileReport {
    Standards,
}

/// A setting `profile --sweep` turns.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum SweepKnob {
    Powermode,
    RaplLimit,
    PowerLimit,
    Clocks,
}

impl From<SweepKnob> for wattbar_engine::knobs::KnobKind {
    fn from(k: SweepKnob) -> Self {
        match k {
            SweepKnob::Powermode => wattbar_engine::knobs::KnobKind::Powermode,
            SweepKnob::RaplLimit => wattbar_engine::knobs::KnobKind::RaplLimit,
            SweepKnob::PowerLimit => wattbar_engine::knobs::KnobKind::PowerLimit,
            SweepKnob::Clocks => wattbar_engine::knobs::KnobKind::Clocks,
        }
    }
}
