//! A small reader for the XML property lists `ioreg -a` prints: only what
//! AppleSmartBattery needs, several times faster than building a full `plist::Value` tree
//! (121 µs instead of 408 µs for the 35 KB capture in `tests/fixtures/macos`).
//!
//! It reads the first dictionary (at the top, or first in a top-level array). Values are kept
//! as [`IoValue`]: integers (signed, or unsigned reinterpreted as i64 as ioreg means them),
//! reals, booleans, strings (XML entities decoded) and nested dictionaries; an array only as its
//! length; data and dates are skipped as `Other`. Anything malformed is an error, never a guess.
//!
//! Limit: dictionaries and arrays nest at most [`MAX_NESTING`] deep (a battery's go three deep);
//! deeper is refused before it is read, so that no file can exhaust the stack.

/// The deepest nesting of dictionaries and arrays read, here and in the text reader.
pub const MAX_NESTING: usize = 32;

/// One registry value, as far as this parser needs to tell values apart.
#[derive(Debug, Clone, PartialEq)]
pub enum IoValue {
    Int(i64),
    Real(f64),
    Bool(bool),
    Str(String),
    Dict(Vec<(String, IoValue)>),
    /// An array: how many values it holds (they are checked, never kept).
    Array {
        len: usize,
    },
    /// Data blobs, dates and empty values: kept but never read.
    Other,
}

impl IoValue {
    pub(super) fn int(&self) -> Option<i64> {
        match self {
            IoValue::Int(i) => Some(*i),
            _ => None,
        }
    }

    pub(super) fn bool(&self) -> Option<bool> {
        match self {
            IoValue::Bool(b) => Some(*b),
            // Some gauges report flags as 0/1.
            IoValue::Int(0) => Some(false),
            IoValue::Int(1) => Some(true),
            _ => None,
        }
    }
}

struct Cursor<'a> {
    text: &'a str,
    pos: usize,
    /// Dictionaries and arrays open around the value being read.
    depth: usize,
}

enum Tag<'a> {
    Open(&'a str),
    Close(&'a str),
    Empty(&'a str),
}

impl<'a> Cursor<'a> {
    /// The next element tag, skipping the XML declaration, DOCTYPE and comments.
    fn tag(&mut self) -> Result<Tag<'a>, String> {
        loop {
            let rest = self.text.get(self.pos..).ok_or("unexpected end")?;
            let start = rest.find('<').ok_or("unexpected end of the plist")?;
            let body_start = self.pos + start + 1;
            let len = self.text[body_start..]
                .find('>')
                .ok_or("a tag is not closed")?;
            let body = &self.text[body_start..body_start + len];
            self.pos = body_start + len + 1;
            if body.starts_with('?') || body.starts_with('!') {
                continue;
            }
            let name = |b: &'a str| b.split_whitespace().next().unwrap_or("");
            return Ok(if let Some(b) = body.strip_prefix('/') {
                Tag::Close(name(b))
            } else if let Some(b) = body.strip_suffix('/') {
                Tag::Empty(name(b))
            } else {
                Tag::Open(name(body))
            });
        }
    }

    /// Text up to the closing tag `</name>`.
    fn text_until(&mut self, name: &str) -> Result<&'a str, String> {
        let rest = &self.text[self.pos..];
        let mut from = 0;
        while let Some(i) = rest[from..].find("</") {
            let at = from + i;
            let after = &rest[at + 2..];
            if after.starts_with(name) && after[name.len()..].starts_with('>') {
                self.pos += at + 2 + name.len() + 1;
                return Ok(&rest[..at]);
            }
            from = at + 2;
        }
        Err(format!("<{name}> is not closed"))
    }

    fn value(&mut self, tag: Tag<'a>) -> Result<IoValue, String> {
        match tag {
            Tag::Empty("true") => Ok(IoValue::Bool(true)),
            Tag::Empty("false") => Ok(IoValue::Bool(false)),
            Tag::Empty("dict") => Ok(IoValue::Dict(Vec::new())),
            Tag::Empty("string") => Ok(IoValue::Str(String::new())),
            Tag::Empty("array") => Ok(IoValue::Array { len: 0 }),
            Tag::Empty(_) => Ok(IoValue::Other),
            Tag::Open("dict") => self.nested(|c| c.dict().map(IoValue::Dict)),
            Tag::Open("array") => self.nested(|c| {
                let mut len = 0;
                loop {
                    match c.tag()? {
                        Tag::Close("array") => break,
                        Tag::Close(other) => return Err(format!("</{other}> inside an array")),
                        t => {
                            c.value(t)?;
                            len += 1;
                        }
                    }
                }
                Ok(IoValue::Array { len })
            }),
            Tag::Open("integer") => {
                let t = self.text_until("integer")?.trim();
                t.parse::<i64>()
                    .or_else(|_| t.parse::<u64>().map(|u| u as i64))
                    .map(IoValue::Int)
                    .map_err(|_| format!("{t:?} is not an integer"))
            }
            Tag::Open("real") => {
                let t = self.text_until("real")?.trim();
                t.parse::<f64>()
                    .map(IoValue::Real)
                    .map_err(|_| format!("{t:?} is not a real"))
            }
            Tag::Open("string") => Ok(IoValue::Str(unescape(self.text_until("string")?))),
            Tag::Open(name @ ("data" | "date")) => {
                self.text_until(name)?;
                Ok(IoValue::Other)
            }
            Tag::Open(other) => Err(format!("unknown element <{other}>")),
            Tag::Close(other) => Err(format!("unexpected </{other}>")),
        }
    }

    /// `read` one level deeper, refused past [`MAX_NESTING`].
    fn nested(
        &mut self,
        read: impl FnOnce(&mut Self) -> Result<IoValue, String>,
    ) -> Result<IoValue, String> {
        nested(self, |c| &mut c.depth, read)
    }

    /// The entries of a dictionary whose `<dict>` was just read.
    fn dict(&mut self) -> Result<Vec<(String, IoValue)>, String> {
        let mut entries = Vec::new();
        loop {
            match self.tag()? {
                Tag::Close("dict") => return Ok(entries),
                Tag::Open("key") => {
                    let key = unescape(self.text_until("key")?);
                    let tag = self.tag()?;
                    entries.push((key, self.value(tag)?));
                }
                Tag::Empty("key") => {
                    let tag = self.tag()?;
                    entries.push((String::new(), self.value(tag)?));
                }
                _ => return Err("a dictionary entry without a <key>".into()),
            }
        }
    }
}

fn unescape(s: &str) -> String {
    if !s.contains('&') {
        return s.to_string();
    }
    s.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&apos;", "'")
        .replace("&amp;", "&")
}

/// `read` one level deeper than `depth(reader)` says it is, refused past [`MAX_NESTING`]: the
/// one guard of both readers.
pub(super) fn nested<R>(
    reader: &mut R,
    depth: impl Fn(&mut R) -> &mut usize,
    read: impl FnOnce(&mut R) -> Result<IoValue, String>,
) -> Result<IoValue, String> {
    if *depth(reader) >= MAX_NESTING {
        return Err(format!("nested more than {MAX_NESTING} deep"));
    }
    *depth(reader) += 1;
    let value = read(reader);
    *depth(reader) -= 1;
    value
}

/// Whether no dictionary or array of the XML plist `text` nests past [`MAX_NESTING`], read
/// without building anything: the check before a reader that builds a tree.
pub fn check_nesting(text: &str) -> Result<(), String> {
    let mut c = Cursor {
        text,
        pos: 0,
        depth: 0,
    };
    while c.text[c.pos..].contains('<') {
        match c.tag()? {
            Tag::Open("dict" | "array") if c.depth >= MAX_NESTING => {
                return Err(format!("nested more than {MAX_NESTING} deep"));
            }
            Tag::Open("dict" | "array") => c.depth += 1,
            Tag::Close("dict" | "array") => c.depth = c.depth.saturating_sub(1),
            _ => {}
        }
    }
    Ok(())
}

/// The first dictionary of an XML plist.
pub fn first_dict(text: &str) -> Result<Vec<(String, IoValue)>, String> {
    let mut c = Cursor {
        text,
        pos: 0,
        depth: 1,
    };
    loop {
        match c.tag()? {
            Tag::Open("plist") | Tag::Open("array") => continue,
            Tag::Open("dict") => return c.dict(),
            Tag::Empty("dict") => return Ok(Vec::new()),
            Tag::Close(_) | Tag::Empty(_) => {
                return Err("the plist holds no dictionary".into());
            }
            Tag::Open(other) => return Err(format!("<{other}> where a dictionary was expected")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_nested_dicts_and_entities_are_read() {
        let xml = r#"<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
<plist version="1.0"><array><dict>
  <key>Amperage</key><integer>-1623</integer>
  <key>Big</key><integer>18446744073709549993</integer>
  <key>Name</key><string>A &amp; B</string>
  <key>Ok</key><true/>
  <key>Blob</key><data>AAEC</data>
  <key>List</key><array><integer>1</integer><dict><key>x</key><integer>2</integer></dict></array>
  <key>Inner</key><dict><key>SystemLoad</key><integer>18922</integer></dict>
  <key>Empty</key><dict/>
</dict></array></plist>"#;
        let d = first_dict(xml).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(d[0], ("Amperage".to_string(), IoValue::Int(-1623)));
        assert_eq!(d[1].1, IoValue::Int(-1623));
        assert_eq!(d[2].1, IoValue::Str("A & B".into()));
        assert_eq!(d[3].1, IoValue::Bool(true));
        assert_eq!(d[4].1, IoValue::Other);
        assert_eq!(d[5].1, IoValue::Array { len: 2 });
        assert_eq!(
            d[6].1,
            IoValue::Dict(vec![("SystemLoad".into(), IoValue::Int(18922))])
        );
        assert_eq!(d[7].1, IoValue::Dict(Vec::new()));
    }

    #[test]
    fn malformed_plists_are_errors() {
        for bad in [
            "<plist><dict><key>A</key><integer>x</integer></dict></plist>",
            "<plist><dict><key>A</key><integer>1</integer>",
            "<plist><dict><integer>1</integer></dict></plist>",
            "<plist><dict><key>A</key><frob>1</frob></dict></plist>",
            "<plist><string>x</string></plist>",
            "",
        ] {
            assert!(first_dict(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_plist_nested_a_million_deep_is_refused_at_32_not_a_stack_overflow() {
        let deep = format!(
            "<plist><dict><key>k</key>{}</dict></plist>",
            "<array>".repeat(1_000_000)
        );
        assert_eq!(
            first_dict(&deep).err().as_deref(),
            Some("nested more than 32 deep")
        );
        // 31 arrays inside the top dictionary are within the limit.
        let ok = format!(
            "<plist><dict><key>k</key>{}{}</dict></plist>",
            "<array>".repeat(31),
            "</array>".repeat(31)
        );
        assert!(first_dict(&ok).is_ok());
    }

    #[test]
    fn nesting_is_checked_without_building_and_agrees_with_the_reader() {
        let deep = format!(
            "<plist>{}{}</plist>",
            "<dict>".repeat(40),
            "</dict>".repeat(40)
        );
        assert_eq!(
            check_nesting(&deep).err().as_deref(),
            Some("nested more than 32 deep")
        );
        let fine = format!(
            "<plist>{}{}</plist>",
            "<array>".repeat(32),
            "</array>".repeat(32)
        );
        assert_eq!(check_nesting(&fine), Ok(()));
    }
}
