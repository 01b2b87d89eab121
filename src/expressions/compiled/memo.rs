//! Field lookups shared within an expression: a select chain from `object` (or another
//! admission variable) or from a comprehension's item whose prefix the expression reads more
//! than once (`has(c.resources) && 'memory' in c.resources.limits`) is looked up once per
//! evaluation, or once per item, and remembered.
//!
//! Only lookups in JSON objects are remembered, as found or absent; selecting has no cost of
//! its own here (the instrumented tree charges around it), so reading a remembered member
//! charges what looking it up again would.

use std::collections::HashMap;

use super::{Fold, InterpretedPart, Node, Pattern, Quantifier};

/// A select chain (`root.f1.f2…`), or the presence test of its last field, with the memo
/// slot of each prefix that has one.
#[derive(Debug)]
pub(super) struct MemoChain {
    /// `Node::Slot` or `Node::Local` (a comprehension's item).
    pub root: Node,
    pub fields: Box<[Box<str>]>,
    /// For `fields[..=k]`, its memo slot, if the expression reads that prefix more than once.
    pub memos: Box<[Option<usize>]>,
}

/// What the memo slots need at evaluation.
#[derive(Debug, Default)]
pub(super) struct Memos {
    /// How many slots.
    pub count: usize,
    /// By frame position: the slots of chains from that comprehension item, forgotten when
    /// the item is bound to the next element.
    pub resets: Box<[Box<[usize]>]>,
}

/// A chain's root: an admission variable's slot or a comprehension item's position.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Root {
    Slot(usize),
    Item(usize),
}

type Key = (Root, Vec<Box<str>>);

/// Gives a memo slot to each prefix of a select chain below `root` that is read more than
/// once, and rewrites the chains that have one. `locals` is the program's number of frame
/// positions.
pub(super) fn memoize(root: &mut Node, locals: usize) -> Memos {
    let mut items = Vec::new();
    visit(root, &mut |node| match node {
        Node::Quantifier(quantifier) => items.push(quantifier.item),
        Node::Fold(fold) => items.push(fold.item),
        _ => {}
    });
    let root_of = |node: &Node| match node {
        Node::Slot(slot) => Some(Root::Slot(*slot)),
        Node::Local(position) if items.contains(position) => Some(Root::Item(*position)),
        _ => None,
    };
    let mut reads: HashMap<Key, usize> = HashMap::new();
    count_reads(root, false, &root_of, &mut reads);
    let mut slots: HashMap<Key, usize> = HashMap::new();
    let mut resets = vec![Vec::new(); locals];
    let mut keys: Vec<Key> = reads
        .into_iter()
        .filter(|(_, count)| *count > 1)
        .map(|(key, _)| key)
        .collect();
    // Slots in a fixed order, whatever the map's.
    keys.sort();
    for key in keys {
        let slot = slots.len();
        if let Root::Item(position) = key.0 {
            resets[position].push(slot);
        }
        slots.insert(key, slot);
    }
    if slots.is_empty() {
        return Memos::default();
    }
    rewrite(root, &root_of, &slots);
    Memos {
        count: slots.len(),
        resets: resets.into_iter().map(Vec::into_boxed_slice).collect(),
    }
}

/// Counts the reads of each chain prefix below `node`; one inside a comprehension's body
/// (`in_loop`) from an admission variable counts as many, since it is read per item.
fn count_reads(
    node: &mut Node,
    in_loop: bool,
    root_of: &impl Fn(&Node) -> Option<Root>,
    reads: &mut HashMap<Key, usize>,
) {
    if let Some((root, fields)) = chain_of(node, root_of) {
        let times = if in_loop && matches!(root, Root::Slot(_)) {
            2
        } else {
            1
        };
        for length in 1..=fields.len() {
            *reads.entry((root, fields[..length].to_vec())).or_default() += times;
        }
        return;
    }
    match node {
        Node::Quantifier(quantifier) => {
            count_reads(&mut quantifier.range, in_loop, root_of, reads);
            count_reads(&mut quantifier.predicate, true, root_of, reads);
        }
        Node::Fold(fold) => {
            count_reads(&mut fold.range, in_loop, root_of, reads);
            count_reads(&mut fold.init, in_loop, root_of, reads);
            count_reads(&mut fold.result, in_loop, root_of, reads);
            count_reads(&mut fold.condition, true, root_of, reads);
            // An append step is the step's own guard and items compiled apart; one of the two
            // runs.
            match &mut fold.append {
                Some((guard, items)) => {
                    if let Some(guard) = guard {
                        count_reads(guard, true, root_of, reads);
                    }
                    count_reads(items, true, root_of, reads);
                }
                None => count_reads(&mut fold.step, true, root_of, reads),
            }
        }
        _ => children(node, &mut |child| {
            count_reads(child, in_loop, root_of, reads)
        }),
    }
}

/// The chain a select or presence test reads, from a root that can be remembered.
fn chain_of(
    node: &Node,
    root_of: &impl Fn(&Node) -> Option<Root>,
) -> Option<(Root, Vec<Box<str>>)> {
    match node {
        Node::Select(base, fields) => Some((root_of(base)?, fields.to_vec())),
        Node::Has(operand, field) => match &**operand {
            Node::Select(base, fields) => {
                let mut chain = fields.to_vec();
                chain.push(field.clone());
                Some((root_of(base)?, chain))
            }
            base => Some((root_of(base)?, vec![field.clone()])),
        },
        _ => None,
    }
}

fn rewrite(node: &mut Node, root_of: &impl Fn(&Node) -> Option<Root>, slots: &HashMap<Key, usize>) {
    if let Some((root, fields)) = chain_of(node, root_of) {
        let memos: Box<[Option<usize>]> = (1..=fields.len())
            .map(|length| slots.get(&(root, fields[..length].to_vec())).copied())
            .collect();
        if memos.iter().any(Option::is_some) {
            let test = matches!(node, Node::Has(..));
            let root_node = match root {
                Root::Slot(slot) => Node::Slot(slot),
                Root::Item(position) => Node::Local(position),
            };
            let chain = Box::new(MemoChain {
                root: root_node,
                fields: fields.into_boxed_slice(),
                memos,
            });
            *node = if test {
                Node::MemoHas(chain)
            } else {
                Node::MemoSelect(chain)
            };
        }
        return;
    }
    children(node, &mut |child| rewrite(child, root_of, slots));
}

/// Calls `f` on `node` and every node below it, parents first.
fn visit(node: &mut Node, f: &mut impl FnMut(&Node)) {
    f(node);
    children(node, &mut |child| visit(child, f));
}

/// Calls `f` on each child of `node`.
fn children(node: &mut Node, f: &mut impl FnMut(&mut Node)) {
    match node {
        Node::Null
        | Node::Bool(_)
        | Node::Int(_)
        | Node::Uint(_)
        | Node::Double(_)
        | Node::Text(_)
        | Node::Slot(_)
        | Node::Named(_)
        | Node::Variable(_)
        | Node::Local(_)
        | Node::OptionalNone => {}
        Node::MemoSelect(chain) | Node::MemoHas(chain) => f(&mut chain.root),
        Node::Select(operand, _)
        | Node::Has(operand, _)
        | Node::Not(operand)
        | Node::NotStrictlyFalse(operand)
        | Node::Negate(operand)
        | Node::Size(operand)
        | Node::Cost(_, operand)
        | Node::Sized(_, _, operand)
        | Node::Budget(operand)
        | Node::OptionalSelect(operand, _)
        | Node::OptionalOf(operand)
        | Node::HasValue(operand)
        | Node::OptionalValue(operand)
        | Node::ToText(operand)
        | Node::ToInt(operand)
        | Node::AsciiCase(_, operand) => f(operand),
        Node::Index(a, b)
        | Node::And(a, b)
        | Node::Or(a, b)
        | Node::Compare(_, a, b)
        | Node::Arithmetic(_, a, b)
        | Node::In(a, b)
        | Node::TextTest(_, a, b)
        | Node::OptionalIndex(a, b)
        | Node::OrValue(a, b) => {
            f(a);
            f(b);
        }
        Node::Conditional(parts) => parts.iter_mut().for_each(f),
        Node::Matches { text, pattern, .. } => {
            f(text);
            if let Pattern::Computed(pattern) = pattern {
                f(pattern);
            }
        }
        Node::List(items) => items.iter_mut().for_each(f),
        Node::Fold(fold) => {
            let Fold {
                range,
                init,
                condition,
                step,
                result,
                append,
                ..
            } = &mut **fold;
            for part in [range, init, condition, step, result] {
                f(part);
            }
            if let Some((guard, items)) = append {
                if let Some(guard) = guard {
                    f(guard);
                }
                f(items);
            }
        }
        Node::Quantifier(quantifier) => {
            let Quantifier {
                range, predicate, ..
            } = &mut **quantifier;
            f(range);
            f(predicate);
        }
        Node::Interpreted(part) => {
            let InterpretedPart { operands, .. } = &mut **part;
            operands.iter_mut().for_each(f);
        }
    }
}
