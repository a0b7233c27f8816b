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
//!
//! Limits (the child is any program): a line is at most [`MAX_LINE_BYTES`] (a longer one is
//! reported and skipped to its newline, never held whole); a run keeps at most [`MAX_EVENTS`]
//! events (the rest are counted and said once); one poll reads at most [`MAX_POLL_BYTES`], so a
//! child that writes without pause never holds the run's loop.

use serde_json::{Map, Value};
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

/// The longest line of the events file that is read.
pub const MAX_LINE_BYTES: usize = 64 * 1024;
/// The most events one run keeps.
pub const MAX_EVENTS: usize = 100_000;
/// The most bytes one poll reads before the run's loop goes on; the rest waits for the next.
pub const MAX_POLL_BYTES: u64 = 4 << 20;

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
    /// between two reads stays one character. Never longer than [`MAX_LINE_BYTES`].
    partial: Vec<u8>,
    /// The line being read is past [`MAX_LINE_BYTES`]: its bytes are dropped up to its newline.
    skipping: bool,
    line_no: usize,
    /// Events handed out so far, and those past [`MAX_EVENTS`] that were not.
    kept: usize,
    dropped: usize,
}

impl Tail {
    /// Creates (or empties) the file for a new run.
    pub fn create(path: &Path) -> std::io::Result<Tail> {
        std::fs::write(path, b"")?;
        Ok(Tail {
            file: std::fs::File::open(path)?,
            offset: 0,
            partial: Vec::new(),
            skipping: false,
            line_no: 0,
            kept: 0,
            dropped: 0,
        })
    }

    /// The complete lines appended since the last call, as events or as problems. The last
    /// poll reads to the end of the file and takes an unended last line too.
    pub fn poll(&mut self, now: f64, last: bool) -> Vec<Result<Event, String>> {
        if self.file.metadata().is_ok_and(|m| m.len() < self.offset)
            && self.file.seek(SeekFrom::Start(0)).is_ok()
        {
            self.offset = 0;
            self.partial.clear();
            self.skipping = false;
        }
        let mut out = Vec::new();
        let mut read: u64 = 0;
        let mut chunk = vec![0u8; 64 * 1024];
        while last || read < MAX_POLL_BYTES {
            let n = match self.file.read(&mut chunk) {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            read += n as u64;
            self.offset += n as u64;
            for piece in chunk[..n].split_inclusive(|&b| b == b'\n') {
                self.add(piece, now, &mut out);
            }
        }
        if last {
            let rest = std::mem::take(&mut self.partial);
            if !self.skipping {
                self.take(String::from_utf8_lossy(&rest).trim(), now, &mut out);
            }
            if self.dropped > 0 {
                out.push(Err(format!(
                    "WATTBAR_RUN_EVENTS: {} events past the first {MAX_EVENTS} were not kept",
                    self.dropped
                )));
            }
        }
        out
    }

    /// One piece of the file: bytes up to and including a newline, or the bytes after the last.
    fn add(&mut self, piece: &[u8], now: f64, out: &mut Vec<Result<Event, String>>) {
        let ended = piece.ends_with(b"\n");
        if !self.skipping {
            if self.partial.len() + piece.len() > MAX_LINE_BYTES + usize::from(ended) {
                self.skipping = true;
                self.partial.clear();
                self.line_no += 1;
                out.push(Err(format!(
                    "WATTBAR_RUN_EVENTS line {}: longer than {} KiB",
                    self.line_no,
                    MAX_LINE_BYTES / 1024
                )));
            } else {
                self.partial.extend_from_slice(piece);
            }
        }
        if ended {
            if self.skipping {
                self.skipping = false;
            } else {
                let line = std::mem::take(&mut self.partial);
                self.take(String::from_utf8_lossy(&line).trim(), now, out);
            }
        }
    }

    fn take(&mut self, line: &str, now: f64, out: &mut Vec<Result<Event, String>>) {
        self.line_no += 1;
        if line.is_empty() {
            return;
        }
        let parsed = parse_line(line, now)
            .map_err(|e| format!("WATTBAR_RUN_EVENTS line {}: {e}", self.line_no));
        if parsed.is_ok() && self.kept >= MAX_EVENTS {
            self.dropped += 1;
            return;
        }
        self.kept += usize::from(parsed.is_ok());
        out.push(parsed);
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

    #[test]
    fn a_line_past_64_kib_is_skipped_to_its_newline_and_the_next_is_read() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join("events.jsonl");
        let mut tail = Tail::create(&path).unwrap_or_else(|e| panic!("{e}"));
        // A phase whose name is 1 MiB long, written in two parts, then a good mark.
        let long = format!("{{\"type\":\"phase\",\"name\":\"{}", "x".repeat(1 << 20));
        std::fs::write(&path, &long).unwrap_or_else(|e| panic!("{e}"));
        let first = tail.poll(1.0, false);
        assert_eq!(first.len(), 1);
        assert!(first[0]
            .as_ref()
            .is_err_and(|e| e.contains("line 1: longer than 64 KiB")));
        assert!(tail.partial.len() <= MAX_LINE_BYTES);
        let rest = format!("{long}\"}}\n{{\"type\":\"mark\",\"name\":\"after\"}}\n");
        std::fs::write(&path, rest).unwrap_or_else(|e| panic!("{e}"));
        let next = tail.poll(2.0, true);
        assert_eq!(next.len(), 1, "{next:?}");
        let e = next[0].clone().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(e.name(), Some("after"));
    }

    #[test]
    fn a_run_keeps_100_000_events_and_says_how_many_more_it_dropped() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join("events.jsonl");
        let mut tail = Tail::create(&path).unwrap_or_else(|e| panic!("{e}"));
        let line = "{\"type\":\"mark\"}\n";
        std::fs::write(&path, line.repeat(MAX_EVENTS + 25)).unwrap_or_else(|e| panic!("{e}"));
        let mut got = Vec::new();
        while got.len() < MAX_EVENTS {
            let polled = tail.poll(1.0, false);
            if polled.is_empty() {
                break;
            }
            got.extend(polled);
        }
        got.extend(tail.poll(1.0, true));
        assert_eq!(got.iter().filter(|r| r.is_ok()).count(), MAX_EVENTS);
        let said: Vec<&String> = got.iter().filter_map(|r| r.as_ref().err()).collect();
        assert_eq!(said.len(), 1);
        assert!(
            said[0].contains("25 events past the first 100000"),
            "{said:?}"
        );
    }

    #[test]
    fn one_poll_reads_at_most_4_mib_and_the_next_goes_on_from_there() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join("events.jsonl");
        let mut tail = Tail::create(&path).unwrap_or_else(|e| panic!("{e}"));
        // 6 MiB of blank lines: nothing to hand out, but the read stops at 4 MiB.
        std::fs::write(&path, "\n".repeat(6 << 20)).unwrap_or_else(|e| panic!("{e}"));
        assert!(tail.poll(1.0, false).is_empty());
        assert_eq!(tail.offset, MAX_POLL_BYTES);
        assert!(tail.poll(1.0, false).is_empty());
        assert_eq!(tail.offset, 6 << 20);
    }
}
