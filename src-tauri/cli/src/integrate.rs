//! `wattbar-cli integrate FILE`: energy of a recorded CSV.
//!
//! Header `t,watts` (power samples, trapezoid rule with the 10 s gap policy) or `t,joules`
//! (an energy counter: deltas, with resets adding nothing), with an optional `domain` column;
//! each domain is integrated on its own and the results added. `t` is in seconds.
//!
//! Limits: the file is read through the 64 MiB reader of files given on the command line; at
//! most [`MAX_DOMAINS`] domains (each holds an integrator); every gap is counted, the first
//! [`MAX_LISTED_GAPS`] (by time) are listed.

use serde::Serialize;
use std::collections::BTreeMap;
use std::time::Duration;
use wattbar_core::counter::CounterIntegrator;
use wattbar_core::energy::MAX_LISTED_GAPS;
use wattbar_core::{Gap, Integrator, Joules, Watts};

/// The most domains one file may name.
pub const MAX_DOMAINS: usize = 1_000;

#[derive(Debug, Serialize)]
pub struct Report {
    pub joules: f64,
    pub kwh: f64,
    /// The first [`MAX_LISTED_GAPS`] gaps by time.
    pub gaps: Vec<Gap>,
    /// Every gap, listed or not.
    pub gap_count: usize,
    pub samples: usize,
}

enum Kind {
    Watts,
    Joules,
}

enum Acc {
    Power(Integrator),
    Counter(CounterIntegrator),
}

pub fn integrate(text: &str) -> Result<Report, String> {
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .trim(csv::Trim::All)
        .flexible(true)
        .from_reader(text.as_bytes());
    let line_of = |p: Option<&csv::Position>| p.map_or(0, csv::Position::line);
    let mut records = reader.records();
    let header = match records.next() {
        None => return Err("line 1: the file is empty".into()),
        Some(Err(e)) => return Err(format!("line {}: {e}", line_of(e.position()))),
        Some(Ok(h)) => h,
    };
    let cols: Vec<&str> = header.iter().collect();
    let find = |n: &str| cols.iter().position(|c| *c == n);
    let t_col = find("t").ok_or("line 1: the header has no `t` column")?;
    let (v_col, kind) = match (find("watts"), find("joules")) {
        (Some(c), None) => (c, Kind::Watts),
        (None, Some(c)) => (c, Kind::Joules),
        _ => return Err("line 1: the header needs exactly one of `watts` or `joules`".into()),
    };
    let d_col = find("domain");
    let mut domains: BTreeMap<String, Acc> = BTreeMap::new();
    let mut samples = 0;
    for record in records {
        let record = record.map_err(|e| format!("line {}: {e}", line_of(e.position())))?;
        let n = line_of(record.position());
        let cells: Vec<&str> = record.iter().collect();
        if cells.len() != cols.len() {
            return Err(format!(
                "line {n}: {} cells where the header has {}",
                cells.len(),
                cols.len()
            ));
        }
        let at = cells[t_col]
            .parse::<f64>()
            .ok()
            .and_then(|t| Duration::try_from_secs_f64(t).ok())
            .ok_or_else(|| format!("line {n}: t {:?} is not a number of seconds", cells[t_col]))?;
        let raw = cells[v_col];
        let value: Option<f64> = match raw {
            "" => None,
            v => Some(
                v.parse()
                    .map_err(|_| format!("line {n}: {raw:?} is not a number"))?,
            ),
        };
        let domain = d_col.map(|c| cells[c]).unwrap_or("system").to_string();
        if domains.len() >= MAX_DOMAINS && !domains.contains_key(&domain) {
            return Err(format!(
                "line {n}: more than {MAX_DOMAINS} domains; integrate them in parts"
            ));
        }
        let acc = domains.entry(domain).or_insert_with(|| match kind {
            Kind::Watts => Acc::Power(Integrator::default()),
            Kind::Joules => Acc::Counter(CounterIntegrator::new()),
        });
        match acc {
            Acc::Power(i) => {
                i.push(at, value.map(Watts));
            }
            Acc::Counter(c) => {
                if let Some(v) = value {
                    c.push(at, Joules(v));
                }
            }
        }
        samples += 1;
    }
    let mut joules = 0.0;
    let mut gaps = Vec::new();
    let mut gap_count = 0;
    for acc in domains.values() {
        match acc {
            Acc::Power(i) => {
                joules += i.total().0;
                gap_count += i.gap_count();
                gaps.extend_from_slice(i.gaps());
                gaps.sort_by(|a, b| a.from.total_cmp(&b.from));
                gaps.truncate(MAX_LISTED_GAPS);
            }
            Acc::Counter(c) => joules += c.total().0,
        }
    }
    Ok(Report {
        joules,
        kwh: Joules(joules).kwh(),
        gaps,
        gap_count,
        samples,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn three_hundred_watts_for_ten_minutes_is_a_twentieth_of_a_kwh() {
        let mut csv = String::from("t,watts\n");
        for t in 0..=600 {
            csv.push_str(&format!("{t},300\n"));
        }
        let r = integrate(&csv).unwrap_or_else(|e| panic!("{e}"));
        assert!((r.joules - 180_000.0).abs() < 1e-6);
        assert!((r.kwh - 0.05).abs() < 1e-12);
        assert_eq!(r.samples, 601);
        assert!(r.gaps.is_empty());
    }

    #[test]
    fn a_30_second_gap_is_reported_and_adds_nothing() {
        let r = integrate("t,watts\n0,10\n1,10\n31,10\n32,10\n").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(r.joules, 20.0);
        assert_eq!(r.gaps.len(), 1);
        assert_eq!((r.gaps[0].from, r.gaps[0].seconds), (1.0, 30.0));
    }

    #[test]
    fn counters_give_deltas_per_domain_and_resets_add_nothing() {
        let r = integrate(
            "t,joules,domain\n0,100,cpu\n0,5,gpu\n1,160,cpu\n1,25,gpu\n2,10,cpu\n3,30,cpu\n",
        )
        .unwrap_or_else(|e| panic!("{e}"));
        // cpu: 60, then a reset, then 20; gpu: 20.
        assert_eq!(r.joules, 100.0);
    }

    #[test]
    fn a_non_numeric_row_is_an_error_naming_its_line() {
        assert_eq!(
            integrate("t,watts\n0,1\n1,abc\n").err().as_deref(),
            Some("line 3: \"abc\" is not a number")
        );
        assert!(integrate("time,watts\n").is_err());
        assert!(integrate("t,watts,joules\n").is_err());
    }

    #[test]
    fn a_time_beyond_any_clock_is_an_error_not_a_panic() {
        for t in ["1e20", "-1", "NaN", "inf"] {
            let err = integrate(&format!("t,watts\n0,10\n{t},10\n")).err();
            assert_eq!(
                err.as_deref(),
                Some(format!("line 3: t {t:?} is not a number of seconds").as_str())
            );
        }
    }

    #[test]
    fn every_gap_is_counted_and_the_first_thousand_listed() {
        // 1,501 samples 30 s apart: 1,500 gaps.
        let mut csv = String::from("t,watts\n");
        for k in 0..=1_500 {
            csv.push_str(&format!("{},5\n", k * 30));
        }
        let r = integrate(&csv).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((r.gap_count, r.gaps.len()), (1_500, MAX_LISTED_GAPS));
        assert_eq!(r.gaps[0].from, 0.0);
    }

    #[test]
    fn a_file_naming_more_than_a_thousand_domains_is_refused_at_the_line_that_does() {
        let mut csv = String::from("t,joules,domain\n");
        for k in 0..=MAX_DOMAINS {
            csv.push_str(&format!("0,1,d{k}\n"));
        }
        assert_eq!(
            integrate(&csv).err().as_deref(),
            Some("line 1002: more than 1000 domains; integrate them in parts")
        );
    }
}
