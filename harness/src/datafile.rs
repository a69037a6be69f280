//! Strict decoding of faultlab's versioned data files (`apiVersion: faultlab.dev/v1alpha1`).
//!
//! Unknown fields are errors, and every error names the file, line and column.

use std::path::{Path, PathBuf};

use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use thiserror::Error;

/// The only data-file version this build reads.
pub const API_VERSION: &str = "faultlab.dev/v1alpha1";

/// `apiVersion: faultlab.dev/v1alpha1`, and nothing else.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum ApiVersion {
    #[default]
    #[serde(rename = "faultlab.dev/v1alpha1")]
    V1alpha1,
}

#[derive(Debug, Error)]
pub enum DataFileError {
    #[error("{}: cannot read: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}:{line}:{column}: {message}", path.display())]
    Decode { path: PathBuf, line: u64, column: u64, message: String },
    #[error("{}: {message}", path.display())]
    DecodeUnplaced { path: PathBuf, message: String },
    #[error("{}: {field}: {message}", path.display())]
    Invalid { path: PathBuf, field: String, message: String },
    #[error("{}: is {what}; only regular files are read", path.display())]
    NotRegular { path: PathBuf, what: String },
    #[error("{}: is {size} bytes, more than the {limit} a data file may have", path.display())]
    TooLarge { path: PathBuf, size: u64, limit: u64 },
}

/// The largest data file read (scenario files are a few kilobytes; manifests a few more).
pub const MAX_FILE_BYTES: u64 = 1 << 20;

/// Read and strictly decode a data file.
pub fn read<T: DeserializeOwned>(path: &Path) -> Result<T, DataFileError> {
    let text = read_text(path)?;
    decode(path, &text)
}

/// Read a data file's text: a regular file (after symlinks) of at most [`MAX_FILE_BYTES`], in UTF-8.
/// A FIFO, a device, a directory or a socket is refused without being read, so nothing can block.
pub fn read_text(path: &Path) -> Result<String, DataFileError> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let not_regular = |what: &str| DataFileError::NotRegular { path: path.to_owned(), what: what.to_string() };
    let read_err = |source: std::io::Error| DataFileError::Read { path: path.to_owned(), source };
    // Look before opening (opening a FIFO for reading blocks until a writer comes), and open without
    // blocking in case it changed in between; then check what was opened.
    let meta = match std::fs::metadata(path) {
        Ok(meta) => meta,
        Err(e) => {
            if let Ok(target) = std::fs::read_link(path) {
                let why = if e.raw_os_error() == Some(libc::ELOOP) { "a loop of symbolic links" } else { "it leads nowhere" };
                return Err(not_regular(&format!("a symbolic link to {} that cannot be followed ({why})", target.display())));
            }
            return Err(read_err(e));
        }
    };
    if let Some(what) = file_kind(&meta) {
        return Err(not_regular(&format!("{what}, not a file")));
    }
    let file = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(path).map_err(read_err)?;
    let meta = file.metadata().map_err(read_err)?;
    if let Some(what) = file_kind(&meta) {
        return Err(not_regular(&format!("{what}, not a file")));
    }
    if meta.len() > MAX_FILE_BYTES {
        return Err(DataFileError::TooLarge { path: path.to_owned(), size: meta.len(), limit: MAX_FILE_BYTES });
    }
    let mut bytes = Vec::new();
    file.take(MAX_FILE_BYTES + 1).read_to_end(&mut bytes).map_err(read_err)?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(DataFileError::TooLarge { path: path.to_owned(), size: bytes.len() as u64, limit: MAX_FILE_BYTES });
    }
    String::from_utf8(bytes).map_err(|e| {
        let (line, column) = line_column(&e.as_bytes()[..e.utf8_error().valid_up_to()]);
        DataFileError::Decode { path: path.to_owned(), line, column, message: "the file is not UTF-8 text".into() }
    })
}

/// What a non-regular file is, for messages; `None` for a regular file.
pub fn file_kind(meta: &std::fs::Metadata) -> Option<&'static str> {
    use std::os::unix::fs::FileTypeExt;
    let t = meta.file_type();
    if t.is_file() {
        None
    } else if t.is_dir() {
        Some("a directory")
    } else if t.is_fifo() {
        Some("a FIFO (named pipe)")
    } else if t.is_socket() {
        Some("a socket")
    } else if t.is_block_device() || t.is_char_device() {
        Some("a device")
    } else {
        Some("not a regular file")
    }
}

/// The 1-based line and column just after `bytes`.
fn line_column(bytes: &[u8]) -> (u64, u64) {
    let line = bytes.iter().filter(|b| **b == b'\n').count() as u64 + 1;
    let column = bytes.iter().rev().take_while(|b| **b != b'\n').count() as u64 + 1;
    (line, column)
}

/// Parser limits for data files: far above what a real file needs, far below what would exhaust
/// memory (alias expansion, nesting, node and scalar counts).
pub fn options() -> serde_saphyr::Options {
    let mut budget = serde_saphyr::Budget::default();
    budget.max_aliases = 1_000;
    budget.max_anchors = 1_000;
    budget.max_depth = 48;
    budget.flow_nesting_limit = 48;
    budget.max_nodes = 100_000;
    budget.max_events = 200_000;
    budget.max_total_scalar_bytes = 8 << 20;
    budget.max_recorded_anchor_events = 100_000;
    budget.max_recorded_anchor_bytes = 8 << 20;
    budget.max_documents = 64;
    serde_saphyr::options! { with_snippet: false, budget: Some(budget) }
}

/// Strictly decode `text`, naming `path` in errors.
pub fn decode<T: DeserializeOwned>(path: &Path, text: &str) -> Result<T, DataFileError> {
    serde_saphyr::from_str_with_options::<T>(text, options()).map_err(|e| {
        let message = plain_message(&strip_location(&e.to_string()));
        match e.location() {
            Some(loc) if loc.line() > 0 => {
                let (line, column) = (loc.line(), loc.column());
                // The field the parser stopped at, as every other error names it.
                let message = match FieldLocations::of(text).field_at(line, column) {
                    Some(field) if !field.is_empty() => format!("{field}: {message}"),
                    _ => message,
                };
                DataFileError::Decode { path: path.to_owned(), line, column, message }
            }
            // Nothing placed it (an empty document, a budget breach): the start of the file.
            _ => DataFileError::Decode { path: path.to_owned(), line: 1, column: 1, message },
        }
    })
}

/// serde-saphyr appends ` at line L, column C`; we print the location ourselves, in front.
pub fn strip_location(message: &str) -> String {
    let first = message.lines().next().unwrap_or(message);
    match first.rfind(" at line ") {
        Some(i) => first[..i].to_string(),
        None => first.to_string(),
    }
}

/// The parser's and serde's words, in a user's: no option names, no Rust types.
pub fn plain_message(message: &str) -> String {
    let mut m = message.to_string();
    // "duplicate mapping key: x (set DuplicateKeyPolicy in Options to allow)", or
    // "duplicate mapping key: x, set DuplicateKeyPolicy in Options if acceptable".
    if let Some(i) = m.find(" (set DuplicateKeyPolicy").or_else(|| m.find(", set DuplicateKeyPolicy")) {
        m.truncate(i);
        m.push_str(" (each key may appear once)");
    }
    // "budget breached: Depth { depth: 49 }": the parser's limits, in words.
    if let Some(rest) = m.strip_prefix("budget breached: ") {
        let name: String = rest.chars().take_while(|c| c.is_ascii_alphanumeric()).collect();
        let what = match name.as_str() {
            "Aliases" | "AliasAnchorRatio" | "RecordedAnchorEvents" | "RecordedAnchorBytes" | "MergeKeys" => {
                "its aliases (*name) expand it far beyond what a data file needs"
            }
            "Anchors" => "it defines far more anchors (&name) than a data file needs",
            "Depth" | "SequenceUnbalanced" => "it is nested deeper than a data file needs",
            "Documents" => "it has more documents (---) than a data file needs",
            "Events" | "Nodes" => "it has far more values than a data file needs",
            "ScalarBytes" | "InputBytes" => "its text is far larger than a data file needs",
            _ => "it is larger or deeper than a data file needs",
        };
        return format!("refused without reading further: {what}");
    }
    if m.starts_with("recursion limit exceeded") {
        return "refused without reading further: it is nested deeper than a data file needs".into();
    }
    if m.starts_with("expected string scalar") {
        return "expected a text value, not a list or a mapping".into();
    }
    if m.starts_with("invalid boolean") {
        return "expected true or false".into();
    }
    if m.starts_with("cannot deserialize null into string") {
        return "is empty (null): expected a text value".into();
    }
    if m.starts_with("invalid char: cannot deserialize null") {
        return "is empty (null): expected one character".into();
    }
    let numbers: [(&str, &str); 12] = [
        ("u8", "a whole number from 0 to 255"),
        ("u16", "a whole number from 0 to 65535"),
        ("u32", "a whole number from 0 to 4294967295"),
        ("u64", "a whole number from 0 to 18446744073709551615"),
        ("usize", "a whole number from 0 to 18446744073709551615"),
        ("i8", "a whole number"),
        ("i16", "a whole number"),
        ("i32", "a whole number from -2147483648 to 2147483647"),
        ("i64", "a whole number"),
        ("isize", "a whole number"),
        ("f32", "a number"),
        ("f64", "a number"),
    ];
    for (ty, words) in numbers {
        for pattern in [format!("invalid {ty}"), format!("expected {ty}"), format!("an {ty}"), format!("a {ty}")] {
            if m.contains(&pattern) {
                m = m.replace(&pattern, &format!("expected {words}"));
            }
        }
    }
    if m.contains("expected end of mapping after enum variant value") {
        m = "a fault is a mapping with exactly one key, the fault's name (for example `pause-missing: {}`); this has more".into();
    }
    m = m.replace("externally tagged enum expected scalar or mapping", "expected a name, or a mapping with one key")
        .replace("externally tagged enum", "a name");
    m = regex::Regex::new(r"\ba map\b").expect("valid").replace_all(&m, "a mapping").into_owned();
    m = m.replace("unknown variant", "unknown name").replace("enum variant", "name").replace("invalid type: ", "wrong kind of value: ");
    m
}

/// Where each field of a YAML document is: a field path (`symptom.within`, `fix[0].step`,
/// `workload.manifests[0].inline`) to the 1-based line and column of its value. Built from the
/// parser's events, so it agrees with what was decoded; aliases point at the alias, and a block
/// scalar (`|`, `>`) at its content's first line (so an inline manifest's line N is at line + N - 1).
#[derive(Clone, Debug, Default)]
pub struct FieldLocations {
    map: std::collections::HashMap<String, (u64, u64)>,
    /// Every key and value in document order: where it starts and the field it belongs to.
    positions: Vec<((u64, u64), String)>,
}

impl FieldLocations {
    pub fn of(text: &str) -> FieldLocations {
        use serde_saphyr::granit_parser::{Event, Parser};
        enum Frame {
            Map { path: String, key: Option<String> },
            Seq { path: String, index: usize },
        }
        fn child(stack: &mut [Frame]) -> Option<String> {
            match stack.last_mut()? {
                Frame::Map { path, key } => {
                    let k = key.take()?;
                    Some(if path.is_empty() { k } else { format!("{path}.{k}") })
                }
                Frame::Seq { path, index } => {
                    let p = format!("{path}[{index}]");
                    *index += 1;
                    Some(p)
                }
            }
        }
        let mut out = FieldLocations::default();
        let mut stack: Vec<Frame> = Vec::new();
        let mut documents = 0;
        for item in Parser::new_from_str(text).take(200_000) {
            let Ok((event, span)) = item else { break };
            let at = (span.start.line() as u64, span.start.col() as u64 + 1);
            match event {
                Event::DocumentStart(..) => {
                    documents += 1;
                    if documents > 1 {
                        break;
                    }
                }
                Event::Scalar(value, ..) => {
                    if let Some(Frame::Map { key, path }) = stack.last_mut() {
                        if key.is_none() {
                            let k = value.into_owned();
                            out.positions.push((at, if path.is_empty() { k.clone() } else { format!("{path}.{k}") }));
                            *key = Some(k);
                            continue;
                        }
                    }
                    if let Some(p) = child(&mut stack) {
                        out.positions.push((at, p.clone()));
                        out.map.entry(p).or_insert(at);
                    }
                }
                Event::Alias(_) => {
                    if let Some(p) = child(&mut stack) {
                        out.positions.push((at, p.clone()));
                        out.map.entry(p).or_insert(at);
                    }
                }
                Event::MappingStart(..) | Event::SequenceStart(..) => {
                    let path = if stack.is_empty() { String::new() } else { child(&mut stack).unwrap_or_default() };
                    if stack.len() > 64 {
                        break;
                    }
                    out.positions.push((at, path.clone()));
                    out.map.entry(path.clone()).or_insert(at);
                    stack.push(if matches!(event, Event::MappingStart(..)) {
                        Frame::Map { path, key: None }
                    } else {
                        Frame::Seq { path, index: 0 }
                    });
                }
                Event::MappingEnd | Event::SequenceEnd => {
                    stack.pop();
                }
                _ => {}
            }
        }
        out
    }

    /// The location of `field`, or of its nearest ancestor that is in the file (a missing optional
    /// field is placed at its parent), or the start of the file.
    pub fn locate(&self, field: &str) -> (u64, u64) {
        let mut f = field.to_string();
        loop {
            if let Some(at) = self.map.get(&f) {
                return *at;
            }
            match f.rfind(['.', '[']) {
                Some(i) => f.truncate(i),
                None => return self.map.get("").copied().unwrap_or((1, 1)),
            }
        }
    }

    /// The field at a location the parser reported: the key or value that starts there, else the
    /// last one before it (the outermost of those starting at the same place).
    pub fn field_at(&self, line: u64, column: u64) -> Option<String> {
        let at = (line, column);
        let before = self.positions.partition_point(|(p, _)| *p <= at);
        let last = self.positions[..before].last()?.0;
        let first = self.positions[..before].iter().position(|(p, _)| *p == last)?;
        Some(self.positions[first].1.clone())
    }

    /// The location of `field` itself, if it is in the file.
    pub fn get(&self, field: &str) -> Option<(u64, u64)> {
        self.map.get(field).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_locations_follow_the_document() {
        let text = "a: 1\nb:\n  c: two\n  d:\n    - x\n    - {e: 3}\nf: |\n  text\n";
        let l = FieldLocations::of(text);
        assert_eq!(l.get("a"), Some((1, 4)));
        assert_eq!(l.get("b.c"), Some((3, 6)));
        assert_eq!(l.get("b.d[0]"), Some((5, 7)));
        assert_eq!(l.get("b.d[1].e"), Some((6, 11)));
        // A block scalar is placed at its content's first line.
        assert_eq!(l.get("f"), Some((8, 3)));
        assert_eq!(l.locate("b.d[1].missing"), (6, 7));
        assert_eq!(l.locate("nowhere"), (1, 1));
        // Back from a location to the field: a value, a key, the outermost at a shared start.
        assert_eq!(l.field_at(3, 6).as_deref(), Some("b.c"));
        assert_eq!(l.field_at(3, 3).as_deref(), Some("b"));
        assert_eq!(l.field_at(4, 3).as_deref(), Some("b.d"));
        assert_eq!(l.field_at(6, 7).as_deref(), Some("b.d[1]"));
        assert_eq!(l.field_at(6, 12).as_deref(), Some("b.d[1].e"));
        assert_eq!(l.field_at(1, 1).as_deref(), Some(""));
    }

    #[test]
    fn decode_errors_name_the_field() {
        #[derive(Debug, serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        #[allow(dead_code)]
        struct T {
            a: u32,
            #[serde(default)]
            b: bool,
        }
        let err = |text: &str| decode::<T>(Path::new("t.yaml"), text).unwrap_err().to_string();
        assert_eq!(err("a: 4294967296\n"), "t.yaml:1:4: a: expected a whole number from 0 to 4294967295");
        assert_eq!(err("a: 1\nb: yes please\n"), "t.yaml:2:4: b: expected true or false");
        assert_eq!(err("a: 1\na: 2\n"), "t.yaml:2:1: a: duplicate mapping key: a (each key may appear once)");
        let deep = format!("a: 1\nb: {}{}\n", "[".repeat(60), "]".repeat(60));
        let e = decode::<serde_json::Value>(Path::new("t.yaml"), &deep).unwrap_err().to_string();
        assert!(e.contains("refused without reading further: it is nested deeper than a data file needs"), "{e}");
    }

    #[test]
    fn special_files_are_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("x.yaml");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let e = read_text(&fifo).unwrap_err().to_string();
        assert!(e.contains("is a FIFO (named pipe), not a file"), "{e}");
        let e = read_text(dir.path()).unwrap_err().to_string();
        assert!(e.contains("is a directory"), "{e}");
        let big = dir.path().join("big.yaml");
        std::fs::write(&big, vec![b'#'; MAX_FILE_BYTES as usize + 1]).unwrap();
        assert!(read_text(&big).unwrap_err().to_string().contains("more than the 1048576"));
        let bin = dir.path().join("bin.yaml");
        std::fs::write(&bin, b"a: 1\nb: \xff\n").unwrap();
        assert_eq!(read_text(&bin).unwrap_err().to_string(), format!("{}:2:4: the file is not UTF-8 text", bin.display()));
    }

    #[test]
    fn messages_speak_of_values_not_types() {
        assert_eq!(plain_message("invalid u64"), "expected a whole number from 0 to 18446744073709551615");
        assert_eq!(plain_message("duplicate mapping key: a (set DuplicateKeyPolicy in Options to allow)"), "duplicate mapping key: a (each key may appear once)");
        assert!(plain_message("expected end of mapping after enum variant value").contains("exactly one key"));
    }
}
