//! Go's `regexp` words for a pattern it refuses (`error parsing regexp: missing closing ):
//! `a(b``), and the patterns RE2 refuses that Rust's `regex` accepts (a repetition of a
//! repetition, a count over 1000): the apiserver compiles patterns with Go's `regexp`, and
//! its message is what a policy author sees.

use regex_syntax::ast::{self, Ast, RepetitionKind, RepetitionRange};
use regex_syntax::hir;

/// Go's largest repeat count.
const MAX_REPEAT: u32 = 1000;

/// Go's error for `pattern`, when Go's `regexp` would refuse it in a way this module knows.
pub(crate) fn go_regexp_error(pattern: &str) -> Option<String> {
    let fragment = |span: &ast::Span| pattern[span.start.offset..span.end.offset].to_owned();
    let message = |code: &str, expr: &str| format!("error parsing regexp: {code}: `{expr}`");
    let parsed = ast::parse::ParserBuilder::new()
        .nest_limit(1000)
        .build()
        .parse(pattern);
    let tree = match parsed {
        Ok(tree) => tree,
        Err(error) => {
            let span = error.span();
            return Some(match error.kind() {
                ast::ErrorKind::GroupUnclosed => message("missing closing )", pattern),
                ast::ErrorKind::GroupUnopened => message("unexpected )", pattern),
                ast::ErrorKind::ClassUnclosed => {
                    message("missing closing ]", &pattern[span.start.offset..])
                }
                ast::ErrorKind::RepetitionMissing => message(
                    "missing argument to repetition operator",
                    repetition_operator(&pattern[span.start.offset..]),
                ),
                ast::ErrorKind::EscapeUnrecognized => {
                    message("invalid escape sequence", &fragment(span))
                }
                ast::ErrorKind::EscapeUnexpectedEof => {
                    message("trailing backslash at end of expression", "")
                }
                ast::ErrorKind::RepetitionCountInvalid => {
                    message("invalid repeat count", &fragment(span))
                }
                ast::ErrorKind::ClassRangeInvalid => {
                    message("invalid character class range", &fragment(span))
                }
                ast::ErrorKind::UnsupportedLookAround => {
                    let start = span.start.offset;
                    let end = (start + 3).min(pattern.len());
                    message(
                        "invalid or unsupported Perl syntax",
                        pattern.get(start..end).unwrap_or(""),
                    )
                }
                _ => return None,
            });
        }
    };
    if let Some(error) = refused_by_re2(&tree, pattern) {
        return Some(error);
    }
    match hir::translate::Translator::new().translate(pattern, &tree) {
        Err(error)
            if matches!(
                error.kind(),
                hir::ErrorKind::UnicodePropertyNotFound
                    | hir::ErrorKind::UnicodePropertyValueNotFound
            ) =>
        {
            let span = error.span();
            Some(message(
                "invalid character class range",
                &pattern[span.start.offset..span.end.offset],
            ))
        }
        _ => None,
    }
}

/// The repetition operator at the start of `text` (`*`, `+?`, `{2,3}`), with its lazy `?`.
fn repetition_operator(text: &str) -> &str {
    let end = match text.as_bytes().first() {
        Some(b'{') => text.find('}').map_or(text.len(), |i| i + 1),
        Some(_) => 1,
        None => 0,
    };
    let end = if text[end..].starts_with('?') {
        end + 1
    } else {
        end
    };
    &text[..end]
}

/// What RE2's parser refuses in a tree Rust's parser accepts: a repetition operator applied
/// to a repetition (`a**`, `a+{2}`), and counts over 1000.
fn refused_by_re2(tree: &Ast, pattern: &str) -> Option<String> {
    let message = |code: &str, expr: &str| format!("error parsing regexp: {code}: `{expr}`");
    match tree {
        Ast::Repetition(repetition) => {
            if let Ast::Repetition(inner) = repetition.ast.as_ref() {
                let (start, end) = (inner.op.span.start.offset, repetition.op.span.end.offset);
                return Some(message(
                    "invalid nested repetition operator",
                    &pattern[start..end],
                ));
            }
            if let RepetitionKind::Range(range) = &repetition.op.kind {
                let too_large = match *range {
                    RepetitionRange::Exactly(n) | RepetitionRange::AtLeast(n) => n > MAX_REPEAT,
                    RepetitionRange::Bounded(n, m) => n > MAX_REPEAT || m > MAX_REPEAT,
                };
                if too_large {
                    let span = &repetition.op.span;
                    return Some(message(
                        "invalid repeat count",
                        &pattern[span.start.offset..span.end.offset],
                    ));
                }
            }
            refused_by_re2(&repetition.ast, pattern)
        }
        Ast::Group(group) => refused_by_re2(&group.ast, pattern),
        Ast::Alternation(alternation) => alternation
            .asts
            .iter()
            .find_map(|ast| refused_by_re2(ast, pattern)),
        Ast::Concat(concat) => concat
            .asts
            .iter()
            .find_map(|ast| refused_by_re2(ast, pattern)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The texts recorded from kube-apiserver v1.37.2 (load-time/constant-regexes.yaml).
    #[test]
    fn refusals_are_worded_as_go_words_them() {
        for (pattern, expected) in [
            ("(", "missing closing ): `(`"),
            ("a(b", "missing closing ): `a(b`"),
            ("a)b", "unexpected ): `a)b`"),
            ("x[ab", "missing closing ]: `[ab`"),
            ("*a", "missing argument to repetition operator: `*`"),
            ("+?a", "missing argument to repetition operator: `+?`"),
            ("a**", "invalid nested repetition operator: `**`"),
            ("a\\qb", "invalid escape sequence: `\\q`"),
            ("ab\\", "trailing backslash at end of expression: ``"),
            ("[z-a]", "invalid character class range: `z-a`"),
            ("a{3,2}", "invalid repeat count: `{3,2}`"),
            ("a{1001}", "invalid repeat count: `{1001}`"),
            ("a(?=b)", "invalid or unsupported Perl syntax: `(?=`"),
            ("\\p{Nope}", "invalid character class range: `\\p{Nope}`"),
        ] {
            assert_eq!(
                go_regexp_error(pattern),
                Some(format!("error parsing regexp: {expected}")),
                "{pattern}"
            );
        }
        for accepted in ["b+", "a*?", "(a*)*", "a{2}", "[a-z]+", "\\d{1000}", "(?i)x"] {
            assert_eq!(go_regexp_error(accepted), None, "{accepted}");
        }
    }
}
