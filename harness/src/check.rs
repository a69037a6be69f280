//! Value checks for data files: what the schema cannot say (ranges, Kubernetes names, quantities,
//! label selectors). Each check returns the [`Problem`]s it found, named by the field's path in the
//! file (`symptom.within`, `fault.inotify-limit.headroom`); the scenario loader turns paths into
//! `file:line:column`.
//!
//! Leaf module: it depends on nothing else of faultlab's.

use std::fmt;

/// One thing wrong with a value, at a field path (dotted keys, `[i]` for list items).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    pub field: String,
    pub message: String,
}

impl Problem {
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        Problem { field: field.into(), message: message.into() }
    }

    /// The same problem under a parent path: `headroom` under `fault.inotify-limit`.
    pub fn under(mut self, parent: &str) -> Self {
        self.field = if self.field.is_empty() {
            parent.to_string()
        } else if self.field.starts_with('[') {
            format!("{parent}{}", self.field)
        } else {
            format!("{parent}.{}", self.field)
        };
        self
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.field.is_empty() {
            write!(f, "{}", self.message)
        } else {
            write!(f, "{}: {}", self.field, self.message)
        }
    }
}

/// `value` within `min..=max`, else a problem saying the range and why.
pub fn range(field: &str, value: u64, min: u64, max: u64, why: &str) -> Option<Problem> {
    (value < min || value > max).then(|| Problem::new(field, format!("{value} is out of range: it must be {min} to {max} ({why})")))
}

/// The largest value a Linux `int` sysctl takes (2^31 - 1).
pub const SYSCTL_INT_MAX: u64 = i32::MAX as u64;

/// A DNS-1123 label (63 characters at most, lowercase letters, digits and `-`, starting and ending
/// with a letter or digit): namespace names, Service names, label-free object names.
pub fn dns_label(field: &str, value: &str) -> Option<Problem> {
    let why = dns_label_why(value)?;
    Some(Problem::new(field, format!("{value:?} is not a valid Kubernetes name: {why} (a DNS-1123 label: at most 63 lowercase letters, digits and '-', starting and ending with a letter or digit)")))
}

fn dns_label_why(value: &str) -> Option<&'static str> {
    if value.is_empty() {
        return Some("it is empty");
    }
    if value.len() > 63 {
        return Some("it is longer than 63 characters");
    }
    if !value.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-') {
        return Some("it has a character other than a-z, 0-9 and '-'");
    }
    if value.starts_with('-') || value.ends_with('-') {
        return Some("it starts or ends with '-'");
    }
    None
}

/// A DNS-1123 subdomain (253 characters at most, labels separated by `.`): most object names
/// (ConfigMaps, claims, StorageClasses).
pub fn dns_subdomain(field: &str, value: &str) -> Option<Problem> {
    let why = if value.is_empty() {
        Some("it is empty")
    } else if value.len() > 253 {
        Some("it is longer than 253 characters")
    } else if !value.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.') {
        Some("it has a character other than a-z, 0-9, '-' and '.'")
    } else if value.split('.').any(|l| l.is_empty() || l.starts_with('-') || l.ends_with('-')) {
        Some("a part between dots is empty or starts or ends with '-'")
    } else {
        None
    }?;
    Some(Problem::new(field, format!("{value:?} is not a valid Kubernetes object name: {why} (a DNS-1123 subdomain)")))
}

/// A Kubernetes quantity (`500m`, `2`, `1Gi`, `1.5G`, `1e3`): its value in milli-units, or a problem.
/// Negative quantities are refused: nothing faultlab configures is negative.
pub fn quantity_milli(field: &str, value: &str) -> Result<u128, Problem> {
    parse_quantity_milli(value).ok_or_else(|| {
        Problem::new(
            field,
            format!("{value:?} is not a Kubernetes quantity (a non-negative number with an optional suffix: 500m, 2, 1.5, 1Gi, 512Mi, 1G)"),
        )
    })
}

fn parse_quantity_milli(value: &str) -> Option<u128> {
    let s = value.trim();
    if s.is_empty() || s.len() > 64 {
        return None;
    }
    let s = s.strip_prefix('+').unwrap_or(s);
    let split = s.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(s.len());
    let (number, suffix) = s.split_at(split);
    if number.is_empty() || number == "." || number.matches('.').count() > 1 {
        return None;
    }
    let (whole, frac) = number.split_once('.').unwrap_or((number, ""));
    // Milli-units: whole * 1000 + the first three fraction digits (rounded up, as Kubernetes does).
    let whole: u128 = if whole.is_empty() { 0 } else { whole.parse().ok()? };
    let mut milli = whole.checked_mul(1000)?;
    let digits: Vec<u32> = frac.chars().map(|c| c.to_digit(10)).collect::<Option<_>>()?;
    for (i, d) in digits.iter().take(3).enumerate() {
        milli += u128::from(*d) * 10u128.pow(2 - i as u32);
    }
    if digits.iter().skip(3).any(|d| *d > 0) {
        milli += 1;
    }
    let factor: u128 = match suffix {
        "" => return Some(milli),
        "m" => return Some(milli.div_ceil(1000)),
        "k" => 1_000,
        "M" => 1_000_000,
        "G" => 1_000_000_000,
        "T" => 1_000_000_000_000,
        "P" => 1_000_000_000_000_000,
        "E" => 1_000_000_000_000_000_000,
        "Ki" => 1 << 10,
        "Mi" => 1 << 20,
        "Gi" => 1 << 30,
        "Ti" => 1 << 40,
        "Pi" => 1 << 50,
        "Ei" => 1 << 60,
        e if e.starts_with(['e', 'E']) => {
            let exp: u32 = e[1..].parse().ok()?;
            if exp > 18 {
                return None;
            }
            10u128.pow(exp)
        }
        _ => return None,
    };
    milli.checked_mul(factor)
}

/// A label selector as `kubectl get -l` takes it (equality and set-based), not empty: a selector that
/// cannot select nothing would select everything.
pub fn label_selector(field: &str, value: &str) -> Option<Problem> {
    let why = selector_why(value)?;
    Some(Problem::new(field, format!("{value:?} is not a usable label selector: {why} (for example app=web, or tier in (web,api))")))
}

fn selector_why(value: &str) -> Option<String> {
    if value.trim().is_empty() {
        return Some("it is empty, which would select every pod in the namespace".into());
    }
    for req in split_requirements(value) {
        let req = req.trim();
        if req.is_empty() {
            return Some("it has an empty requirement (a stray comma)".into());
        }
        let key = if let Some(rest) = req.strip_prefix('!') {
            rest.trim()
        } else if let Some(i) = req.find(" in ").or_else(|| req.find(" notin ")) {
            let (key, rest) = req.split_at(i);
            let values = rest.trim_start().trim_start_matches("notin").trim_start_matches("in").trim();
            let Some(inner) = values.strip_prefix('(').and_then(|v| v.strip_suffix(')')) else {
                return Some(format!("{req:?}: a set needs its values in parentheses"));
            };
            for v in inner.split(',') {
                if let Some(why) = label_value_why(v.trim()) {
                    return Some(format!("{req:?}: value {:?} {why}", v.trim()));
                }
            }
            key.trim()
        } else if let Some((key, v)) = req.split_once("!=").or_else(|| req.split_once("==")).or_else(|| req.split_once('=')) {
            if let Some(why) = label_value_why(v.trim()) {
                return Some(format!("{req:?}: value {:?} {why}", v.trim()));
            }
            key.trim()
        } else {
            req
        };
        if let Some(why) = label_key_why(key) {
            return Some(format!("{req:?}: key {key:?} {why}"));
        }
    }
    None
}

/// Split on commas outside parentheses.
fn split_requirements(value: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0i32, 0);
    for (i, c) in value.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&value[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&value[start..]);
    out
}

fn label_key_why(key: &str) -> Option<&'static str> {
    let name = match key.split_once('/') {
        Some((prefix, name)) => {
            if dns_subdomain("", prefix).is_some() {
                return Some("has a prefix that is not a DNS subdomain");
            }
            name
        }
        None => key,
    };
    if name.is_empty() {
        return Some("is empty");
    }
    label_value_why(name)
}

fn label_value_why(value: &str) -> Option<&'static str> {
    if value.len() > 63 {
        return Some("is longer than 63 characters");
    }
    if !value.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.')) {
        return Some("has a character other than letters, digits, '-', '_' and '.'");
    }
    if !value.is_empty() && (!value.as_bytes()[0].is_ascii_alphanumeric() || !value.as_bytes()[value.len() - 1].is_ascii_alphanumeric()) {
        return Some("must start and end with a letter or digit");
    }
    None
}

/// Equality requirements of a selector (`app=web` → `("app", "web")`), to check that the workload's
/// pods carry them. Set-based and negative requirements are left out.
pub fn selector_equalities(value: &str) -> Vec<(String, String)> {
    split_requirements(value)
        .into_iter()
        .filter(|r| !r.contains(" in ") && !r.contains(" notin ") && !r.contains("!="))
        .filter_map(|r| r.split_once("==").or_else(|| r.split_once('=')))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect()
}

/// One of `allowed`, else a problem listing them (and the closest, if one is close).
pub fn one_of(field: &str, value: &str, allowed: &[&str]) -> Option<Problem> {
    if allowed.contains(&value) {
        return None;
    }
    let close = allowed.iter().copied().min_by_key(|a| edit_distance(a, value)).filter(|a| edit_distance(a, value) <= 2);
    let hint = close.map(|c| format!(" (did you mean {c:?}?)")).unwrap_or_default();
    Some(Problem::new(field, format!("{value:?} is not one of {}{hint}", allowed.join(", "))))
}

/// Levenshtein distance (for "did you mean").
pub fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != *cb)).min(row[j] + 1).min(row[j + 1] + 1);
            prev = cur;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_say_the_bounds() {
        assert_eq!(range("headroom", 5, 1, 10, "x"), None);
        let p = range("headroom", 0, 1, 10, "at least one instance").unwrap();
        assert_eq!(p.to_string(), "headroom: 0 is out of range: it must be 1 to 10 (at least one instance)");
        assert_eq!(p.under("fault.inotify-limit").field, "fault.inotify-limit.headroom");
        assert_eq!(Problem::new("[0]", "x").under("fix").field, "fix[0]");
    }

    #[test]
    fn kubernetes_names() {
        assert!(dns_label("n", "pause-missing").is_none());
        for bad in ["", "Pause_Missing", "-x", "x-", &"a".repeat(64)] {
            assert!(dns_label("n", bad).is_some(), "{bad:?}");
        }
        assert!(dns_subdomain("n", "app-config.v1").is_none());
        for bad in ["", "App", "a..b", "a.-b"] {
            assert!(dns_subdomain("n", bad).is_some(), "{bad:?}");
        }
    }

    #[test]
    fn quantities_as_kubernetes_reads_them() {
        let q = |s: &str| quantity_milli("q", s).ok();
        assert_eq!(q("500m"), Some(500));
        assert_eq!(q("2"), Some(2000));
        assert_eq!(q("1.5"), Some(1500));
        assert_eq!(q("1Gi"), Some(1000 * (1 << 30)));
        assert_eq!(q("1e3"), Some(1_000_000));
        assert_eq!(q("0.0001"), Some(1));
        for bad in ["", "lots", "-1Gi", "1.2.3", "1Qi", "Gi", "1e99"] {
            assert_eq!(q(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn selectors_must_parse_and_select_something() {
        for good in ["app=web", "app==web,tier!=db", "tier in (web, api)", "!canary", "app.kubernetes.io/name=web"] {
            assert_eq!(label_selector("s", good), None, "{good:?}");
        }
        for bad in ["", "  ", "app=web,", "app=we b", "tier in web", "=web", "app=-web", "a/b/c=x"] {
            assert!(label_selector("s", bad).is_some(), "{bad:?}");
        }
        assert_eq!(selector_equalities("app=web, tier==db, x!=y, k in (a)"), vec![("app".into(), "web".into()), ("tier".into(), "db".into())]);
    }

    #[test]
    fn one_of_suggests_the_closest() {
        assert_eq!(one_of("phase", "Running", &["Pending", "Running"]), None);
        let p = one_of("phase", "Runing", &["Pending", "Running"]).unwrap();
        assert!(p.message.contains("did you mean \"Running\""), "{p}");
        assert!(!one_of("type", "Other", &["Normal", "Warning"]).unwrap().message.contains("did you mean"));
    }
}
