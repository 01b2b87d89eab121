//! JSON Pointer (RFC 6901): `~` is written `~0` and `/` is written `~1` inside a token.

use std::fmt::Write as _;

use super::PathSegment;

/// Appends one escaped JSON Pointer reference token.
pub fn push_pointer_token(pointer: &mut String, token: &str) {
    pointer.push('/');
    for c in token.chars() {
        match c {
            '~' => pointer.push_str("~0"),
            '/' => pointer.push_str("~1"),
            c => pointer.push(c),
        }
    }
}

pub fn pointer(path: &[PathSegment<'_>]) -> String {
    let mut out = String::new();
    for segment in path {
        match segment {
            PathSegment::Key(key) => push_pointer_token(&mut out, key),
            PathSegment::Index(index) => {
                let _ = write!(out, "/{index}");
            }
        }
    }
    out
}

/// The reference tokens of a pointer, unescaped; `""` is the whole document. An error says
/// what is wrong with the pointer.
pub fn tokens(path: &str) -> Result<Vec<String>, String> {
    if path.is_empty() {
        return Ok(Vec::new());
    }
    let Some(rest) = path.strip_prefix('/') else {
        return Err(format!(
            "invalid JSON Pointer {path:?}: must start with '/'"
        ));
    };
    Ok(rest.split('/').map(unescape).collect())
}

fn unescape(token: &str) -> String {
    token.replace("~1", "/").replace("~0", "~")
}
