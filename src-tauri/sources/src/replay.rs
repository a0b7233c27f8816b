//! Replay: a recorded trace stands in for the whole chain (`WATTBAR_REPLAY=trace.csv`).
//!
//! The CSV has a header with `t` (seconds) and `watts`, and optionally `domain` and `quality`
//! columns, and a laptop's supply: `on_battery` (`1` on its battery, `0` on mains) and
//! `battery_design_wh` (its battery's design energy), in any order; an empty cell of either is
//! not known. Rows are sorted by `t`. An empty `watts` cell is an absent reading.
//! The trace plays in real time from the source's first read and loops; each loop lasts from the
//! first `t` to the last plus the last step, so the last row gets its own interval. At each read
//! the replay gives the latest row at or before the current position, as a sensor would.

use crate::error::Error;
use std::sync::Arc;
use std::time::Duration;
use wattbar_core::battery::{Cycles, Health, Raw};
use wattbar_core::{Domain, Quality, Reading, Source, Stamp, Watts};

pub const SOURCE_ID: &str = "replay";

#[derive(Debug, Clone, PartialEq)]
pub struct TraceRow {
    pub t: f64,
    pub watts: Option<Watts>,
    pub domain: Domain,
    pub quality: Quality,
    /// The supply: on the battery (`true`) or mains; `None` without one.
    pub on_battery: Option<bool>,
    /// The battery's design energy, Wh.
    pub battery_design_wh: Option<f64>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Trace {
    rows: Vec<TraceRow>,
    period: f64,
}

fn parse_err(line: usize, message: String) -> Error {
    Error::Parse {
        what: "replay trace",
        line: Some(line),
        message,
    }
}

fn csv_err(e: &csv::Error) -> Error {
    let line = e.position().map_or(0, |p| p.line() as usize);
    parse_err(line, e.to_string())
}

fn parse_domain(s: &str) -> Option<Domain> {
    Some(match s {
        "system" => Domain::System,
        "cpu" => Domain::Cpu,
        "gpu" => Domain::Gpu,
        "ane" => Domain::Ane,
        "dram" => Domain::Dram,
        "soc" => Domain::Soc,
        "battery" => Domain::Battery,
        "adapter" => Domain::Adapter,
        "platform" => Domain::Platform,
        _ => return None,
    })
}

fn parse_quality(s: &str) -> Option<Quality> {
    Some(match s {
        "measured" => Quality::Measured,
        "estimated" => Quality::Estimated,
        "heuristic" => Quality::Heuristic,
        _ => return None,
    })
}

/// Parses a replay CSV (RFC 4180, through the `csv` crate; `#` starts a comment line). Errors
/// name the line.
pub fn parse_trace(text: &str) -> Result<Trace, Error> {
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .comment(Some(b'#'))
        .trim(csv::Trim::All)
        .flexible(true)
        .from_reader(text.as_bytes());
    let line_of = |r: &csv::StringRecord| r.position().map_or(0, |p| p.line() as usize);
    let mut records = reader.records();
    let header = match records.next() {
        None => return Err(parse_err(1, "the trace is empty".into())),
        Some(Err(e)) => return Err(csv_err(&e)),
        Some(Ok(h)) => h,
    };
    let hline = line_of(&header);
    let cols: Vec<&str> = header.iter().collect();
    let find = |name: &str| cols.iter().position(|c| *c == name);
    let t_col = find("t").ok_or_else(|| parse_err(hline, "the header has no `t` column".into()))?;
    let w_col =
        find("watts").ok_or_else(|| parse_err(hline, "the header has no `watts` column".into()))?;
    let d_col = find("domain");
    let q_col = find("quality");
    let b_col = find("on_battery");
    let design_col = find("battery_design_wh");

    let mut rows: Vec<TraceRow> = Vec::new();
    for record in records {
        let record = record.map_err(|e| csv_err(&e))?;
        let n = line_of(&record);
        let cells: Vec<&str> = record.iter().collect();
        if cells.len() != cols.len() {
            return Err(parse_err(
                n,
                format!("{} cells where the header has {}", cells.len(), cols.len()),
            ));
        }
        let t: f64 = cells[t_col]
            .parse()
            .ok()
            .filter(|t: &f64| t.is_finite())
            .ok_or_else(|| parse_err(n, format!("t {:?} is not a number", cells[t_col])))?;
        let watts = match cells[w_col] {
            "" => None,
            w => Some(
                w.parse::<f64>()
                    .ok()
                    .filter(|w| w.is_finite() && *w >= 0.0)
                    .map(Watts)
                    .ok_or_else(|| {
                        parse_err(n, format!("watts {w:?} is not a non-negative number"))
                    })?,
            ),
        };
        let domain = match d_col.map(|c| cells[c]) {
            None | Some("") => Domain::System,
            Some(d) => {
                parse_domain(d).ok_or_else(|| parse_err(n, format!("unknown domain {d:?}")))?
            }
        };
        let quality = match q_col.map(|c| cells[c]) {
            None | Some("") => Quality::Measured,
            Some(q) => {
                parse_quality(q).ok_or_else(|| parse_err(n, format!("unknown quality {q:?}")))?
            }
        };
        let on_battery = match b_col.map(|c| cells[c]) {
            None | Some("") => None,
            Some("1") => Some(true),
            Some("0") => Some(false),
            Some(b) => return Err(parse_err(n, format!("on_battery {b:?} is not 0 or 1"))),
        };
        let battery_design_wh = match design_col.map(|c| cells[c]) {
            None | Some("") => None,
            Some(d) => Some(
                d.parse::<f64>()
                    .ok()
                    .filter(|d| d.is_finite() && *d > 0.0)
                    .ok_or_else(|| {
                        parse_err(
                            n,
                            format!("battery_design_wh {d:?} is not a positive number"),
                        )
                    })?,
            ),
        };
        if let Some(prev) = rows.last() {
            if t < prev.t {
                return Err(parse_err(n, format!("t {t} goes back before {}", prev.t)));
            }
        }
        rows.push(TraceRow {
            t,
            watts,
            domain,
            quality,
            on_battery,
            battery_design_wh,
        });
    }
    let (first, last) = match (rows.first(), rows.last()) {
        (Some(f), Some(l)) => (f.t, l.t),
        _ => return Err(parse_err(hline, "the trace has no rows".into())),
    };
    let distinct: Vec<f64> = {
        let mut ts: Vec<f64> = rows.iter().map(|r| r.t).collect();
        ts.dedup();
        ts
    };
    let last_step = match distinct.as_slice() {
        [.., a, b] => b - a,
        _ => 1.0,
    };
    Ok(Trace {
        period: (last - first) + last_step,
        rows,
    })
}

impl Trace {
    pub fn rows(&self) -> &[TraceRow] {
        &self.rows
    }

    /// Length of one loop in seconds.
    pub fn period(&self) -> f64 {
        self.period
    }

    /// The rows in force `elapsed` after the start of playback (one per domain at that `t`).
    pub fn at(&self, elapsed: Duration) -> Vec<&TraceRow> {
        let first = self.rows.first().map(|r| r.t).unwrap_or(0.0);
        let pos = first + elapsed.as_secs_f64() % self.period;
        let idx = self.rows.partition_point(|r| r.t <= pos);
        let Some(current) = idx.checked_sub(1).and_then(|i| self.rows.get(i)) else {
            return Vec::new();
        };
        self.rows.iter().filter(|r| r.t == current.t).collect()
    }
}

/// Plays a [`Trace`] in real time, looping.
pub struct ReplaySource {
    trace: Trace,
    start: Option<Duration>,
    /// The supply at the last read, where the trace gives it.
    battery: Option<wattbar_core::Battery>,
    /// The battery's health at the last read; the same `Arc` while its design holds.
    health: Option<Arc<[Health]>>,
}

impl ReplaySource {
    pub fn new(trace: Trace) -> Self {
        ReplaySource {
            trace,
            start: None,
            battery: None,
            health: None,
        }
    }

    /// The replayed battery: `BAT0` of the row's design energy, full as designed, cycles not
    /// reported.
    fn follow_supply(&mut self, row: Option<&TraceRow>) {
        self.battery = row
            .and_then(|r| r.on_battery)
            .map(|on_battery| wattbar_core::Battery {
                on_battery,
                percent: None,
            });
        let design = row.and_then(|r| r.battery_design_wh);
        let kept = self
            .health
            .as_deref()
            .and_then(|h| h.first())
            .and_then(|h| h.design);
        if design.map(|wh| wh * wattbar_core::battery::JOULES_PER_WH) != kept.map(|j| j.0) {
            self.health = design.map(|wh| {
                let raw = Raw::Energy {
                    design_wh: Some(wh),
                    full_wh: Some(wh),
                };
                Arc::from(vec![Health::from_raw("BAT0", raw, Cycles::NotReported)])
            });
        }
    }
}

impl Source for ReplaySource {
    fn id(&self) -> &str {
        SOURCE_ID
    }

    fn quality(&self) -> Quality {
        Quality::Measured
    }

    fn read(&mut self, at: Stamp) -> Result<Vec<Reading>, wattbar_core::Error> {
        let start = *self.start.get_or_insert(at.monotonic);
        let elapsed = at.monotonic.saturating_sub(start);
        let rows = self.trace.at(elapsed);
        let supply = rows.first().map(|r| (*r).clone());
        let readings = rows
            .into_iter()
            .map(|row| Reading {
                domain: row.domain,
                device: None,
                watts: row.watts,
                energy_counter: None,
                source: SOURCE_ID.to_string(),
                quality: row.quality,
                at,
            })
            .collect();
        self.follow_supply(supply.as_ref());
        Ok(readings)
    }

    fn battery(&self) -> Option<wattbar_core::Battery> {
        self.battery
    }

    fn battery_health(&self) -> Option<Arc<[Health]>> {
        self.health.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trace(text: &str) -> Trace {
        parse_trace(text).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn a_replayed_laptop_says_its_supply_and_its_batterys_design() {
        let mut source = ReplaySource::new(trace(
            "t,watts,on_battery,battery_design_wh\n0,20,0,70\n10,20,1,70\n",
        ));
        let _ = source.read(Stamp::new(Duration::from_secs(1), 0.0));
        assert_eq!(source.battery().map(|b| b.on_battery), Some(false));
        let first = source.battery_health();
        let _ = source.read(Stamp::new(Duration::from_secs(11), 0.0));
        assert_eq!(source.battery().map(|b| b.on_battery), Some(true));
        // 70 Wh = 252,000 J, the same Arc while the design holds.
        let h = source
            .battery_health()
            .unwrap_or_else(|| panic!("no health"));
        assert_eq!(h[0].design.map(|j| j.0), Some(252_000.0));
        assert!(first.is_some_and(|f| Arc::ptr_eq(&f, &h)));
        let bad = parse_trace("t,watts,on_battery\n0,20,yes\n").err();
        assert!(bad.is_some_and(|e| e.to_string().contains("on_battery \"yes\" is not 0 or 1")));
    }

    fn watts_at(source: &mut ReplaySource, secs: f64) -> Option<f64> {
        source
            .read(Stamp::new(Duration::from_secs_f64(secs), 0.0))
            .unwrap_or_default()
            .first()
            .and_then(|r| r.watts)
            .map(|w| w.0)
    }

    #[test]
    fn a_trace_plays_in_real_time_and_loops() {
        let mut s = ReplaySource::new(trace("t,watts\n0,10\n1,20\n2,30\n"));
        assert_eq!(watts_at(&mut s, 100.0), Some(10.0));
        assert_eq!(watts_at(&mut s, 100.5), Some(10.0));
        assert_eq!(watts_at(&mut s, 101.0), Some(20.0));
        assert_eq!(watts_at(&mut s, 102.9), Some(30.0));
        assert_eq!(watts_at(&mut s, 103.0), Some(10.0));
        assert_eq!(watts_at(&mut s, 104.2), Some(20.0));
    }

    #[test]
    fn optional_columns_set_domain_and_quality() {
        let t = trace("quality,t,domain,watts\nestimated,0,cpu,5\nheuristic,0,gpu,\n");
        let rows = t.at(Duration::ZERO);
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].domain, Domain::Cpu);
        assert_eq!(rows[0].quality, Quality::Estimated);
        assert_eq!(rows[1].watts, None);
    }

    #[test]
    fn a_bad_row_is_an_error_naming_its_line() {
        let err = parse_trace("t,watts\n0,1\n1,lots\n")
            .err()
            .map(|e| e.to_string());
        assert_eq!(
            err.as_deref(),
            Some("replay trace line 3: watts \"lots\" is not a non-negative number")
        );
        assert!(parse_trace("t,watts\n0,-4\n").is_err());
        assert!(parse_trace("t,watts\n0,NaN\n").is_err());
        assert!(parse_trace("time,power\n0,1\n").is_err());
        assert!(parse_trace("t,watts\n").is_err());
        assert!(parse_trace("t,watts\n2,1\n1,1\n").is_err());
        assert!(parse_trace("t,watts\n0,1,2\n").is_err());
    }

    #[test]
    fn comments_blank_lines_and_quoted_cells_are_read_as_csv() {
        let t = trace("# from a lab meter\nt,watts,domain\n\n0, 10 ,\"cpu\"\n# a pause\n1,,cpu\n");
        let rows = t.rows();
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].watts, Some(Watts(10.0)));
        assert_eq!(rows[0].domain, Domain::Cpu);
        assert_eq!(rows[1].watts, None);
        // Lines count as in the file, comments and blank lines included.
        let err = parse_trace("t,watts\n# c\n\n0,1\n1,\"1,5\"\n")
            .err()
            .map(|e| e.to_string());
        assert_eq!(
            err.as_deref(),
            Some("replay trace line 5: watts \"1,5\" is not a non-negative number")
        );
    }
}
