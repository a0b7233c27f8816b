//! The text form of `ioreg -r -n AppleSmartBattery`, read into the same dictionary the plist
//! reader gives. Numbers the text prints as unsigned 64-bit are taken back as i64.

use super::*;

/// The text form: `+-o AppleSmartBattery <class …>`, then `{`, one `"Key" = value` per line
/// (nested values inline), then `}`. Only the first entry is read.
pub(super) fn parse_text(text: &str) -> Result<Vec<(String, IoValue)>, Error> {
    let mut entries = Vec::new();
    let mut inside = false;
    for (i, line) in text.lines().enumerate() {
        let l = line.trim();
        if !inside {
            inside = l == "{";
            continue;
        }
        if l == "}" {
            return Ok(entries);
        }
        if l.is_empty() {
            continue;
        }
        let mut p = TextParser::new(l);
        let key = p
            .string()
            .ok_or_else(|| parse_err(Some(i + 1), "expected a quoted key"))?;
        p.skip_ws();
        if !p.eat(b'=') {
            return Err(parse_err(Some(i + 1), format!("no `=` after {key:?}")));
        }
        p.skip_ws();
        let value = p
            .value()
            .map_err(|m| parse_err(Some(i + 1), format!("{key}: {m}")))?;
        entries.push((key, value));
    }
    if inside {
        Err(parse_err(None, "the entry's `}` is missing"))
    } else {
        Err(parse_err(
            None,
            "no `{` entry found: not ioreg output, or no AppleSmartBattery",
        ))
    }
}

/// Recursive descent over one line of ioreg text values: `123`, `Yes`/`No`, `"str"`, `<hex>`,
/// `(a,b)`, `{"k"=v,…}`, and nothing at all (`"AdapterPower"=,`).
/// Nests at most [`MAX_NESTING`](crate::macos::plist_xml::MAX_NESTING) deep, as the plist reader.
struct TextParser<'a> {
    s: &'a [u8],
    pos: usize,
    /// Dictionaries and lists open around the value being read.
    depth: usize,
}

impl<'a> TextParser<'a> {
    fn new(s: &'a str) -> Self {
        TextParser {
            s: s.as_bytes(),
            pos: 0,
            depth: 1,
        }
    }

    fn peek(&self) -> Option<u8> {
        self.s.get(self.pos).copied()
    }

    fn eat(&mut self, c: u8) -> bool {
        if self.peek() == Some(c) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn skip_ws(&mut self) {
        while self.peek().is_some_and(|c| c == b' ' || c == b'\t') {
            self.pos += 1;
        }
    }

    fn string(&mut self) -> Option<String> {
        if !self.eat(b'"') {
            return None;
        }
        let start = self.pos;
        while let Some(c) = self.peek() {
            if c == b'"' {
                let s = String::from_utf8_lossy(&self.s[start..self.pos]).into_owned();
                self.pos += 1;
                return Some(s);
            }
            self.pos += 1;
        }
        None
    }

    /// `read` one level deeper, refused past [`MAX_NESTING`](crate::macos::plist_xml::MAX_NESTING).
    fn nested(
        &mut self,
        read: impl FnOnce(&mut Self) -> Result<IoValue, String>,
    ) -> Result<IoValue, String> {
        crate::macos::plist_xml::nested(self, |p| &mut p.depth, read)
    }

    fn value(&mut self) -> Result<IoValue, String> {
        match self.peek() {
            None | Some(b',' | b')' | b'}') => Ok(IoValue::Other),
            Some(b'"') => self
                .string()
                .map(IoValue::Str)
                .ok_or_else(|| "unterminated string".to_string()),
            Some(b'{') => self.nested(|p| {
                p.pos += 1;
                let mut entries = Vec::new();
                loop {
                    if p.eat(b'}') {
                        return Ok(IoValue::Dict(entries));
                    }
                    let key = p
                        .string()
                        .ok_or_else(|| format!("expected a key at byte {}", p.pos))?;
                    if !p.eat(b'=') {
                        return Err(format!("no `=` after {key:?}"));
                    }
                    let v = p.value()?;
                    entries.push((key, v));
                    if !p.eat(b',') && p.peek() != Some(b'}') {
                        return Err(format!("expected `,` or `}}` at byte {}", p.pos));
                    }
                }
            }),
            Some(b'(') => self.nested(|p| {
                p.pos += 1;
                let mut len = 0;
                loop {
                    if p.eat(b')') {
                        return Ok(IoValue::Array { len });
                    }
                    p.value()?;
                    len += 1;
                    if !p.eat(b',') && p.peek() != Some(b')') {
                        return Err(format!("expected `,` or `)` at byte {}", p.pos));
                    }
                }
            }),
            Some(b'<') => {
                match self.s[self.pos..].iter().position(|&c| c == b'>') {
                    Some(n) => self.pos += n + 1,
                    None => return Err("unterminated data".into()),
                }
                Ok(IoValue::Other)
            }
            Some(_) => {
                let start = self.pos;
                while self
                    .peek()
                    .is_some_and(|c| !matches!(c, b',' | b')' | b'}'))
                {
                    self.pos += 1;
                }
                let word = String::from_utf8_lossy(&self.s[start..self.pos]);
                Ok(scalar(word.trim()))
            }
        }
    }
}

fn scalar(word: &str) -> IoValue {
    match word {
        "Yes" => IoValue::Bool(true),
        "No" => IoValue::Bool(false),
        // Text ioreg prints signed values as their unsigned 64-bit pattern.
        w => w
            .parse::<u64>()
            .map(|u| IoValue::Int(u as i64))
            .or_else(|_| w.parse::<i64>().map(IoValue::Int))
            .or_else(|_| w.parse::<f64>().map(IoValue::Real))
            .unwrap_or(IoValue::Other),
    }
}
