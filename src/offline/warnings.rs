//! The warnings a client of the apiserver receives, from the warnings admission added to a
//! request: the apiserver's warning recorder keeps the first of identical texts, drops texts
//! that cannot be a `Warning` header (empty, or with control characters), and once the texts
//! pass 4,096 characters together, cuts every one to 256 characters and drops those that come
//! after the cut ones reach 4,096 again.

use std::collections::HashSet;

/// The most characters the texts of a response's warnings may hold before they are cut.
const TOTAL_CHARACTERS: usize = 4 * 1024;

/// What each warning is cut to once the total is passed.
const ITEM_CHARACTERS: usize = 256;

/// `warnings` as the apiserver's recorder gives them to the client, in order.
pub fn as_received(warnings: impl IntoIterator<Item = String>) -> Vec<String> {
    let mut seen: HashSet<String> = HashSet::new();
    let mut added: Vec<String> = Vec::new();
    let mut received: Vec<String> = Vec::new();
    let mut written = 0;
    let mut cutting = false;
    for text in warnings {
        if text.is_empty() || (cutting && written >= TOTAL_CHARACTERS) {
            continue;
        }
        if !seen.insert(text.clone()) {
            continue;
        }
        added.push(text.clone());
        let (text, length) = if cutting {
            cut(&text)
        } else {
            let length = text.chars().count();
            (text, length)
        };
        if !is_header_text(&text) {
            continue;
        }
        if cutting || written + length <= TOTAL_CHARACTERS {
            written += length;
            received.push(text);
            continue;
        }
        // Over the limit for the first time: every warning so far again, cut.
        cutting = true;
        written = 0;
        received.clear();
        for text in &added {
            let (text, length) = cut(text);
            if is_header_text(&text) {
                written += length;
                received.push(text);
            }
        }
    }
    received
}

/// The text cut to [`ITEM_CHARACTERS`], and its length in characters.
fn cut(text: &str) -> (String, usize) {
    match text.char_indices().nth(ITEM_CHARACTERS) {
        Some((end, _)) => (text[..end].to_owned(), ITEM_CHARACTERS),
        None => (text.to_owned(), text.chars().count()),
    }
}

/// Whether the text can be a `Warning` header's text: no control characters (C0, DEL, C1).
fn is_header_text(text: &str) -> bool {
    !text.chars().any(char::is_control)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(count: usize, length: usize) -> Vec<String> {
        (0..count)
            .map(|i| format!("{i:02}{}", "x".repeat(length - 2)))
            .collect()
    }

    #[test]
    fn under_the_total_warnings_are_kept_whole_and_once() {
        let mut warnings = texts(10, 400);
        warnings.insert(3, warnings[1].clone());
        warnings.push(String::new());
        let received = as_received(warnings);
        assert_eq!(received, texts(10, 400));
    }

    #[test]
    fn past_the_total_every_warning_is_cut() {
        // 11 × 400 = 4,400 characters: the 11th passes 4,096, and all are cut to 256.
        let received = as_received(texts(11, 400));
        assert_eq!(received.len(), 11);
        assert!(received.iter().all(|text| text.chars().count() == 256));
        assert!(received[10].starts_with("10x"));
    }

    #[test]
    fn once_cut_warnings_stop_at_the_total_again() {
        // Cut to 256, 16 reach 4,096: the 17th and later are dropped.
        let received = as_received(texts(20, 400));
        assert_eq!(received.len(), 16);
        assert!(received[15].starts_with("15x"));
    }

    #[test]
    fn characters_are_counted_not_bytes() {
        let wide: Vec<String> = (0..9).map(|i| format!("{i}{}", "é".repeat(449))).collect();
        // 9 × 450 = 4,050 characters (8,100 bytes): within the total.
        assert_eq!(as_received(wide.clone()), wide);
        let mut more = wide;
        more.push("é".repeat(100));
        let received = as_received(more);
        assert_eq!(received[0].chars().count(), 256);
        assert_eq!(received[9].chars().count(), 100);
    }

    #[test]
    fn a_text_with_control_characters_is_never_received() {
        let received = as_received(vec![
            "one".to_owned(),
            "two\nlines".to_owned(),
            "tab\there".to_owned(),
            "three".to_owned(),
        ]);
        assert_eq!(received, ["one", "three"]);
    }
}
