//! `nvidia-smi --query-gpu … --format=csv` output read into rows: the captures' parser, and
//! the one a future `nvidia-smi` fallback would use.

use super::*;

/// One GPU row of `nvidia-smi --query-gpu=… --format=csv`: present values by column name.
///
/// Column names lose their unit (`power.draw [W]` → `power.draw`) and values lose it too
/// (`39.32 W` → `39.32`). A missing value (`[N/A]`, `N/A`, `[Not Supported]`, `[Requested
/// functionality has been deprecated]`, any other `[…]` marker) is left out, so it reads as
/// absent, never 0.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SmiRow {
    values: BTreeMap<String, String>,
}

impl SmiRow {
    pub fn text(&self, column: &str) -> Option<&str> {
        self.values.get(column).map(String::as_str)
    }

    pub fn number(&self, column: &str) -> Option<f64> {
        self.text(column)
            .and_then(|v| v.parse::<f64>().ok())
            .filter(|v| v.is_finite())
    }
}

fn is_missing(value: &str) -> bool {
    value.is_empty() || value == "N/A" || (value.starts_with('[') && value.ends_with(']'))
}

/// Splits a header cell `power.draw [W]` into (`power.draw`, Some(`W`)).
pub(super) fn split_unit(header: &str) -> (&str, Option<&str>) {
    match header
        .trim()
        .strip_suffix(']')
        .and_then(|h| h.rsplit_once(" ["))
    {
        Some((name, unit)) => (name, Some(unit)),
        None => (header.trim(), None),
    }
}

fn parse_rows(
    lines: impl Iterator<Item = (usize, String)>,
    columns: &[(&str, Option<&str>)],
) -> Result<Vec<SmiRow>, Error> {
    let mut rows = Vec::new();
    for (n, line) in lines {
        // ", " and not ",": names such as "GeForce RTX 2080" hold spaces, and some values commas.
        let cells: Vec<&str> = line.split(", ").collect();
        if cells.len() != columns.len() {
            return Err(Error::Parse {
                what: "nvidia-smi CSV",
                line: Some(n),
                message: format!(
                    "{} values where there are {} columns",
                    cells.len(),
                    columns.len()
                ),
            });
        }
        let mut values = BTreeMap::new();
        for ((name, unit), cell) in columns.iter().zip(cells) {
            let mut v = cell.trim();
            if let Some(unit) = unit {
                v = v
                    .strip_suffix(unit)
                    .map(str::trim_end)
                    .filter(|s| !s.is_empty())
                    .unwrap_or(v);
            }
            if !is_missing(v) {
                values.insert((*name).to_string(), v.to_string());
            }
        }
        rows.push(SmiRow { values });
    }
    Ok(rows)
}

fn numbered_lines(text: &str) -> impl Iterator<Item = (usize, String)> + '_ {
    text.lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l.trim_end_matches('\r').to_string()))
        .filter(|(_, l)| !l.trim().is_empty())
}

/// Parses `nvidia-smi --query-gpu=… --format=csv` (header line, then one row per GPU).
pub fn parse_query_gpu_csv(text: &str) -> Result<Vec<SmiRow>, Error> {
    let mut lines = numbered_lines(text);
    let (_, header) = lines.next().ok_or_else(|| Error::Parse {
        what: "nvidia-smi CSV",
        line: Some(1),
        message: "no header".into(),
    })?;
    let columns: Vec<(&str, Option<&str>)> = header.split(", ").map(split_unit).collect();
    parse_rows(lines, &columns)
}

/// Parses `--format=csv,noheader,nounits` output; `columns` are the `--query-gpu` fields in order.
pub fn parse_query_gpu_csv_noheader(text: &str, columns: &[&str]) -> Result<Vec<SmiRow>, Error> {
    let columns: Vec<(&str, Option<&str>)> = columns.iter().map(|c| (*c, None)).collect();
    parse_rows(numbered_lines(text), &columns)
}
