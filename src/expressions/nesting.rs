//! How deep an expression's syntax tree is, so that parsing, checking and evaluating it (all
//! recursive) stay within a thread's stack.
//!
//! The `cel` parser's recursion limit counts brackets, calls and ternaries, not chains:
//! `a + b + c + …` and `a.b.c.…` parse without nesting and still build a tree as deep as the
//! chain is long, which a 64 KiB source can make 30 000 levels deep. So before parsing,
//! [`scan`] estimates the depth from the tokens alone, without recursing; after parsing,
//! [`deepest`] measures the tree (macros expand into more nodes than their tokens), also
//! without recursing.

use cel::common::ast::{EntryExpr, Expr, IdedExpr};

/// One bracket level of the source, or the whole source.
#[derive(Default)]
struct Level {
    /// Byte offset of the opening bracket.
    open: usize,
    /// Operators, selections, calls and brackets in the current operand (since the last `,`,
    /// `:`, `?`, `&&` or `||` at this level).
    operators: usize,
    /// Deepest nested level in the current operand.
    nested: usize,
    /// Deepest operand so far.
    deepest: usize,
    /// `&&` and `||`: the parser balances them, so they add the log of their count.
    logical: usize,
    /// `?`: each ternary nests the next one.
    ternaries: usize,
}

impl Level {
    fn at(open: usize) -> Self {
        Level {
            open,
            ..Level::default()
        }
    }

    fn next_operand(&mut self) {
        self.deepest = self.deepest.max(self.operators + self.nested);
        self.operators = 0;
        self.nested = 0;
    }

    fn depth(mut self) -> usize {
        self.next_operand();
        let logical = (self.logical + 1).next_power_of_two().trailing_zeros() as usize;
        1 + self.deepest + self.ternaries + logical
    }
}

/// Estimates, without parsing, how deep `source`'s syntax tree is: at each bracket level,
/// the operators, selections and calls of one operand add up (the parser nests chains), and
/// the deepest operand counts. Returns the byte offset where a level deeper than `limit`
/// opens (0 for the whole source) and the depth estimated there.
///
/// The estimate is an upper bound for everything but macros' expansions, which [`deepest`]
/// measures once parsed; it only needs to be close enough to keep the parser's own
/// recursion shallow.
pub(super) fn scan(source: &str, limit: usize) -> Result<(), (usize, usize)> {
    let bytes = source.as_bytes();
    let mut levels = vec![Level::at(0)];
    // Whether the previous token ends an operand (so `-` is binary and `(` a call), and
    // whether it was a prefix `!` or `-` (the parser folds a run of them into one node).
    let mut after_operand = false;
    let mut after_prefix = false;
    let mut i = 0;
    while i < bytes.len() {
        let byte = bytes[i];
        let next = bytes.get(i + 1).copied();
        let mut operand = false;
        let mut prefix = false;
        let level = levels
            .last_mut()
            .expect("the source's level is never popped");
        match byte {
            b' ' | b'\t' | b'\n' | b'\r' | b'\x0c' => {
                i += 1;
                continue;
            }
            b'/' if next == Some(b'/') => {
                while i < bytes.len() && bytes[i] != b'\n' {
                    i += 1;
                }
                continue;
            }
            b'\'' | b'"' => {
                i = skip_string(bytes, i, false);
                operand = true;
            }
            b'`' => {
                i += 1;
                while i < bytes.len() && bytes[i] != b'`' {
                    i += 1;
                }
                i += 1;
                operand = true;
            }
            b'a'..=b'z' | b'A'..=b'Z' | b'_' => {
                let start = i;
                while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                    i += 1;
                }
                let word = &source[start..i];
                if matches!(bytes.get(i), Some(b'\'' | b'"'))
                    && matches!(word.to_ascii_lowercase().as_str(), "r" | "b" | "rb" | "br")
                {
                    i = skip_string(bytes, i, word.contains(['r', 'R']));
                    operand = true;
                } else if word == "in" && after_operand {
                    level.operators += 1;
                } else {
                    operand = true;
                }
            }
            b'0'..=b'9' => {
                i = skip_number(bytes, i);
                operand = true;
            }
            b'.' if !after_operand && next.is_some_and(|b| b.is_ascii_digit()) => {
                i = skip_number(bytes, i);
                operand = true;
            }
            b'(' | b'[' | b'{' => {
                // A call or an index wraps the operand before it; a list, a map or a struct
                // is a node of its own, counted with the level it opens (as is a bracket for
                // grouping, which is none: an overestimate that keeps this simple).
                if after_operand && byte != b'{' {
                    level.operators += 1;
                }
                levels.push(Level::at(i));
                i += 1;
            }
            b')' | b']' | b'}' => {
                if levels.len() > 1 {
                    close(&mut levels, limit)?;
                }
                i += 1;
                operand = true;
            }
            b',' | b':' => {
                level.next_operand();
                i += 1;
            }
            // `.?field`, `[?index]` and `{?key: value}` mark optionals, not a ternary.
            b'?' if after_operand => {
                level.ternaries += 1;
                level.next_operand();
                i += 1;
            }
            b'&' | b'|' if next == Some(byte) => {
                level.logical += 1;
                level.next_operand();
                i += 2;
            }
            b'!' | b'-' if !after_operand && next != Some(b'=') => {
                if !after_prefix {
                    level.operators += 1;
                }
                prefix = true;
                i += 1;
            }
            b'!' | b'=' | b'<' | b'>' => {
                level.operators += 1;
                i += if next == Some(b'=') { 2 } else { 1 };
            }
            b'.' | b'+' | b'-' | b'*' | b'/' | b'%' => {
                level.operators += 1;
                i += 1;
            }
            _ => i += 1,
        }
        after_operand = operand;
        after_prefix = prefix;
    }
    while levels.len() > 1 {
        close(&mut levels, limit)?;
    }
    let depth = levels.pop().map_or(0, Level::depth);
    if depth > limit {
        return Err((0, depth));
    }
    Ok(())
}

/// Ends the innermost level: its depth counts in its parent's current operand.
fn close(levels: &mut Vec<Level>, limit: usize) -> Result<(), (usize, usize)> {
    let level = levels.pop().expect("a level to close");
    let open = level.open;
    let depth = level.depth();
    if depth > limit {
        return Err((open, depth));
    }
    if let Some(parent) = levels.last_mut() {
        parent.nested = parent.nested.max(depth);
    }
    Ok(())
}

/// The offset after the string literal whose opening quote is at `start`.
fn skip_string(bytes: &[u8], start: usize, raw: bool) -> usize {
    let quote = bytes[start];
    let triple = bytes.get(start..start + 3) == Some(&[quote; 3][..]);
    let mut i = start + if triple { 3 } else { 1 };
    while i < bytes.len() {
        if bytes[i] == b'\\' && !raw {
            i += 2;
        } else if triple {
            if bytes.get(i..i + 3) == Some(&[quote; 3][..]) {
                return i + 3;
            }
            i += 1;
        } else if bytes[i] == quote {
            return i + 1;
        } else {
            i += 1;
        }
    }
    bytes.len()
}

/// The offset after the number starting at `start` (`12`, `0x1F`, `3u`, `1.5e-3`, `.5`).
fn skip_number(bytes: &[u8], start: usize) -> usize {
    let mut i = start;
    while i < bytes.len() {
        match bytes[i] {
            b'.' if bytes.get(i + 1).is_some_and(u8::is_ascii_digit) => i += 1,
            b'+' | b'-' if matches!(bytes[i - 1], b'e' | b'E') && !is_hex(bytes, start) => {
                i += 1;
            }
            b if b.is_ascii_alphanumeric() || b == b'_' => i += 1,
            _ => break,
        }
    }
    i
}

fn is_hex(bytes: &[u8], start: usize) -> bool {
    matches!(bytes.get(start..start + 2), Some(b"0x" | b"0X"))
}

/// The id of the first node found deeper than `limit` in the tree, and that depth.
pub(super) fn deepest(expr: &IdedExpr, limit: usize) -> Option<(u64, usize)> {
    let mut pending = vec![(expr, 1)];
    while let Some((expr, depth)) = pending.pop() {
        if depth > limit {
            return Some((expr.id, depth));
        }
        let depth = depth + 1;
        match &expr.expr {
            Expr::Call(call) => {
                pending.extend(call.target.as_deref().map(|t| (t, depth)));
                pending.extend(call.args.iter().map(|a| (a, depth)));
            }
            Expr::Comprehension(c) => pending.extend(
                [
                    &c.iter_range,
                    &c.accu_init,
                    &c.loop_cond,
                    &c.loop_step,
                    &c.result,
                ]
                .map(|e| (e, depth)),
            ),
            Expr::List(list) => pending.extend(list.elements.iter().map(|e| (e, depth))),
            Expr::Map(map) => {
                for entry in &map.entries {
                    if let EntryExpr::MapEntry(entry) = &entry.expr {
                        pending.extend([(&entry.key, depth), (&entry.value, depth)]);
                    }
                }
            }
            Expr::Struct(strct) => {
                for entry in &strct.entries {
                    match &entry.expr {
                        EntryExpr::StructField(field) => pending.push((&field.value, depth)),
                        EntryExpr::MapEntry(entry) => {
                            pending.extend([(&entry.key, depth), (&entry.value, depth)]);
                        }
                    }
                }
            }
            Expr::Select(select) => pending.push((&select.operand, depth)),
            Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => {}
        }
    }
    None
}
