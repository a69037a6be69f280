//! Text from the cluster, made safe to print on a terminal.
//!
//! Event messages, reasons, object names and what node commands print come from whoever can create
//! events or run things on the nodes. Printed as they are, an escape sequence in them could clear the
//! screen, retitle the terminal, write the clipboard or hide a line, and a newline could forge a report
//! line of its own. These functions show every such character as a visible escape instead (`\u{1b}`,
//! `\u{9b}`, `\n`), through the standard library's `char::escape_default`; printable text, tabs aside,
//! is left as it is. JSON and YAML output need none of this (serde escapes), nor does the HTML report
//! (askama escapes).

use std::borrow::Cow;

/// What a terminal may act on: C0 controls, DEL and C1 controls (`char::is_control`), the Unicode line
/// and paragraph separators, and the bidirectional controls that reorder what is shown.
fn acted_on(c: char) -> bool {
    c.is_control() || matches!(c, '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{2028}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

fn escape_where(text: &str, escape: impl Fn(char) -> bool) -> Cow<'_, str> {
    let Some(first) = text.find(&escape) else {
        return Cow::Borrowed(text);
    };
    let mut out = String::with_capacity(text.len() + 8);
    out.push_str(&text[..first]);
    for c in text[first..].chars() {
        if escape(c) {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// One field of one thing (an event's message, an object's name): on one line, every control escaped,
/// newlines too, so it cannot start a line of its own.
pub fn field(text: &str) -> Cow<'_, str> {
    escape_where(text, acted_on)
}

/// Text whose newlines are its structure (a report line and its indented details, a command's output):
/// newlines and tabs kept, every other control escaped.
pub fn lines(text: &str) -> Cow<'_, str> {
    escape_where(text, |c| acted_on(c) && !matches!(c, '\n' | '\t'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_field_shows_every_control_and_stays_on_one_line() {
        assert_eq!(field("a\x1b]0;owned\x07b"), r"a\u{1b}]0;owned\u{7}b");
        assert_eq!(field("csi\u{9b}2J del\u{7f}"), r"csi\u{9b}2J del\u{7f}");
        assert_eq!(field("one\nPASS forged\r\t"), r"one\nPASS forged\r\t");
        assert_eq!(field("abc\u{202e}fed"), r"abc\u{202e}fed");
    }

    #[test]
    fn lines_keep_newlines_and_tabs_only() {
        assert_eq!(lines("FAIL x\n  error: \x1b[2Jgone\r\tok"), "FAIL x\n  error: \\u{1b}[2Jgone\\r\tok");
    }

    #[test]
    fn plain_text_is_borrowed_as_it_is() {
        for text in ["Back-off restarting failed container web in pod web_ns(<uid>)", "ünïcode — “quotes” \\x1b", ""] {
            assert!(matches!(field(text), Cow::Borrowed(t) if t == text));
            assert!(matches!(lines(text), Cow::Borrowed(t) if t == text));
        }
    }
}
