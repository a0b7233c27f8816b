//! `GET /metrics`: the published state, made with `prometheus-client`, in the format the scraper
//! asks for: OpenMetrics when its `Accept` names `application/openmetrics-text` (Prometheus does),
//! else the classic Prometheus text format (what `promtool check metrics`, curl and most other
//! tools read).
//!
//! Rules: a value nobody measured is left out, never exported as 0 (a source that cannot read
//! shows as `wattbar_source_up 0`, with no power series). Every lifetime counter (energy, cost,
//! inference) is what the store committed ([`wattbar_engine::recorder::committed`]): it moves with
//! each batch, survives kill -9, restarts and session resets, and never goes back, so
//! `increase()` over a crash is never more than was drawn. What was measured since the last batch
//! is the gauge `wattbar_energy_unwritten_joules`. Cost is one series per currency: money in two
//! currencies is never added; and money is two counters, `wattbar_cost_total` (paid) and
//! `wattbar_credit_total` (credited at negative prices), with the net as a gauge, so that a
//! negative hour never lowers a counter.
//! A registry is built per scrape from one `PublishedState`, so a scrape is one consistent moment.
//! Every label value is escaped as both formats require ([`Text`]): a model or program name is
//! whatever its owner chose, and one bad name must not break the whole scrape.

use prometheus_client::encoding::text::encode;
use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue, LabelValueEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::{Registry, Unit};
use std::fmt::Write;
use std::sync::atomic::AtomicU64;
use wattbar_core::{Coverage, Domain, Scope};
use wattbar_engine::PublishedState;

mod battery;
pub mod documented;
mod inference;
mod keys;
mod prices;

/// The counters that count since this process started, not over the store's life: its CPU time,
/// its sources' reads, the energy per program and its own. Each starts again from 0 when the
/// process does, as every `process_cpu_seconds_total` does, and Prometheus reads that as the
/// reset it is. Every other `_total` series here is a lifetime counter, committed by the store,
/// and never goes back ([`wattbar_engine::recorder::committed`]); `cli/tests/counters.rs` holds
/// every series it finds to that rule unless it is named here.
pub const SINCE_START_COUNTERS: [&str; 5] = [
    "wattbar_self_cpu_seconds_total",
    "wattbar_source_reads_total",
    "wattbar_source_read_seconds_total",
    "wattbar_program_energy_joules_total",
    "wattbar_self_energy_joules_total",
];

/// The media type of what [`render`] returns.
pub const OPENMETRICS_CONTENT_TYPE: &str =
    "application/openmetrics-text; version=1.0.0; charset=utf-8";
/// The media type of [`to_prometheus_text`]'s output.
pub const TEXT_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Rewrites OpenMetrics text into the classic Prometheus format: a counter's HELP and TYPE name
/// its `_total` series, and the `# UNIT` and `# EOF` lines go.
pub fn to_prometheus_text(openmetrics: &str) -> String {
    let counters: std::collections::HashSet<&str> = openmetrics
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.strip_suffix(" counter"))
        .collect();
    let mut out = String::with_capacity(openmetrics.len());
    for line in openmetrics.lines() {
        if line.starts_with("# UNIT ") || line == "# EOF" {
            continue;
        }
        let meta = ["# HELP ", "# TYPE "]
            .into_iter()
            .find_map(|p| line.strip_prefix(p).map(|rest| (p, rest)));
        match meta {
            Some((prefix, rest)) => {
                let (name, tail) = rest.split_once(' ').unwrap_or((rest, ""));
                if counters.contains(name) {
                    out.push_str(&format!("{prefix}{name}_total {tail}"));
                } else {
                    out.push_str(line);
                }
            }
            None => out.push_str(line),
        }
        out.push('\n');
    }
    out
}

/// The process's own cost, when it could be read.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SelfUsage {
    pub cpu_seconds: f64,
    /// Resident on Linux; on macOS the physical footprint (`ri_phys_footprint`).
    pub resident_bytes: u64,
}

/// A label value as the exposition formats require it: `\\`, `"` and a line feed escaped
/// (`prometheus-client` writes values as they are). Other control characters have no escape and
/// some parsers end a value at NUL, so they become U+FFFD; two names that then read the same are
/// one series, their counters added.
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
struct Text(String);

impl Text {
    fn new(s: impl AsRef<str>) -> Text {
        Text(
            s.as_ref()
                .chars()
                .map(|c| {
                    if c.is_control() && c != '\n' {
                        char::REPLACEMENT_CHARACTER
                    } else {
                        c
                    }
                })
                .collect(),
        )
    }
}

impl EncodeLabelValue for Text {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> Result<(), std::fmt::Error> {
        for c in self.0.chars() {
            match c {
                '\\' => encoder.write_str("\\\\")?,
                '"' => encoder.write_str("\\\"")?,
                '\n' => encoder.write_str("\\n")?,
                c => encoder.write_char(c)?,
            }
        }
        Ok(())
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PowerLabels {
    domain: Text,
    device: Text,
    source: Text,
    quality: Text,
    /// What the figure covers: `wall`, `system` or `components` (see wattbar_core::Scope).
    scope: Text,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ScopeLabels {
    /// What the headline the gap is taken from covers.
    scope: Text,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct EnergyLabels {
    /// `system` for the headline, else the breakdown's domain.
    domain: Text,
    /// What the energy covers; empty for the headline's energy recorded before scopes were.
    scope: Text,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CostLabels {
    currency: Text,
    scope: Text,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct HeadlineLabels {
    source: Text,
    quality: Text,
    scope: Text,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SourceLabels {
    source: Text,
}

type GaugeF = Gauge<f64, AtomicU64>;
type CounterF = Counter<f64, AtomicU64>;

fn label(s: impl AsRef<str>) -> Text {
    Text::new(s)
}

/// The exposition for one published state at `now_unix`.
pub fn render(p: &PublishedState, now_unix: f64, usage: Option<SelfUsage>) -> String {
    let mut registry = Registry::default();

    let power = Family::<PowerLabels, GaugeF>::default();
    registry.register_with_unit(
        "wattbar_power",
        "Power drawn now, per domain, device and source; absent when not measured",
        Unit::Other("watts".into()),
        power.clone(),
    );
    if let Some(snapshot) = &p.snapshot {
        let headline_scope = snapshot.coverage().map(|c| c.scope);
        let readings = snapshot
            .breakdown
            .iter()
            .map(|r| {
                let scope = wattbar_core::Coverage::of_domain(r.domain, r.device.as_deref()).scope;
                (r, Some(scope))
            })
            .chain(
                // A headline summed from components is not among the readings: export it too,
                // with the scope of what it sums.
                snapshot
                    .headline
                    .iter()
                    .filter(|h| !snapshot.breakdown.contains(h))
                    .map(|h| (h, headline_scope)),
            );
        for (r, scope) in readings {
            if let Some(w) = r.watts.filter(|w| w.0.is_finite()) {
                power
                    .get_or_create(&PowerLabels {
                        domain: label(r.domain.as_str()),
                        device: label(r.device.as_deref().unwrap_or_default()),
                        source: label(&r.source),
                        quality: label(r.quality.as_str()),
                        scope: label(wattbar_core::Scope::label(scope)),
                    })
                    .set(w.0);
            }
        }
    }

    let gap = Family::<ScopeLabels, GaugeF>::default();
    registry.register_with_unit(
        "wattbar_scope_gap",
        "The wall meter's watts less the machine's own sensors' (labelled with their scope), while both read: what the sensors miss",
        Unit::Other("watts".into()),
        gap.clone(),
    );
    if let Some((wall, sensors, coverage)) = p.snapshot.as_ref().and_then(|s| s.wall_and_sensors())
    {
        let difference = wall.0 - sensors.0;
        if difference.is_finite() {
            gap.get_or_create(&ScopeLabels {
                scope: label(coverage.scope.as_str()),
            })
            .set(difference);
        }
    }

    let energy = Family::<EnergyLabels, CounterF>::default();
    registry.register_with_unit(
        "wattbar_energy",
        "Lifetime energy as the store committed it, one series per scope (domain system is the \
         headline); never decreases, a crash included",
        Unit::Joules,
        energy.clone(),
    );
    let committed = &p.kept.committed;
    let headline = committed
        .by_scope
        .iter()
        .map(|(scope, joules)| ("system", scope.map_or("", Scope::as_str), *joules));
    let parts = committed.by_domain.iter().map(|(domain, joules)| {
        let scope = Domain::named(domain).map(|d| Coverage::of_domain(d, None).scope);
        (domain.as_str(), scope.map_or("", Scope::as_str), *joules)
    });
    for (domain, scope, joules) in headline.chain(parts) {
        if joules.is_finite() && joules >= 0.0 {
            energy
                .get_or_create(&EnergyLabels {
                    domain: label(domain),
                    scope: label(scope),
                })
                .inc_by(joules);
        }
    }

    let unwritten = GaugeF::default();
    registry.register_with_unit(
        "wattbar_energy_unwritten",
        "The headline's energy measured since the store's last batch: not yet in \
         wattbar_energy_joules_total, lost if the process dies now",
        Unit::Joules,
        unwritten.clone(),
    );
    if p.kept.unwritten_joules.is_finite() && !committed.by_scope.is_empty() {
        unwritten.set(p.kept.unwritten_joules);
    }
    if let Some(records) = p.kept.unwritten_records {
        let unwritten_records = GaugeF::default();
        registry.register(
            "wattbar_inference_unwritten_records",
            "Inference records settled since the store's last batch: not yet in the \
             wattbar_inference_*_total counters, lost if the process dies now",
            unwritten_records.clone(),
        );
        unwritten_records.set(records as f64);
    }

    // Money as two counters that never go back, whatever a price's sign: what was paid and
    // what was credited; their difference is the gauge `wattbar_cost_net`.
    let cost = Family::<CostLabels, CounterF>::default();
    registry.register(
        "wattbar_cost",
        "Lifetime money paid for the headline's energy (the parts priced above 0), per currency \
         and scope, as the store committed it; never goes back",
        cost.clone(),
    );
    let credit = Family::<CostLabels, CounterF>::default();
    registry.register(
        "wattbar_credit",
        "Lifetime money credited for the headline's energy (the parts priced below 0, as a \
         positive amount), per currency and scope, as the store committed it; never goes back",
        credit.clone(),
    );
    let net = Family::<CostLabels, GaugeF>::default();
    registry.register(
        "wattbar_cost_net",
        "Lifetime net cost of the headline's energy (paid less credited): below 0 where \
         negative prices outweigh",
        net.clone(),
    );
    if committed.since_unix.is_some() {
        for c in &committed.costs {
            let labels = CostLabels {
                currency: label(&c.currency),
                scope: label(c.scope.map_or("", Scope::as_str)),
            };
            if c.paid.is_finite() && c.credit.is_finite() {
                cost.get_or_create(&labels).inc_by(c.paid.max(0.0));
                credit.get_or_create(&labels).inc_by(c.credit.max(0.0));
            }
        }
    }
    if let Some(lifetime) = &committed.lifetime {
        for (scope, currency, _, amount) in lifetime.rows() {
            if amount.is_finite() {
                let money = net.get_or_create(&CostLabels {
                    currency: label(&currency),
                    scope: label(scope.map_or("", Scope::as_str)),
                });
                money.set(money.get() + amount);
            }
        }
    }

    // The headline and today's figures, as the menu shows them: a fleet view reads one series
    // per machine instead of choosing among the readings.
    let headline = Family::<HeadlineLabels, GaugeF>::default();
    registry.register_with_unit(
        "wattbar_headline_power",
        "The headline, what the menu bar shows: the best source's watts; absent when nothing \
         could be read",
        Unit::Other("watts".into()),
        headline.clone(),
    );
    if let Some(snapshot) = &p.snapshot {
        let head = snapshot.headline.as_ref();
        if let Some((h, w)) = head.and_then(|h| h.watts.map(|w| (h, w.0))) {
            if w.is_finite() {
                headline
                    .get_or_create(&HeadlineLabels {
                        source: label(&h.source),
                        quality: label(h.quality.as_str()),
                        scope: label(snapshot.coverage().map_or("", |c| c.scope.as_str())),
                    })
                    .set(w);
            }
        }
    }
    let today_energy = Family::<ScopeLabels, GaugeF>::default();
    registry.register_with_unit(
        "wattbar_today_energy",
        "The headline's energy today (this machine's calendar day) from the store, as of its \
         last batch, one series per scope it was measured in (their sum is the menu's Today); \
         starts again from 0 at midnight",
        Unit::Joules,
        today_energy.clone(),
    );
    let today_cost = Family::<CostLabels, GaugeF>::default();
    registry.register(
        "wattbar_today_cost",
        "The cost of today's energy at the prices in force, from the store",
        today_cost.clone(),
    );
    if let Some(today) = p.kept.totals.as_ref().map(|t| &t.today) {
        // The headline's own row is always there, 0 included; another scope's where it holds
        // energy (a row of money in another currency holds none).
        for (scope, currency, joules, cost) in today.rows() {
            let own = scope == today.scope && currency == today.currency;
            let scope = label(scope.map_or("", Scope::as_str));
            if joules.is_finite() && (joules > 0.0 || own) {
                let energy = today_energy.get_or_create(&ScopeLabels {
                    scope: scope.clone(),
                });
                energy.set(energy.get() + joules.max(0.0));
            }
            if cost.is_finite() {
                let money = today_cost.get_or_create(&CostLabels {
                    currency: label(&currency),
                    scope,
                });
                money.set(money.get() + cost);
            }
        }
    }

    let low_power = Gauge::<i64>::default();
    low_power.set(i64::from(p.low_power.state.enabled));
    registry.register(
        "wattbar_low_power_mode",
        "1 while low-power mode is on",
        low_power,
    );

    if let Some(snapshot) = &p.snapshot {
        let age = GaugeF::default();
        age.set((now_unix - snapshot.at.unix_seconds).max(0.0));
        registry.register_with_unit(
            "wattbar_sample_age",
            "Time since the last sample",
            Unit::Seconds,
            age,
        );
    }

    let up = Family::<SourceLabels, Gauge<i64>>::default();
    registry.register(
        "wattbar_source_up",
        "1 when the source gave a reading or answered at the last sample, 0 when it could not",
        up.clone(),
    );
    for id in &p.sources.ids {
        let down = p
            .snapshot
            .as_ref()
            .is_none_or(|s| s.unavailable.iter().any(|u| &u.source == id));
        up.get_or_create(&SourceLabels { source: label(id) })
            .set(i64::from(!down));
    }

    let reads = Family::<SourceLabels, Counter>::default();
    registry.register(
        "wattbar_source_reads",
        "Reads of each source since start: a source standing by is not read",
        reads.clone(),
    );
    let read_time = Family::<SourceLabels, CounterF>::default();
    registry.register_with_unit(
        "wattbar_source_read",
        "Time spent in each source's reads since start (a source that samples in its own \
         thread is counted here only for taking its latest result)",
        Unit::Seconds,
        read_time.clone(),
    );
    for c in p.sources.reads.iter() {
        let labels = SourceLabels {
            source: label(&c.id),
        };
        reads.get_or_create(&labels).inc_by(c.reads());
        read_time.get_or_create(&labels).inc_by(c.seconds());
    }

    inference::inference(&mut registry, p);
    keys::keys(&mut registry, p);
    prices::prices(&mut registry, p);
    battery::battery(&mut registry, p);

    if let Some(u) = usage {
        let cpu = CounterF::default();
        cpu.inc_by(u.cpu_seconds.max(0.0));
        registry.register_with_unit(
            "wattbar_self_cpu",
            "CPU time used by Wattbar itself",
            Unit::Seconds,
            cpu,
        );
        let rss = Gauge::<i64>::default();
        rss.set(i64::try_from(u.resident_bytes).unwrap_or(i64::MAX));
        registry.register_with_unit(
            "wattbar_self_resident",
            "Memory of Wattbar itself: resident on Linux, the physical footprint (what Activity \
             Monitor shows) on macOS",
            Unit::Bytes,
            rss,
        );
    }

    let mut out = String::new();
    if let Err(e) = encode(&mut out, &registry) {
        tracing::error!("could not encode metrics: {e}");
    }
    out
}
