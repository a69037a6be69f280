//! Regular expressions in data files, compiled when the file is decoded: an invalid one is a decode
//! error at its line and column, never a gate that silently matches nothing.

use regex::Regex;

/// A compiled pattern may take this much memory (a tenth of the regex crate's default).
pub const SIZE_LIMIT: usize = 1 << 20;

/// Compile `pattern` with faultlab's limits; the error is a message a user can act on.
pub fn compile(pattern: &str) -> Result<Regex, String> {
    regex::RegexBuilder::new(pattern).size_limit(SIZE_LIMIT).build().map_err(|e| match e {
        regex::Error::CompiledTooBig(_) => "the regular expression is too large".to_string(),
        // The parser's message spans lines (the pattern, a caret, the error): keep its last line.
        e => format!(
            "invalid regular expression: {}",
            e.to_string().lines().rfind(|l| !l.trim().is_empty()).unwrap_or("").trim().trim_start_matches("error: ")
        ),
    })
}

/// A regular expression field, compiled when decoded.
#[derive(Clone, Debug)]
pub struct Pattern(Regex);

impl Pattern {
    pub fn new(pattern: &str) -> Result<Self, String> {
        compile(pattern).map(Pattern)
    }
    pub fn as_str(&self) -> &str {
        self.0.as_str()
    }
    pub fn is_match(&self, text: &str) -> bool {
        self.0.is_match(text)
    }
    /// Every match in `text` replaced by `with` (`$1` names a group, as the regex crate's).
    pub fn replace_all(&self, text: &str, with: &str) -> String {
        self.0.replace_all(text, with).into_owned()
    }
}

impl std::fmt::Display for Pattern {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl PartialEq for Pattern {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for Pattern {}

impl serde::Serialize for Pattern {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> serde::Deserialize<'de> for Pattern {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Pattern::new(&s).map_err(serde::de::Error::custom)
    }
}

impl schemars::JsonSchema for Pattern {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Pattern".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({ "type": "string", "format": "regex", "description": "A regular expression (Rust regex syntax)" })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compiles_when_decoded() {
        let p: Pattern = serde_json::from_str(r#""panic: .*too many""#).unwrap();
        assert!(p.is_match("panic: runtime: too many open files"));
        let e = serde_json::from_str::<Pattern>(r#""failed (to get""#).unwrap_err().to_string();
        assert!(e.starts_with("invalid regular expression: unclosed group"), "{e}");
        let e = compile("(a{1000}){1000}").unwrap_err();
        assert_eq!(e, "the regular expression is too large");
    }
}
