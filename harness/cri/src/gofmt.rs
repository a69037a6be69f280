//! The output formats crictl produces with Go's libraries, reproduced for `faultlab-cri`'s image
//! commands, so that a script written against crictl reads the same bytes:
//!
//! - [`human_size`]: `units.HumanSizeWithPrecision(size, 3)` of docker/go-units (SIZE column);
//! - [`tabwriter`]: `text/tabwriter` as crictl's tables use it (min width 20, padding 3, spaces);
//! - [`json`]: `encoding/json` `Marshal` + `Indent`: map keys sorted, `<`, `>`, `&` escaped
//!   (`crictl inspecti -o json`, whose output goes through a Go map);
//! - [`yaml`]: `sigs.k8s.io/yaml.JSONToYAML` (go-yaml v2): keys sorted, sequences not indented under
//!   their key, strings that would read as another type double-quoted.
//!
//! Simplifications, all outside what images and their info contain in practice: go-yaml folds long
//! plain strings with spaces at 80 columns and writes strings with line breaks as `|` literals; here
//! they stay on one line (line breaks double-quoted and escaped).

use serde_json::{Map, Value};

/// `units.HumanSizeWithPrecision(size, 3)`: decimal units, three significant digits, Go's `%g`
/// (so 999 999 bytes is `1e+03kB`, as crictl prints it).
pub fn human_size(bytes: u64) -> String {
    const UNITS: [&str; 9] = ["B", "kB", "MB", "GB", "TB", "PB", "EB", "ZB", "YB"];
    let mut size = bytes as f64;
    let mut unit = 0;
    while size >= 1000.0 && unit < UNITS.len() - 1 {
        size /= 1000.0;
        unit += 1;
    }
    format!("{}{}", format_g(size, Some(3)), UNITS[unit])
}

/// Go's `strconv.FormatFloat(x, 'g', prec, 64)` for finite `x` (`None`: the shortest representation,
/// `%v` of a float64).
pub fn format_g(x: f64, prec: Option<usize>) -> String {
    if x == 0.0 {
        return if x.is_sign_negative() { "-0".into() } else { "0".into() };
    }
    if !x.is_finite() {
        return if x.is_nan() { "NaN".into() } else if x > 0.0 { "+Inf".into() } else { "-Inf".into() };
    }
    let negative = x < 0.0;
    let x = x.abs();
    // The decimal digits (rounded to `prec` significant ones, or the shortest that read back) and the
    // decimal exponent.
    let text = match prec {
        Some(p) => format!("{:.*e}", p.max(1) - 1, x),
        None => format!("{x:e}"),
    };
    let (mantissa, exponent) = text.split_once('e').expect("Rust's {:e} has an exponent");
    let exp: i32 = exponent.parse().expect("Rust's {:e} exponent is a number");
    let mut digits: Vec<u8> = mantissa.bytes().filter(u8::is_ascii_digit).collect();
    while digits.len() > 1 && digits.last() == Some(&b'0') {
        digits.pop();
    }
    let nd = digits.len() as i32;
    let dp = exp + 1;
    let mut eprec = match prec {
        Some(p) => p.max(1) as i32,
        None => 6,
    };
    if prec.is_some() && eprec > nd && nd >= dp {
        eprec = nd;
    }
    let mut out = String::new();
    if negative {
        out.push('-');
    }
    if exp < -4 || exp >= eprec {
        let shown = match prec {
            Some(p) => (p.max(1) as i32).min(nd),
            None => nd,
        } as usize;
        out.push(digits[0] as char);
        if shown > 1 {
            out.push('.');
            out.extend(digits[1..shown].iter().map(|&d| d as char));
        }
        out.push('e');
        out.push(if exp < 0 { '-' } else { '+' });
        out.push_str(&format!("{:02}", exp.abs()));
    } else {
        let p = match prec {
            Some(p) if (p as i32) <= dp => p as i32,
            _ => nd,
        };
        let decimals = (p - dp).max(0);
        let digit = |i: i32| if i >= 0 && i < nd { digits[i as usize] as char } else { '0' };
        if dp > 0 {
            (0..dp).for_each(|i| out.push(digit(i)));
        } else {
            out.push('0');
        }
        if decimals > 0 {
            out.push('.');
            (0..decimals).for_each(|i| out.push(digit(dp + i)));
        }
    }
    out
}

/// `text/tabwriter` with crictl's settings for rows of equal length: every cell but the last of a
/// row is padded with spaces to its column's width, the widest cell plus `padding`, at least
/// `minwidth`. Widths count characters, as tabwriter counts runes.
pub fn tabwriter(rows: &[Vec<String>], minwidth: usize, padding: usize) -> String {
    let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
    let mut widths = vec![minwidth; columns];
    for row in rows {
        for (i, cell) in row.iter().enumerate().take(row.len().saturating_sub(1)) {
            widths[i] = widths[i].max(cell.chars().count() + padding);
        }
    }
    let mut out = String::new();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            out.push_str(cell);
            if i + 1 < row.len() {
                out.extend(std::iter::repeat_n(' ', widths[i] - cell.chars().count()));
            }
        }
        out.push('\n');
    }
    out
}

/// `encoding/json`: `Marshal` (keys sorted, HTML-safe escaping) and, with `indent`, `Indent` with
/// that indent (empty objects and arrays stay `{}` and `[]`).
pub fn json(value: &Value, indent: Option<&str>) -> String {
    let mut out = String::new();
    write_json(&mut out, value, indent, 0);
    out
}

fn write_json(out: &mut String, value: &Value, indent: Option<&str>, depth: usize) {
    let newline = |out: &mut String, depth: usize| {
        if let Some(unit) = indent {
            out.push('\n');
            (0..depth).for_each(|_| out.push_str(unit));
        }
    };
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => out.push_str(&n.to_string()),
        Value::String(s) => json_string(out, s),
        Value::Array(items) if items.is_empty() => out.push_str("[]"),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                newline(out, depth + 1);
                write_json(out, item, indent, depth + 1);
            }
            newline(out, depth);
            out.push(']');
        }
        Value::Object(map) if map.is_empty() => out.push_str("{}"),
        Value::Object(map) => {
            out.push('{');
            for (i, (key, item)) in sorted(map).into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                newline(out, depth + 1);
                json_string(out, key);
                out.push(':');
                if indent.is_some() {
                    out.push(' ');
                }
                write_json(out, item, indent, depth + 1);
            }
            newline(out, depth);
            out.push('}');
        }
    }
}

fn json_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => out.push_str(&format!("\\u{:04x}", c as u32)),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Object entries in Go's order for map keys (byte order), whatever the map keeps.
pub fn sorted(map: &Map<String, Value>) -> Vec<(&String, &Value)> {
    let mut entries: Vec<_> = map.iter().collect();
    entries.sort_by(|a, b| a.0.cmp(b.0));
    entries
}

/// `sigs.k8s.io/yaml.JSONToYAML`: the document go-yaml v2 writes for a JSON value.
pub fn yaml(value: &Value) -> String {
    let mut out = String::new();
    match value {
        Value::Object(m) if !m.is_empty() => yaml_block(&mut out, value, 0, false),
        Value::Array(a) if !a.is_empty() => yaml_block(&mut out, value, 0, false),
        scalar => {
            out.push_str(&yaml_scalar(scalar));
            out.push('\n');
        }
    }
    out
}

/// A non-empty mapping or sequence at `indent`; `inline`: the cursor is already after `- `.
fn yaml_block(out: &mut String, value: &Value, indent: usize, inline: bool) {
    let pad = |out: &mut String, first: bool| {
        if !(inline && first) {
            out.extend(std::iter::repeat_n(' ', indent));
        }
    };
    match value {
        Value::Object(map) => {
            let mut entries: Vec<_> = map.iter().collect();
            entries.sort_by(|a, b| yaml_key_order(a.0, b.0));
            for (i, (key, item)) in entries.into_iter().enumerate() {
                pad(out, i == 0);
                out.push_str(&yaml_string(key));
                out.push(':');
                match item {
                    Value::Object(m) if !m.is_empty() => {
                        out.push('\n');
                        yaml_block(out, item, indent + 2, false);
                    }
                    // go-yaml v2 does not indent a sequence under its key.
                    Value::Array(a) if !a.is_empty() => {
                        out.push('\n');
                        yaml_block(out, item, indent, false);
                    }
                    scalar => {
                        out.push(' ');
                        out.push_str(&yaml_scalar(scalar));
                        out.push('\n');
                    }
                }
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                pad(out, i == 0);
                out.push_str("- ");
                match item {
                    Value::Object(m) if !m.is_empty() => yaml_block(out, item, indent + 2, true),
                    Value::Array(a) if !a.is_empty() => yaml_block(out, item, indent + 2, true),
                    scalar => {
                        out.push_str(&yaml_scalar(scalar));
                        out.push('\n');
                    }
                }
            }
        }
        _ => unreachable!("yaml_block takes a mapping or a sequence"),
    }
}

fn yaml_scalar(value: &Value) -> String {
    match value {
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) if n.is_i64() || n.is_u64() => n.to_string(),
        Value::Number(n) => match n.as_f64() {
            Some(f) if f.is_nan() => ".nan".into(),
            Some(f) if f.is_infinite() => if f > 0.0 { ".inf" } else { "-.inf" }.into(),
            Some(f) => format_g(f, None),
            None => n.to_string(),
        },
        Value::String(s) => yaml_string(s),
        Value::Array(_) => "[]".into(),
        Value::Object(_) => "{}".into(),
    }
}

/// go-yaml v2's key order: letters after other characters, runs of digits compared as numbers.
fn yaml_key_order(a: &str, b: &str) -> std::cmp::Ordering {
    use std::cmp::Ordering;
    let (ar, br): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    for i in 0..ar.len().min(br.len()) {
        if ar[i] == br[i] {
            continue;
        }
        let (al, bl) = (ar[i].is_alphabetic(), br[i].is_alphabetic());
        if al && bl {
            return ar[i].cmp(&br[i]);
        }
        if al || bl {
            return if bl { Ordering::Less } else { Ordering::Greater };
        }
        let (mut an, mut bn): (i64, i64) = (0, 0);
        if ar[i] == '0' || br[i] == '0' {
            let mut j = i;
            while j > 0 && ar[j - 1].is_ascii_digit() {
                j -= 1;
                if ar[j] != '0' {
                    an = 1;
                    bn = 1;
                    break;
                }
            }
        }
        let mut ai = i;
        while ai < ar.len() && ar[ai].is_ascii_digit() {
            an = an.wrapping_mul(10).wrapping_add(ar[ai] as i64 - '0' as i64);
            ai += 1;
        }
        let mut bi = i;
        while bi < br.len() && br[bi].is_ascii_digit() {
            bn = bn.wrapping_mul(10).wrapping_add(br[bi] as i64 - '0' as i64);
            bi += 1;
        }
        if an != bn {
            return an.cmp(&bn);
        }
        if ai != bi {
            return ai.cmp(&bi);
        }
        return ar[i].cmp(&br[i]);
    }
    ar.len().cmp(&br.len())
}

/// A string as go-yaml v2 writes it: plain when that reads back as the same string, else
/// single-quoted, else double-quoted.
fn yaml_string(s: &str) -> String {
    if yaml_resolves_to_other_type(s) || s.contains('\n') || s.chars().any(yaml_special) {
        return yaml_double_quoted(s);
    }
    if yaml_plain_allowed(s) {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "''"))
    }
}

/// go-yaml's emitter takes these only in double quotes (not printable, or a byte-order mark).
fn yaml_special(c: char) -> bool {
    let printable = matches!(c, '\n' | '\u{20}'..='\u{7e}' | '\u{85}' | '\u{a0}'..='\u{d7ff}' | '\u{e000}'..='\u{fffd}' | '\u{10000}'..='\u{10ffff}');
    !printable || c == '\u{feff}'
}

/// Whether go-yaml v2 would read `s`, unquoted, as something other than a string (null, bool, int,
/// float, timestamp, merge key, sexagesimal float): then it writes `s` double-quoted.
fn yaml_resolves_to_other_type(s: &str) -> bool {
    const WORDS: &[&str] = &[
        "", "~", "null", "Null", "NULL", "y", "Y", "yes", "Yes", "YES", "on", "On", "ON", "true", "True", "TRUE", "n", "N", "no", "No", "NO", "off",
        "Off", "OFF", "false", "False", "FALSE", ".nan", ".NaN", ".NAN", ".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF", "-.inf", "-.Inf", "-.INF", "<<",
    ];
    if WORDS.contains(&s) {
        return true;
    }
    let Some(first) = s.chars().next() else { return true };
    if !(first.is_ascii_digit() || matches!(first, '+' | '-' | '.')) {
        return false;
    }
    use std::sync::LazyLock;
    static INT: LazyLock<regex::Regex> = LazyLock::new(|| regex::Regex::new(r"^[-+]?(0[xX][0-9a-fA-F]+|0[oO][0-7]+|0[bB][01]+|[0-9]+)$").unwrap());
    static FLOAT: LazyLock<regex::Regex> = LazyLock::new(|| regex::Regex::new(r"^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$").unwrap());
    static BASE60: LazyLock<regex::Regex> = LazyLock::new(|| regex::Regex::new(r"^[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?$").unwrap());
    static TIME: LazyLock<regex::Regex> = LazyLock::new(|| {
        regex::Regex::new(r"^[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}(([Tt][0-9]{1,2}:[0-9]{1,2}:[0-9]{1,2}(\.[0-9]+)?(Z|[-+][0-9]{2}:[0-9]{2}))|( [0-9]{1,2}:[0-9]{1,2}:[0-9]{1,2}(\.[0-9]+)?))?$").unwrap()
    });
    let plain = s.replace('_', "");
    INT.is_match(&plain) || FLOAT.is_match(&plain) || BASE60.is_match(s) || (first.is_ascii_digit() && TIME.is_match(s))
}

/// go-yaml's analysis of a block-context plain scalar (no line breaks here).
fn yaml_plain_allowed(s: &str) -> bool {
    let chars: Vec<char> = s.chars().collect();
    let Some(&first) = chars.first() else { return false };
    if s.starts_with("---") || s.starts_with("...") {
        return false;
    }
    if first == ' ' || chars.last() == Some(&' ') {
        return false;
    }
    let followed_by_space = |i: usize| chars.get(i + 1).is_none_or(|c| matches!(c, ' ' | '\t' | '\n' | '\r'));
    if "#,[]{}&*!|>'\"%@`".contains(first) {
        return false;
    }
    if matches!(first, '?' | ':' | '-') && followed_by_space(0) {
        return false;
    }
    for (i, &c) in chars.iter().enumerate().skip(1) {
        if c == ':' && followed_by_space(i) {
            return false;
        }
        if c == '#' && matches!(chars[i - 1], ' ' | '\t') {
            return false;
        }
    }
    true
}

fn yaml_double_quoted(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\0' => out.push_str("\\0"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\u{b}' => out.push_str("\\v"),
            '\u{c}' => out.push_str("\\f"),
            '\r' => out.push_str("\\r"),
            '\u{1b}' => out.push_str("\\e"),
            '\u{85}' => out.push_str("\\N"),
            '\u{a0}' => out.push_str("\\_"),
            '\u{2028}' => out.push_str("\\L"),
            '\u{2029}' => out.push_str("\\P"),
            c if yaml_special(c) && (c as u32) <= 0xff => out.push_str(&format!("\\x{:02X}", c as u32)),
            c if yaml_special(c) && (c as u32) <= 0xffff => out.push_str(&format!("\\u{:04X}", c as u32)),
            c if yaml_special(c) => out.push_str(&format!("\\U{:08X}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn sizes_read_as_crictl_prints_them() {
        // HumanSizeWithPrecision(x, 3) = fmt.Sprintf("%.3g%s", ...), values checked against Go's %g rules.
        let cases = [
            (0, "0B"),
            (5, "5B"),
            (999, "999B"),
            (1000, "1kB"),
            (1125, "1.12kB"), // a tie, rounded to even as Go does
            (1536, "1.54kB"),
            (12_345, "12.3kB"),
            (100_000, "100kB"),
            (999_499, "999kB"),
            (999_999, "1e+03kB"),
            (2_097_152, "2.1MB"),
            (696_832, "697kB"),
            (1_234_567_890, "1.23GB"),
            (u64::MAX, "18.4EB"),
        ];
        for (bytes, text) in cases {
            assert_eq!(human_size(bytes), text, "{bytes}");
        }
        assert_eq!(format_g(1e21, None), "1e+21");
        assert_eq!(format_g(123456.0, None), "123456");
        assert_eq!(format_g(1234567.0, None), "1.234567e+06");
        assert_eq!(format_g(0.0001, None), "0.0001");
        assert_eq!(format_g(0.00001, None), "1e-05");
        assert_eq!(format_g(1.5, None), "1.5");
    }

    #[test]
    fn tables_align_as_tabwriter_does() {
        let rows = vec![
            vec!["IMAGE".to_string(), "TAG".into(), "IMAGE ID".into(), "SIZE".into()],
            vec!["faultlab.invalid/busybox".into(), "1.35".into(), "a3ab598d21bd9".into(), "2.1MB".into()],
        ];
        let text = tabwriter(&rows, 20, 3);
        assert_eq!(
            text,
            "IMAGE                      TAG                 IMAGE ID            SIZE\n\
             faultlab.invalid/busybox   1.35                a3ab598d21bd9       2.1MB\n"
        );
    }

    #[test]
    fn json_is_go_json_marshal_and_indent() {
        let value = json!({"status": {"repoTags": ["a<b>&c"], "id": "x", "uid": null, "empty": {}, "list": []}, "info": {"n": 1}});
        assert_eq!(
            json(&value, Some("  ")),
            "{\n  \"info\": {\n    \"n\": 1\n  },\n  \"status\": {\n    \"empty\": {},\n    \"id\": \"x\",\n    \"list\": [],\n    \"repoTags\": [\n      \"a\\u003cb\\u003e\\u0026c\"\n    ],\n    \"uid\": null\n  }\n}"
        );
        assert_eq!(json(&json!({"b": [1, true], "a": "\u{1}"}), None), "{\"a\":\"\\u0001\",\"b\":[1,true]}");
    }

    #[test]
    fn yaml_is_what_jsontoyaml_writes() {
        let value = json!({"images": [
            {"id": "sha256:ab", "repoTags": ["faultlab.invalid/busybox:1.35"], "repoDigests": [], "size": "2097152",
             "username": "", "pinned": false, "uid": {"value": "0"}, "spec": {"image": "x", "annotations": {}}},
        ]});
        assert_eq!(
            yaml(&value),
            "images:\n\
             - id: sha256:ab\n  \
               pinned: false\n  \
               repoDigests: []\n  \
               repoTags:\n  \
               - faultlab.invalid/busybox:1.35\n  \
               size: \"2097152\"\n  \
               spec:\n    \
                 annotations: {}\n    \
                 image: x\n  \
               uid:\n    \
                 value: \"0\"\n  \
               username: \"\"\n"
        );
        assert_eq!(yaml(&json!([[1, 2], "a"])), "- - 1\n  - 2\n- a\n");
        for (s, out) in [
            ("yes", "\"yes\""),
            ("1.5", "\"1.5\""),
            ("0x1F", "\"0x1F\""),
            ("1_000", "\"1_000\""),
            ("2024-01-02T03:04:05Z", "\"2024-01-02T03:04:05Z\""),
            ("1:20", "\"1:20\""),
            ("sha256:abc", "sha256:abc"),
            ("a: b", "'a: b'"),
            ("- x", "'- x'"),
            ("*x", "'*x'"),
            ("it's", "it's"),
            ("a#b", "a#b"),
            ("x #y", "'x #y'"),
            (" lead", "' lead'"),
            ("two\nlines", "\"two\\nlines\""),
            ("tab\there", "\"tab\\there\""),
        ] {
            assert_eq!(yaml_string(s), out, "{s:?}");
        }
        let mut keys = vec!["a10", "a2", "b", "_x", "Z", "a"];
        keys.sort_by(|a, b| yaml_key_order(a, b));
        assert_eq!(keys, ["_x", "Z", "a", "a2", "a10", "b"]);
    }
}
