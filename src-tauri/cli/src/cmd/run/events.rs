//! The run's events: `start` and `end` written by Wattbar, `phase` and `mark` written by the child
//! as JSON lines to the file named in `WATTBAR_RUN_EVENTS`.
//!
//! Rules:
//! - A line is a JSON object with `type` (`phase` or `mark`) and, for a phase, a `name`; `ts`
//!   (Unix seconds) is optional and, when absent, the time Wattbar read the line. Other fields
//!   are kept as they are.
//! - A phase lasts from its event to the next phase or the end of the run. The stretch before the
//!   first phase is a phase of its own (`before first phase`), so the phases cover the run and
//!   their energies add up to its energy.
//! - A line that is not such an object is reported with its line number and skipped.

use serde_json::{Map, Value};
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

/// One event of a run.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    pub ts: f64,
    pub kind: String,
    pub fields: Map<String, Value>,
}

impl Event {
    pub fn new(ts: f64, kind: &str, fields: Map<String, Value>) -> Event {
        Event {
            ts,
            kind: kind.to_string(),
            fields,
        }
    }

    pub fn name(&self) -> Option<&str> {
        self.fields.get("name").and_then(Value::as_str)
    }

    /// The JSON line of `events.jsonl`.
    pub fn to_json(&self) -> Value {
        let mut m = Map::new();
        m.insert("ts".into(), Value::from(self.ts));
        m.insert("type".into(), Value::from(self.kind.clone()));
        for (k, v) in &self.fields {
            m.insert(k.clone(), v.clone());
        }
        Value::Object(m)
    }
}

/// Parses one line the child wrote; `read_at` stands in for a missing `ts`.
pub fn parse_line(line: &str, read_at: f64) -> Result<Event, String> {
    let value: Value = serde_json::from_str(line).map_err(|e| format!("not JSON: {e}"))?;
    let Value::Object(mut fields) = value else {
        return Err("not a JSON object".into());
    };
    let kind = match fields.remove("type") {
        Some(Value::String(k)) if k == "phase" || k == "mark" => k,
        Some(other) => return Err(format!("type {other} is not \"phase\" or \"mark\"")),
        None => return Err("no \"type\" (\"phase\" or \"mark\")".into()),
    };
    let ts = match fields.remove("ts") {
        None => read_at,
        Some(v) => match v.as_f64() {
            Some(t) if t.is_finite() && t > 0.0 => t,
            _ => return Err(format!("ts {v} is not Unix seconds")),
        },
    };
    if kind == "phase" && !fields.get("name").is_some_and(Value::is_string) {
        return Err("a phase needs a \"name\"".into());
    }
    Ok(Event { ts, kind, fields })
}

/// A stretch of a run with a name.
#[derive(Debug, Clone, PartialEq)]
pub struct Phase {
    pub name: String,
    pub from: f64,
    pub to: f64,
}

/// The phases of a run from `start` to `end`, from its phase events (any order).
pub fn phases(events: &[Event], start: f64, end: f64) -> Vec<Phase> {
    let mut marks: Vec<(f64, String)> = events
        .iter()
        .filter(|e| e.kind == "phase")
        .filter_map(|e| Some((e.ts.clamp(start, end), e.name()?.to_string())))
        .collect();
    if marks.is_empty() {
        return Vec::new();
    }
    marks.sort_by(|a, b| a.0.total_cmp(&b.0));
    if marks[0].0 > start {
        marks.insert(0, (start, "before first phase".into()));
    }
    let mut out: Vec<Phase> = Vec::new();
    for (i, (from, name)) in marks.iter().enumerate() {
        let to = marks.get(i + 1).map_or(end, |m| m.0);
        if to > *from {
            out.push(Phase {
                name: name.clone(),
                from: *from,
                to,
            });
        }
    }
    out
}

/// Follows the events file while the child runs: reads what was appended since the last call.
pub struct Tail {
    /// Kept open: each poll is one read from where the last one stopped.
    file: std::fs::File,
    /// Where the next read starts; a file found shorter was rewritten (`>` instead of `>>`)
    /// and is read again from its start.
    offset: u64,
    /// Bytes of a line not ended yet: decoded only once whole, so that a character split
    /// between two reads stays one character.
    partial: Vec<u8>,
    line_no: usize,
}

impl Tail {
    /// Creates (or empties) the file for a new run.
    pub fn create(path: &Path) -> std::io::Result<Tail> {
        std::fs::write(path, b"")?;
        Ok(Tail {
            file: std::fs::File::open(path)?,
            offset: 0,
            partial: Vec::new(),
            line_no: 0,
        })
    }

    /// The complete lines appended since the last call, as events or as problems.
    pub fn poll(&mut self, now: f64, last: bool) -> Vec<Result<Event, String>> {
        if self.file.metadata().is_ok_and(|m| m.len() < self.offset)
            && self.file.seek(SeekFrom::Start(0)).is_ok()
        {
            self.offset = 0;
            self.partial.clear();
        }
        if let Ok(n) = self.file.read_to_end(&mut self.partial) {
            self.offset += n as u64;
        }
        let mut out = Vec::new();
        while let Some(i) = self.partial.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = self.partial.drain(..=i).collect();
            self.take(String::from_utf8_lossy(&line).trim(), now, &mut out);
        }
        if last {
            let rest = std::mem::take(&mut self.partial);
            self.take(String::from_utf8_lossy(&rest).trim(), now, &mut out);
        }
        out
    }

    fn take(&mut self, line: &str, now: f64, out: &mut Vec<Result<Event, String>>) {
        self.line_no += 1;
        if line.is_empty() {
            return;
        }
        out.push(
            parse_line(line, now)
                .map_err(|e| format!("WATTBAR_RUN_EVENTS line {}: {e}", self.line_no)),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn phase(ts: f64, name: &str) -> Event {
        parse_line(
            &format!(r#"{{"type":"phase","name":"{name}","ts":{ts}}}"#),
            0.0,
        )
        .unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn phases_cover_the_run_from_start_to_end() {
        // Run 100–110 s; the child marks "load" at 102 and "infer" at 105.
        let p = phases(&[phase(105.0, "infer"), phase(102.0, "load")], 100.0, 110.0);
        let spans: Vec<(&str, f64, f64)> =
            p.iter().map(|p| (p.name.as_str(), p.from, p.to)).collect();
        assert_eq!(
            spans,
            vec![
                ("before first phase", 100.0, 102.0),
                ("load", 102.0, 105.0),
                ("infer", 105.0, 110.0)
            ]
        );
    }

    #[test]
    fn a_phase_stamped_outside_the_run_is_held_to_it() {
        let p = phases(&[phase(90.0, "setup"), phase(120.0, "late")], 100.0, 110.0);
        assert_eq!(p.len(), 1);
        assert_eq!(
            (p[0].name.as_str(), p[0].from, p[0].to),
            ("setup", 100.0, 110.0)
        );
    }

    #[test]
    fn a_line_without_ts_takes_the_time_it_was_read_and_keeps_its_fields() {
        let e = parse_line(r#"{"type":"mark","name":"epoch","step":3}"#, 1234.5)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(e.ts, 1234.5);
        assert_eq!(e.to_json()["step"], 3);
        assert_eq!(e.to_json()["type"], "mark");
    }

    #[test]
    fn bad_lines_say_what_is_wrong() {
        let why = |line: &str| match parse_line(line, 1.0) {
            Ok(e) => panic!("{line} was taken: {e:?}"),
            Err(why) => why,
        };
        assert!(why("not json").contains("not JSON"));
        assert!(why(r#"{"type":"start"}"#).contains("phase"));
        assert!(why(r#"{"type":"phase"}"#).contains("name"));
        assert!(why(r#"{"type":"mark","ts":"soon"}"#).contains("ts"));
    }

    #[test]
    fn a_file_written_over_is_read_again_and_a_split_character_stays_whole() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join("events.jsonl");
        let mut tail = Tail::create(&path).unwrap_or_else(|e| panic!("{e}"));
        let write = |bytes: &[u8]| std::fs::write(&path, bytes).unwrap_or_else(|e| panic!("{e}"));
        write(b"{\"type\":\"mark\",\"name\":\"first mark, long\"}\n");
        assert_eq!(tail.poll(1.0, false).len(), 1);
        // `>` instead of `>>`: a shorter file; "Olá" cut inside its "á" (0xC3 0xA1).
        let line = "{\"type\":\"phase\",\"name\":\"Olá\"}\n".as_bytes();
        let cut = line
            .iter()
            .position(|&b| b == 0xC3)
            .unwrap_or_else(|| panic!())
            + 1;
        write(&line[..cut]);
        assert!(tail.poll(2.0, false).is_empty());
        write(line);
        let got = tail.poll(3.0, false);
        let e = got[0].clone().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(e.name(), Some("Olá"));
    }

    #[test]
    fn the_tail_reads_only_complete_lines_until_the_last_poll() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join("events.jsonl");
        let mut tail = Tail::create(&path).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(&path, "{\"type\":\"mark\",\"name\":\"a\"}\n{\"type\":\"ma")
            .unwrap_or_else(|e| panic!("{e}"));
        let first = tail.poll(10.0, false);
        assert_eq!(first.len(), 1);
        std::fs::write(
            &path,
            "{\"type\":\"mark\",\"name\":\"a\"}\n{\"type\":\"mark\",\"name\":\"b\"}",
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert!(tail.poll(11.0, false).is_empty());
        let last = tail.poll(12.0, true);
        assert_eq!(last.len(), 1);
        let e = last[0].clone().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((e.name(), e.ts), (Some("b"), 12.0));
    }
}
