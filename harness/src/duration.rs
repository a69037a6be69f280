//! Durations in data files: `90s`, `2m`, `1m30s`, `500ms`.

use std::time::Duration;

use thiserror::Error;

#[derive(Debug, Error, PartialEq, Eq)]
pub enum ParseDurationError {
    #[error("invalid duration {input:?}: expected a number with a unit, such as 90s, 2m, 1m30s or 500ms")]
    Syntax { input: String },
    #[error("duration {input:?} is too long: at most {} ({why})", format(*max))]
    TooLong { input: String, max: Duration, why: &'static str },
}

/// The longest duration parsed at all: 366 days (a year's leap day included).
pub const MAX: Duration = Duration::from_secs(366 * 24 * 3600);

/// The longest duration a scenario may give (a deadline or a wait): a day. A run that waits longer is
/// a run that hangs.
pub const MAX_IN_SCENARIO: Duration = Duration::from_secs(24 * 3600);

/// Parse `1h2m3s`, `90s`, `500ms`: at most [`MAX`], so adding it to an instant cannot overflow.
pub fn parse(input: &str) -> Result<Duration, ParseDurationError> {
    let d = parse_any(input)?;
    if d > MAX {
        return Err(ParseDurationError::TooLong { input: input.to_owned(), max: MAX, why: "a year" });
    }
    Ok(d)
}

fn parse_any(input: &str) -> Result<Duration, ParseDurationError> {
    let err = || ParseDurationError::Syntax { input: input.to_owned() };
    let too_long = || ParseDurationError::TooLong { input: input.to_owned(), max: MAX, why: "a year" };
    let s = input.trim();
    if s.is_empty() {
        return Err(err());
    }
    let mut total = Duration::ZERO;
    let mut rest = s;
    while !rest.is_empty() {
        let digits = rest.find(|c: char| !c.is_ascii_digit()).ok_or_else(err)?;
        if digits == 0 {
            return Err(err());
        }
        // More digits than a u64 holds is too long, not malformed.
        let value: u64 = rest[..digits].parse().map_err(|_| too_long())?;
        rest = &rest[digits..];
        let unit_len = rest.find(|c: char| c.is_ascii_digit()).unwrap_or(rest.len());
        let unit = &rest[..unit_len];
        rest = &rest[unit_len..];
        let part = match unit {
            "ms" => Some(Duration::from_millis(value)),
            "s" => Some(Duration::from_secs(value)),
            "m" => value.checked_mul(60).map(Duration::from_secs),
            "h" => value.checked_mul(3600).map(Duration::from_secs),
            _ => return Err(err()),
        };
        total = part.and_then(|p| total.checked_add(p)).ok_or_else(too_long)?;
    }
    Ok(total)
}

/// Format as the shortest of `1h2m3s` / `500ms`.
pub fn format(d: Duration) -> String {
    let ms = d.as_millis();
    if !ms.is_multiple_of(1000) {
        return format!("{ms}ms");
    }
    let mut secs = d.as_secs();
    if secs == 0 {
        return "0s".into();
    }
    let mut out = String::new();
    for (unit, size) in [("h", 3600), ("m", 60), ("s", 1)] {
        if secs >= size {
            out.push_str(&format!("{}{unit}", secs / size));
            secs %= size;
        }
    }
    out
}

/// A `Duration` field written as `90s` in data files.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Span(pub Duration);

impl serde::Serialize for Span {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format(self.0))
    }
}

impl<'de> serde::Deserialize<'de> for Span {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        let too_long = |input: String| {
            serde::de::Error::custom(ParseDurationError::TooLong { input, max: MAX_IN_SCENARIO, why: "a scenario that waits longer hangs" })
        };
        match parse(&s) {
            Ok(d) if d <= MAX_IN_SCENARIO => Ok(Span(d)),
            // Whatever the length, the limit a scenario has is the one to name.
            Ok(_) | Err(ParseDurationError::TooLong { .. }) => Err(too_long(s)),
            Err(e) => Err(serde::de::Error::custom(e)),
        }
    }
}

impl schemars::JsonSchema for Span {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Duration".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "pattern": "^([0-9]+(ms|s|m|h))+$",
            "description": "A duration such as 90s, 2m, 1m30s or 500ms"
        })
    }
}

/// Serde helper: a `Duration` as whole seconds (journal and reports).
pub mod serde_secs {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(d.as_secs_f64())
    }
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let secs = f64::deserialize(d)?;
        Duration::try_from_secs_f64(secs).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_formats() {
        assert_eq!(parse("90s").unwrap(), Duration::from_secs(90));
        assert_eq!(parse("1m30s").unwrap(), Duration::from_secs(90));
        assert_eq!(parse("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse("2h").unwrap(), Duration::from_secs(7200));
        assert_eq!(format(Duration::from_secs(90)), "1m30s");
        assert_eq!(format(Duration::from_millis(1500)), "1500ms");
        for bad in ["", "10", "s", "1x", "1.5s", "-1s", "1 s"] {
            assert!(matches!(parse(bad), Err(ParseDurationError::Syntax { .. })), "{bad:?} should fail");
        }
        // Found by a corpus of hostile scenario files: these overflowed (a panic in the multiplication,
        // then one adding the duration to an instant).
        for long in ["5124095576030432h", "5000000000000000h", "99999999h", "367d", "99999999999999999999999s", "8785h"] {
            let e = parse(long);
            assert!(e.is_err(), "{long:?}");
        }
        assert_eq!(parse("8784h").unwrap(), MAX);
        assert!(parse("99999999h").unwrap_err().to_string().contains("too long: at most 8784h (a year)"), "{}", parse("99999999h").unwrap_err());
    }

    #[test]
    fn scenario_durations_stop_at_a_day() {
        let ok: Span = serde_json::from_str("\"24h\"").unwrap();
        assert_eq!(ok.0, MAX_IN_SCENARIO);
        let e = serde_json::from_str::<Span>("\"25h\"").unwrap_err().to_string();
        assert!(e.contains("too long: at most 24h"), "{e}");
        // Past a year too: the limit named is the scenario's, not the parser's.
        for long in ["99999999h", "5124095576030432h", "99999999999999999999999s"] {
            let e = serde_json::from_str::<Span>(&format!("{long:?}")).unwrap_err().to_string();
            assert!(e.contains(&format!("duration {long:?} is too long: at most 24h")), "{e}");
        }
    }
}
