//! A JSON object's members found where they lie in its text, and edits spliced in there.
//!
//! Rule: what is not edited stays byte for byte. The object is never decoded into values and
//! encoded again, so key order, spacing, `1.0`, `1e400` and integers past 64 bits reach the
//! server as the client wrote them; only the spans of the members asked for are found, and an
//! edit replaces one value's bytes or adds a member after the opening brace.
//!
//! Memory is bounded by the members kept (those asked for), not by how many the object has.

use serde::de::{Deserializer, IgnoredAny, MapAccess, Visitor};
use serde_json::value::RawValue;
use std::collections::BTreeMap;
use std::ops::Range;

/// An object's members of interest, as spans of the text they came in (`root`).
#[derive(Debug)]
pub struct Object<'a> {
    root: &'a str,
    /// Where in `root` the byte after the opening brace is.
    inner: usize,
    /// Whether the object has any member at all, kept or not.
    has_members: bool,
    /// The kept members in order; a key given twice keeps both, and the last is read, as
    /// `serde_json` and most servers read it.
    members: Vec<(String, &'a RawValue)>,
}

impl<'a> Object<'a> {
    /// `text` as a JSON object, keeping the members named in `wanted`; `None` when it is not
    /// one (malformed, or another kind of value).
    pub fn parse(text: &'a str, wanted: &[&str]) -> Option<Object<'a>> {
        Object::within(text, text, wanted)
    }

    /// The member `key` holds, when it is an object itself.
    pub fn object(&self, key: &str, wanted: &[&str]) -> Option<Object<'a>> {
        Object::within(self.root, self.get(key)?.get(), wanted)
    }

    fn within(root: &'a str, text: &'a str, wanted: &[&str]) -> Option<Object<'a>> {
        let mut de = serde_json::Deserializer::from_str(text);
        let (members, has_members) = de.deserialize_map(WantedMembers { wanted }).ok()?;
        de.end().ok()?;
        let open = text.find('{')?;
        Some(Object {
            root,
            inner: offset(root, text)? + open + 1,
            has_members,
            members,
        })
    }

    /// The raw value of `key` (the last, when given twice).
    pub fn get(&self, key: &str) -> Option<&'a RawValue> {
        self.members
            .iter()
            .rev()
            .find(|(k, _)| k == key)
            .map(|(_, v)| *v)
    }

    /// `key`'s value as a string, when it is one.
    pub fn string(&self, key: &str) -> Option<String> {
        serde_json::from_str(self.get(key)?.get()).ok()
    }

    /// `key`'s value as a boolean, when it is one.
    pub fn bool(&self, key: &str) -> Option<bool> {
        serde_json::from_str(self.get(key)?.get()).ok()
    }

    /// Where `key`'s value lies in the root text.
    fn span(&self, key: &str) -> Option<Range<usize>> {
        let raw = self.get(key)?.get();
        let start = offset(self.root, raw)?;
        Some(start..start + raw.len())
    }
}

/// Where `part`, a slice of `root`, starts in it.
fn offset(root: &str, part: &str) -> Option<usize> {
    (part.as_ptr() as usize).checked_sub(root.as_ptr() as usize)
}

/// Keeps the wanted members of a map and skips the rest unread.
struct WantedMembers<'w> {
    wanted: &'w [&'w str],
}

impl<'de> Visitor<'de> for WantedMembers<'_> {
    type Value = (Vec<(String, &'de RawValue)>, bool);

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut kept = Vec::new();
        let mut any = false;
        while let Some(key) = map.next_key::<String>()? {
            any = true;
            if self.wanted.contains(&key.as_str()) {
                kept.push((key, map.next_value::<&'de RawValue>()?));
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok((kept, any))
    }
}

/// Changes to one text: values replaced and members added, applied at once.
#[derive(Debug, Default)]
pub struct Edits {
    replaced: Vec<(Range<usize>, String)>,
    /// Members added after an object's opening brace: where, whether it had members, and the
    /// `"key":value` texts.
    added: BTreeMap<usize, (bool, Vec<String>)>,
}

impl Edits {
    pub fn is_empty(&self) -> bool {
        self.replaced.is_empty() && self.added.is_empty()
    }

    /// `object[key]` set to the JSON text `value`: its value replaced when present, else the
    /// member added first.
    pub fn set(&mut self, object: &Object, key: &str, value: String) {
        match object.span(key) {
            Some(span) => self.replaced.push((span, value)),
            None => self.add(object, key, value),
        }
    }

    fn add(&mut self, object: &Object, key: &str, value: String) {
        let key = serde_json::Value::from(key).to_string();
        self.added
            .entry(object.inner)
            .or_insert_with(|| (object.has_members, Vec::new()))
            .1
            .push(format!("{key}:{value}"));
    }

    /// `text` with the edits in; `None` when two of them overlap.
    pub fn apply(self, text: &[u8]) -> Option<Vec<u8>> {
        let mut splices: Vec<(Range<usize>, String)> = self.replaced;
        for (at, (has_members, members)) in self.added {
            let mut joined = members.join(",");
            if has_members {
                joined.push(',');
            }
            splices.push((at..at, joined));
        }
        splices.sort_by_key(|(span, _)| (span.start, span.end));
        let mut out = Vec::with_capacity(text.len() + 64);
        let mut at = 0;
        for (span, with) in splices {
            if span.start < at || span.end > text.len() {
                return None;
            }
            out.extend_from_slice(&text[at..span.start]);
            out.extend_from_slice(with.as_bytes());
            at = span.end;
        }
        out.extend_from_slice(&text[at..]);
        Some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ODD: &str = "{ \"z\": 1.0,\n  \"model\" : \"big\", \"huge\": 1e400,\
                       \"n\": 123456789012345678901, \"a\": [1, 2.50] }";

    #[test]
    fn a_replaced_value_leaves_every_other_byte_as_it_came() {
        let o = Object::parse(ODD, &["model"]).unwrap_or_else(|| panic!("not an object"));
        assert_eq!(o.string("model").as_deref(), Some("big"));
        let mut e = Edits::default();
        e.set(&o, "model", "\"small\"".into());
        let out = e.apply(ODD.as_bytes()).unwrap_or_default();
        assert_eq!(
            String::from_utf8(out).unwrap_or_default(),
            ODD.replace("\"big\"", "\"small\"")
        );
    }

    #[test]
    fn added_members_come_first_with_commas_only_between() {
        let empty = Object::parse(" {} ", &[]).unwrap_or_else(|| panic!("not an object"));
        let mut e = Edits::default();
        e.set(&empty, "a", "1".into());
        e.set(&empty, "b", "2".into());
        assert_eq!(e.apply(b" {} ").unwrap_or_default(), b" {\"a\":1,\"b\":2} ");

        let text = r#"{"x":{"k":3},"y":null}"#;
        let o = Object::parse(text, &["x", "y"]).unwrap_or_else(|| panic!("not an object"));
        let x = o.object("x", &["n"]).unwrap_or_else(|| panic!("x"));
        let mut e = Edits::default();
        e.set(&x, "n", "7".into());
        e.set(&o, "y", "{\"n\":7}".into());
        assert_eq!(
            e.apply(text.as_bytes()).unwrap_or_default(),
            br#"{"x":{"n":7,"k":3},"y":{"n":7}}"#
        );
    }

    #[test]
    fn a_key_given_twice_is_read_and_edited_at_its_last() {
        let text = r#"{"model":"a","model":"b"}"#;
        let o = Object::parse(text, &["model"]).unwrap_or_else(|| panic!("not an object"));
        assert_eq!(o.string("model").as_deref(), Some("b"));
        let mut e = Edits::default();
        e.set(&o, "model", "\"c\"".into());
        assert_eq!(
            e.apply(text.as_bytes()).unwrap_or_default(),
            br#"{"model":"a","model":"c"}"#
        );
    }

    #[test]
    fn what_is_no_object_is_not_read() {
        for text in ["", "[1]", "\"s\"", "{\"a\":}", "{} {}", "{\"a\":1"] {
            assert!(Object::parse(text, &["a"]).is_none(), "{text:?}");
        }
    }
}
