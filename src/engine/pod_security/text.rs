//! Building upstream's detail strings: plurals, quoted lists and Go's `%q`.

use std::fmt::Write as _;

/// `singular` for one thing, `plural` otherwise (zero included), as upstream words it.
pub(super) fn pluralize(
    singular: &'static str,
    plural: &'static str,
    count: usize,
) -> &'static str {
    if count == 1 { singular } else { plural }
}

/// `"a", "b", "c"`: each item in plain double quotes (no escaping), comma-separated; empty for
/// no items.
pub(super) fn join_quote<'a>(items: impl IntoIterator<Item = &'a str>) -> String {
    let mut out = String::new();
    for (index, item) in items.into_iter().enumerate() {
        out.push_str(if index == 0 { "\"" } else { "\", \"" });
        out.push_str(item);
    }
    if !out.is_empty() {
        out.push('"');
    }
    out
}

/// `container "a"` or `containers "a", "b"`.
pub(super) fn containers_phrase(names: &[&str]) -> String {
    format!(
        "{} {}",
        pluralize("container", "containers", names.len()),
        join_quote(names.iter().copied())
    )
}

/// Sorts and removes duplicates: Go's `sets.String.List()` (byte order).
pub(super) fn sorted_unique<T: Ord>(mut items: Vec<T>) -> Vec<T> {
    items.sort_unstable();
    items.dedup();
    items
}

/// Go's `%q` (`strconv.Quote`): double quotes, backslash escapes for `"` and `\`, the C escapes,
/// `\xNN` for other ASCII controls, `\uNNNN`/`\UNNNNNNNN` for other characters Go does not print.
pub(super) fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            c if c < ' ' || c == '\u{7f}' => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c if go_is_print(c) => out.push(c),
            c if (c as u32) < 0x10000 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => {
                let _ = write!(out, "\\U{:08x}", c as u32);
            }
        }
    }
    out.push('"');
    out
}

/// Go's `unicode.IsPrint` for what it most often decides: ASCII exactly; beyond ASCII, spaces,
/// controls, format characters and private-use characters are not printed. (Go also escapes
/// unassigned code points, which this does not know.)
fn go_is_print(c: char) -> bool {
    if c.is_ascii() {
        return (' '..='~').contains(&c);
    }
    let code = c as u32;
    let format_or_private = matches!(
        code,
        0xAD | 0x600..=0x605
            | 0x61C
            | 0x6DD
            | 0x70F
            | 0x890..=0x891
            | 0x8E2
            | 0x180E
            | 0x200B..=0x200F
            | 0x202A..=0x202E
            | 0x2060..=0x2064
            | 0x2066..=0x206F
            | 0xE000..=0xF8FF
            | 0xFEFF
            | 0xFFF9..=0xFFFB
            | 0xFFFE..=0xFFFF
            | 0x110BD
            | 0x110CD
            | 0x13430..=0x1343F
            | 0x1BCA0..=0x1BCA3
            | 0x1D173..=0x1D17A
            | 0xE0001
            | 0xE0020..=0xE007F
            | 0xF0000..
    );
    !(c.is_control() || c.is_whitespace() || format_or_private)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pluralizes_zero_as_plural() {
        assert_eq!(pluralize("volume", "volumes", 0), "volumes");
        assert_eq!(pluralize("volume", "volumes", 1), "volume");
        assert_eq!(pluralize("volume", "volumes", 2), "volumes");
    }

    #[test]
    fn joins_quoted_items_without_escaping() {
        assert_eq!(join_quote([]), "");
        assert_eq!(join_quote([""]), "\"\"");
        assert_eq!(join_quote(["a", "b\"c"]), "\"a\", \"b\"c\"");
        assert_eq!(containers_phrase(&["a"]), "container \"a\"");
        assert_eq!(containers_phrase(&["a", "b"]), "containers \"a\", \"b\"");
    }

    #[test]
    fn sorts_bytewise_like_go() {
        assert_eq!(
            sorted_unique(vec!["b", "B", "a", "b", "8080", "10000"]),
            ["10000", "8080", "B", "a", "b"]
        );
    }

    #[test]
    fn quotes_like_go() {
        for (input, quoted) in [
            ("unconfined", r#""unconfined""#),
            ("", r#""""#),
            ("a\"b\\c", r#""a\"b\\c""#),
            ("\u{7}\u{8}\u{c}\n\r\t\u{b}", r#""\a\b\f\n\r\t\v""#),
            ("\u{0}\u{1b}\u{7f}", r#""\x00\x1b\x7f""#),
            ("é日本 ok", "\"é日本 ok\""),
            (
                "\u{a0}\u{85}\u{200b}\u{2028}",
                r#""\u00a0\u0085\u200b\u2028""#,
            ),
            ("\u{f0000}😀", "\"\\U000f0000😀\""),
        ] {
            assert_eq!(go_quote(input), quoted, "{input:?}");
        }
    }
}
