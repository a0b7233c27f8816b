//! The list of series `docs/api.md` gives ("Metrics series"), and the check that holds an
//! exposition to it: every family exported is listed, with its type and its labels, so the docs
//! and `/metrics` cannot drift apart. The list's lines read
//! `` - `NAME` TYPE {label,label}: what it is. ``

use std::collections::{BTreeMap, BTreeSet};

/// One listed series: its type (`counter`, `gauge`) and its label names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Documented {
    pub kind: String,
    pub labels: BTreeSet<String>,
}

/// The series listed under `## Metrics series` in `markdown`, by name; a line of the list that
/// does not read as one is an error naming it.
pub fn documented_series(markdown: &str) -> Result<BTreeMap<String, Documented>, String> {
    let section = markdown
        .split("\n## ")
        .find(|s| s.starts_with("Metrics series"))
        .ok_or("no \"## Metrics series\" section")?;
    let mut series = BTreeMap::new();
    for line in section.lines().filter(|l| l.starts_with("- `wattbar_")) {
        let bad = || format!("not `- `NAME` TYPE {{labels}}: …`: {line}");
        let rest = line.strip_prefix("- `").ok_or_else(bad)?;
        let (name, rest) = rest.split_once("` ").ok_or_else(bad)?;
        let (kind, rest) = rest.split_once(" {").ok_or_else(bad)?;
        let (labels, _) = rest.split_once("}:").ok_or_else(bad)?;
        let labels = labels
            .split(',')
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(str::to_string)
            .collect();
        let listed = Documented {
            kind: kind.to_string(),
            labels,
        };
        if series.insert(name.to_string(), listed).is_some() {
            return Err(format!("{name} is listed twice"));
        }
    }
    if series.is_empty() {
        return Err("the \"Metrics series\" section lists no series".into());
    }
    Ok(series)
}

/// What in `exposition` (the classic text format or OpenMetrics) the list does not say: a family
/// not listed, listed with another type, or a sample with other labels than listed.
pub fn undocumented(exposition: &str, listed: &BTreeMap<String, Documented>) -> Vec<String> {
    let mut problems = Vec::new();
    let mut families: BTreeMap<String, String> = BTreeMap::new();
    for line in exposition.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let Some((name, kind)) = rest.split_once(' ') else {
                continue;
            };
            // OpenMetrics names a counter's family without `_total`; its samples have it.
            let name = if kind == "counter" && !name.ends_with("_total") {
                format!("{name}_total")
            } else {
                name.to_string()
            };
            match listed.get(&name) {
                None => problems.push(format!("{name} ({kind}) is exported but not listed")),
                Some(d) if d.kind != kind => {
                    problems.push(format!("{name} is a {kind}, listed as a {}", d.kind))
                }
                Some(_) => {}
            }
            families.insert(name, kind.to_string());
            continue;
        }
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let (name, labels) = sample_labels(line);
        if let Some(d) = listed.get(name) {
            if labels != d.labels {
                problems.push(format!(
                    "{name} is exported with labels {labels:?}, listed with {:?}",
                    d.labels
                ));
            }
        }
    }
    problems.sort();
    problems.dedup();
    problems
}

/// A sample line's series name and label names: `name{a="x",b="y, \"z\""} 1` gives `name`,
/// `{a, b}`.
fn sample_labels(line: &str) -> (&str, BTreeSet<String>) {
    let end = line.find(['{', ' ']).unwrap_or(line.len());
    let name = &line[..end];
    let mut labels = BTreeSet::new();
    if line[end..].starts_with('{') {
        let (mut key, mut quoted, mut escaped) = (String::new(), false, false);
        for c in line[end + 1..].chars() {
            match (quoted, escaped, c) {
                (true, true, _) => escaped = false,
                (true, false, '\\') => escaped = true,
                (true, false, '"') => quoted = false,
                (true, false, _) => {}
                (false, _, '"') => quoted = true,
                (false, _, '=') => {
                    labels.insert(std::mem::take(&mut key).trim().to_string());
                }
                (false, _, ',') => key.clear(),
                (false, _, '}') => break,
                (false, _, c) => key.push(c),
            }
        }
    }
    (name, labels)
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIST: &str = "# API\n\n## Metrics series\n\nText.\n\n\
        - `wattbar_energy_joules_total` counter {domain,scope}: lifetime energy.\n\
        - `wattbar_low_power_mode` gauge {}: 1 while on.\n\n## Next\n\n- `wattbar_not_here` gauge {}: x.\n";

    #[test]
    fn the_docs_list_is_read_with_each_series_type_and_labels() {
        let listed = documented_series(LIST).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            listed.len(),
            2,
            "the next section's lines are not the list's"
        );
        let energy = &listed["wattbar_energy_joules_total"];
        assert_eq!(energy.kind, "counter");
        assert_eq!(
            energy.labels.iter().map(String::as_str).collect::<Vec<_>>(),
            ["domain", "scope"]
        );
        assert!(listed["wattbar_low_power_mode"].labels.is_empty());
        assert!(documented_series("## Metrics series\n- `wattbar_x` gauge\n").is_err());
    }

    #[test]
    fn a_series_unlisted_mistyped_or_with_other_labels_is_named() {
        let listed = documented_series(LIST).unwrap_or_else(|e| panic!("{e}"));
        let openmetrics = "# TYPE wattbar_energy_joules counter\n\
            wattbar_energy_joules_total{domain=\"system\",scope=\"wall\"} 5\n\
            # TYPE wattbar_low_power_mode gauge\nwattbar_low_power_mode 1\n# EOF\n";
        assert_eq!(undocumented(openmetrics, &listed), Vec::<String>::new());
        let drifted = "# TYPE wattbar_energy_joules_total counter\n\
            wattbar_energy_joules_total{domain=\"a,b=\\\"c\\\"\",scope=\"\",device=\"0\"} 5\n\
            # TYPE wattbar_low_power_mode histogram\n\
            # TYPE wattbar_new_watts gauge\nwattbar_new_watts 3\n";
        let problems = undocumented(drifted, &listed);
        assert_eq!(problems.len(), 3, "{problems:?}");
        assert!(problems[0].contains("labels {\"device\", \"domain\", \"scope\"}"));
        assert!(problems[1].contains("wattbar_low_power_mode is a histogram, listed as a gauge"));
        assert!(problems[2].contains("wattbar_new_watts (gauge) is exported but not listed"));
    }

    #[test]
    fn every_series_the_docs_list_is_one_this_crate_registers() {
        let docs = include_str!("../../../../docs/api.md");
        let listed = documented_series(docs).unwrap_or_else(|e| panic!("{e}"));
        let sources = [
            include_str!("../metrics.rs"),
            include_str!("battery.rs"),
            include_str!("inference.rs"),
            include_str!("keys.rs"),
            include_str!("prices.rs"),
        ];
        let registered: Vec<&str> = sources
            .iter()
            .flat_map(|s| s.split("\"wattbar_").skip(1))
            .filter_map(|rest| Some(&rest[..rest.find('"')?]))
            .collect();
        for (name, d) in &listed {
            let base = name
                .strip_prefix("wattbar_")
                .map(|n| n.strip_suffix("_total").unwrap_or(n))
                .unwrap_or_default();
            let found = registered.iter().any(|r| {
                base == *r
                    || ["watts", "joules", "seconds", "bytes"]
                        .iter()
                        .any(|unit| base == format!("{r}_{unit}"))
            });
            assert!(found, "{name} is listed but registered nowhere");
            assert_eq!(d.kind == "counter", name.ends_with("_total"), "{name}");
        }
    }
}
