//! `--prometheus`: the fleet as a Prometheus server has it, from the series every Wattbar
//! exports (see docs/api.md), one set of instant queries per refresh.
//!
//! The hosts are the `instance`s that exported `wattbar_low_power_mode` in the last hour: one
//! that stopped answering stays listed, down. Up is Prometheus' own `up`; the age of a host's
//! figures is its sample's age when scraped plus the time since that scrape.

use super::http::{printable, Http};
use super::view::{FleetView, Health, HostRow};
use anyhow::{bail, Context, Result};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::time::Duration;
use wattbar_core::Scope;

pub struct Server {
    base: String,
    http: Http,
}

#[derive(Deserialize)]
struct Answer {
    status: String,
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    data: Option<Data>,
}

#[derive(Deserialize)]
struct Data {
    #[serde(rename = "resultType")]
    result_type: String,
    result: Vec<Series>,
}

/// One instant vector element: its labels and `[time, "value"]`.
#[derive(Deserialize)]
pub struct Series {
    pub metric: BTreeMap<String, String>,
    value: (f64, String),
}

impl Series {
    fn value(&self) -> Option<f64> {
        self.value.1.parse().ok().filter(|v: &f64| v.is_finite())
    }
    fn label(&self, name: &str) -> Option<&str> {
        self.metric
            .get(name)
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    }
    fn instance(&self) -> Option<&str> {
        self.label("instance")
    }
}

/// The queries of one refresh, by what they answer.
const KNOWN: &str = "max by (instance) (last_over_time(wattbar_low_power_mode[1h]))";
const UP: &str = "max by (instance) (up)";
const LOW_POWER: &str = "max by (instance) (wattbar_low_power_mode)";
const WATTS: &str = "wattbar_headline_power_watts";
const AGE: &str = "max by (instance) \
     (time() - timestamp(wattbar_sample_age_seconds) + wattbar_sample_age_seconds)";
/// Today across scopes, as each machine's menu has it: one series per scope, summed.
const TODAY: &str = "sum by (instance) (wattbar_today_energy_joules)";
const COST: &str = "sum by (instance, currency) (wattbar_today_cost)";
/// Programs only: `(idle)`, `(other)`, `(unattributed)` are not programs.
const TOP: &str =
    r#"topk by (instance) (1, rate(wattbar_program_energy_joules_total{program!~"\\(.*\\)"}[1m]))"#;

impl Server {
    pub fn new(url: &str, timeout: Duration) -> Result<Server> {
        let base = url.trim().trim_end_matches('/');
        let shown = wattbar_outbound::shown(base);
        if base.starts_with("https://") {
            bail!("{shown}: https is not supported; reach Prometheus over plain HTTP");
        }
        if !base.starts_with("http://") {
            bail!("{shown}: give the Prometheus server's URL, e.g. http://localhost:9090");
        }
        wattbar_outbound::address(base, "Prometheus", None)?;
        let _: hyper::Uri = format!("{base}/api/v1/query")
            .parse()
            .with_context(|| format!("{shown} is not a URL"))?;
        Ok(Server {
            base: base.to_string(),
            http: Http::new(timeout),
        })
    }

    /// `GET /api/v1/query`: the instant vector `expr` evaluates to now.
    pub async fn query(&self, expr: &str) -> Result<Vec<Series>> {
        let query: String = form_urlencoded::Serializer::new(String::new())
            .append_pair("query", expr)
            .finish();
        let uri: hyper::Uri = format!("{}/api/v1/query?{query}", self.base).parse()?;
        let body =
            self.http.get(&uri).await.with_context(|| {
                format!("Prometheus at {}", wattbar_outbound::shown(&self.base))
            })?;
        let answer: Answer = serde_json::from_slice(&body).with_context(|| {
            format!(
                "{}: not a Prometheus answer",
                wattbar_outbound::shown(&self.base)
            )
        })?;
        match answer.data {
            Some(d) if answer.status == "success" && d.result_type == "vector" => Ok(d.result),
            Some(d) if answer.status == "success" => {
                bail!("{expr}: a {} where a vector was expected", d.result_type)
            }
            _ => bail!(
                "{expr}: {}",
                printable(&answer.error.unwrap_or_else(|| answer.status.clone()))
            ),
        }
    }

    /// The fleet now.
    pub async fn rows(&self, stale: Duration) -> Result<Vec<HostRow>> {
        let (known, up, low_power, watts, age, today, cost, top) = tokio::try_join!(
            self.query(KNOWN),
            self.query(UP),
            self.query(LOW_POWER),
            self.query(WATTS),
            self.query(AGE),
            self.query(TODAY),
            self.query(COST),
            self.query(TOP),
        )?;
        let (up, low_power, watts, age, today, cost, top) = (
            Indexed::new(&up),
            Indexed::new(&low_power),
            Indexed::new(&watts),
            Indexed::new(&age),
            Indexed::new(&today),
            Indexed::new(&cost),
            Indexed::new(&top),
        );
        let mut rows = Vec::new();
        for inst in known.iter().filter_map(Series::instance) {
            let mut row = HostRow::pending(&printable(inst));
            if up.of(inst).and_then(Series::value) != Some(1.0) {
                rows.push(row.down("Prometheus cannot scrape it (up is not 1)".to_string()));
                continue;
            }
            let head = watts.of(inst);
            row.watts = head.and_then(Series::value);
            row.scope = head.and_then(|s| s.label("scope")).and_then(Scope::named);
            row.quality = head
                .and_then(|s| s.label("quality"))
                .and_then(|q| serde_json::from_value(serde_json::json!(q)).ok());
            row.source = head.and_then(|s| s.label("source")).map(printable);
            row.age_seconds = age.of(inst).and_then(Series::value);
            row.today_kwh = today
                .of(inst)
                .and_then(Series::value)
                .map(|j| j / wattbar_core::JOULES_PER_KWH);
            let cost = cost.of(inst);
            row.today_cost = cost.and_then(Series::value);
            row.currency = cost.and_then(|s| s.label("currency")).map(printable);
            row.low_power = low_power.of(inst).and_then(Series::value).map(|v| v > 0.0);
            let top = top.of(inst);
            row.top_program = top.and_then(|s| s.label("program")).map(printable);
            row.top_program_watts = top.and_then(Series::value);
            if row.age_seconds.is_none() {
                row.health = Health::Stale;
                row.reason = Some("Prometheus holds no recent sample".to_string());
                rows.push(row);
            } else {
                rows.push(row.judged(stale));
            }
        }
        Ok(rows)
    }
}

/// One query's series by their `instance`.
struct Indexed<'a> {
    by_instance: BTreeMap<&'a str, &'a Series>,
}

impl<'a> Indexed<'a> {
    fn new(series: &'a [Series]) -> Indexed<'a> {
        Indexed {
            by_instance: series
                .iter()
                .filter_map(|s| Some((s.instance()?, s)))
                .collect(),
        }
    }

    fn of(&self, instance: &str) -> Option<&'a Series> {
        self.by_instance.get(instance).copied()
    }
}

/// Queries the server every `interval` and calls `show` with the view until it says stop. A
/// refresh Prometheus cannot answer is an error: the view would be empty, not down.
pub async fn run(
    server: &Server,
    interval: Duration,
    stale: Duration,
    show: &mut impl FnMut(&FleetView) -> Result<bool>,
) -> Result<()> {
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let rows = server.rows(stale).await?;
        if !show(&FleetView::new(rows, wattbar_engine::unix_now()))? {
            return Ok(());
        }
    }
}
