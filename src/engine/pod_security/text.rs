//! Building upstream's detail strings: plurals, quoted lists and Go's `%q`.

pub(crate) use crate::kubernetes::go_text::go_quote;

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
}
