//! Building upstream's detail strings: plurals, quoted lists and Go's `%q`.

use std::fmt::Write as _;

use super::go_print::NOT_PRINTABLE;

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
pub(crate) fn go_quote(s: &str) -> String {
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

/// Go's `strconv.IsPrint`: printable ASCII, and beyond ASCII whatever is not in
/// [`NOT_PRINTABLE`].
fn go_is_print(c: char) -> bool {
    if c.is_ascii() {
        return (' '..='~').contains(&c);
    }
    let code = c as u32;
    let index = NOT_PRINTABLE.partition_point(|&(_, last)| last < code);
    NOT_PRINTABLE
        .get(index)
        .is_none_or(|&(first, _)| code < first)
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
            (
                "\u{378}\u{e01f0}\u{10ffff}",
                r#""\u0378\U000e01f0\U0010ffff""#,
            ),
        ] {
            assert_eq!(go_quote(input), quoted, "{input:?}");
        }
    }
}
