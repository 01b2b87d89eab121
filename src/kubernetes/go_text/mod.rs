//! Go's text formatting where Kubernetes' messages print values with it: `%q`
//! (`strconv.Quote`), whose escapes follow `strconv.IsPrint`.

mod not_printable;

use std::fmt::Write as _;

use not_printable::NOT_PRINTABLE;

/// Go's `%q` (`strconv.Quote`): double quotes, backslash escapes for `"` and `\`, the C escapes,
/// `\xNN` for other ASCII controls, `\uNNNN`/`\UNNNNNNNN` for other characters Go does not print.
pub fn go_quote(s: &str) -> String {
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
