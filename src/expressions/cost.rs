//! The apiserver's runtime cost of an expression, charged as it runs.
//!
//! The apiserver bounds CEL with cel-go's cost tracker, not with a clock: every step of an
//! evaluation costs units, and an expression call over [`super::CelLimits::max_cost`]
//! (Kubernetes' per-call limit, 1 000 000) is cancelled with `operation cancelled: actual cost
//! limit exceeded`. The units, with the options Kubernetes sets (presence tests free,
//! constant folding of literal lists, maps and conversions):
//!
//! - a variable or the root of a field chain: 1; each field or index applied to it: 1
//!   (`object.spec.containers` is 3, `has(c.securityContext)` is 1);
//! - a function or operator call: 1, and its arguments; `&&`, `||` and `?:` cost nothing
//!   themselves, and their arms only when evaluated;
//! - a list literal: 10, a map literal: 30, an `Object{…}`: 40, and their items; a literal
//!   made of constants only, or a conversion of a constant: 0;
//! - a comprehension: its range and initial value once, its condition and step on every
//!   iteration (as cel-go's expansions of `all`, `exists`, `map`, … spell them), its result
//!   once.
//!
//! Statically known parts are summed per region (what always runs together) and charged by
//! one `@cost(units, expr)` call around the region; the arms of `&&`, `||`, `?:` and the
//! condition and step of a comprehension are regions of their own. Calls whose cost depends
//! on their arguments' sizes in cel-go are charged from the sizes as they run: equality and
//! ordering (the smaller operand's size / 10), `+` on strings (the sum / 10), `in` a list (its
//! size), `startsWith`/`endsWith` (the prefix or suffix / 10), `contains` (the product),
//! `string(bytes)`, `bytes(string)`, `format` and `strings.quote` (the operand / 10), through
//! [`SIZED_FUNCTION`] wrappers around their operands; the Kubernetes library's calls the same
//! way as its `CostEstimator` says (`LIBRARY_SIZED`; `join` by its result, wrapped;
//! `containsIP`/`containsCIDR` by the CIDR's prefix); cel-go's set and list calls as their
//! trackers say (`sets.*` by the product of the sizes; `reverse`, `slice`, `lists.range` by
//! their result, wrapped; `flatten()` by its receiver, `flatten(depth)` by its receiver times
//! the depth; `distinct` and a typed `sort` by the receiver's size squared); and `matches`, `find`, `findAll`, a
//! format's `validate` and the authorizer's `labelSelector`/`fieldSelector` by their
//! implementations, which see every operand.
//!
//! cel-go's own sized units are keyed by the overload the checker chose: ordering, `+`, `in`,
//! `string(bytes)`, `bytes(string)` and `containsIP`/`containsCIDR`'s string parse are sized
//! only where an operand's type picks that overload ([`static_type`]); between `dyn` operands
//! (all that is read from `object`) the call is dispatched at runtime and costs 1.

use cel::common::ast::{CallExpr, EntryExpr, Expr, IdedExpr, ListExpr, LiteralValue, operators};

/// The function that charges its first argument's units and returns its second.
pub(super) const COST_FUNCTION: &str = "@cost";

/// `@sized(site, rule, x)`: `x`, after noting its size for the call at `site` (the operand
/// evaluated first) or charging the call's units from both operands' sizes (the one evaluated
/// second, or the only one for a one-operand rule).
pub(super) const SIZED_FUNCTION: &str = "@sized";

/// How a call's units follow from its operands' sizes (cel-go's `costCall`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(i64)]
pub(crate) enum SizeRule {
    /// Notes the first operand's size and kind for the call.
    Note = 0,
    /// Equality: the smaller size / 10, rounded up.
    Min = 1,
    /// Ordering: as equality for two strings or two byte strings, else 1.
    MinOfText = 2,
    /// `+`: the sizes' sum / 10 for strings and bytes, else 1.
    SumOfText = 3,
    /// `contains`: both sizes / 10, rounded up, multiplied.
    Product = 4,
    /// `in`: the size of a list, else 1 (one operand).
    InList = 5,
    /// `startsWith`, `endsWith`: the prefix's (suffix's) size / 10 (one operand); also the
    /// Kubernetes library's parsers and string functions charged by their text.
    Text = 6,
    /// `replace`, `split`: twice the text's size / 10 (one operand).
    TextTwice = 7,
    /// `isSorted`, `sum`, `max`, `min`, `indexOf`, `lastIndexOf`: one traversal of the
    /// operand (strings and bytes a tenth of their length rounded down, lists and maps the
    /// sum of their items', anything else 1), measured where the operand is at hand.
    Traversal = 8,
    /// `containsIP` (Kubernetes' `CostEstimator`): noted the operand, charged at the CIDR
    /// (its prefix's bytes c): 2c / 10, rounded up.
    ContainsIp = 9,
    /// `containsIP` of an operand the checker knows is a string: also its size / 10.
    ContainsIpString = 10,
    /// `containsCIDR`: 2c / 10 and c / 10, each rounded up, plus 1.
    ContainsCidr = 11,
    /// `containsCIDR` of an operand the checker knows is a string: also its size / 10.
    ContainsCidrString = 12,
    /// `sets.contains`, `sets.intersects` (cel-go's sets tracker): the sizes multiplied.
    SetsProduct = 13,
    /// `sets.equivalent`: twice the sizes multiplied.
    SetsProductTwice = 14,
    /// A call that allocates a list (cel-go's lists tracker: `reverse`, `slice`,
    /// `lists.range` by their result, `flatten()` by its operand): the size, plus a list's
    /// creation (one operand).
    ListAllocation = 15,
    /// `distinct`, `sort` (cel-go's self-comparing list calls): a list's size squared, twice,
    /// plus a tenth when its first item is a string or bytes (the flag), rounded down; plus a
    /// list's creation (one operand).
    SelfCompare = 16,
    /// Notes an int operand's value (`flatten`'s depth): its magnitude, and whether it is
    /// negative.
    NoteInt = 17,
    /// `flatten(depth)` (cel-go's lists tracker): the list's size times the noted depth (1 for
    /// a negative one), rounded down, plus a list's creation.
    FlattenDepth = 18,
}

impl SizeRule {
    pub(crate) fn from_code(code: i64) -> Option<SizeRule> {
        [
            SizeRule::Note,
            SizeRule::Min,
            SizeRule::MinOfText,
            SizeRule::SumOfText,
            SizeRule::Product,
            SizeRule::InList,
            SizeRule::Text,
            SizeRule::TextTwice,
            SizeRule::Traversal,
            SizeRule::ContainsIp,
            SizeRule::ContainsIpString,
            SizeRule::ContainsCidr,
            SizeRule::ContainsCidrString,
            SizeRule::SetsProduct,
            SizeRule::SetsProductTwice,
            SizeRule::ListAllocation,
            SizeRule::SelfCompare,
            SizeRule::NoteInt,
            SizeRule::FlattenDepth,
        ]
        .into_iter()
        .find(|rule| *rule as i64 == code)
    }

    /// Whether this rule charges `containsIP`/`containsCIDR` at their CIDR receiver.
    pub(crate) fn is_containment(self) -> bool {
        matches!(
            self,
            SizeRule::ContainsIp
                | SizeRule::ContainsIpString
                | SizeRule::ContainsCidr
                | SizeRule::ContainsCidrString
        )
    }

    /// The units of a call with operands of these sizes (and whether each is text).
    pub(crate) fn units(self, first: (u64, bool), second: (u64, bool)) -> u64 {
        let tenth = |size: u64| size.div_ceil(10);
        match self {
            SizeRule::Note | SizeRule::NoteInt => 0,
            SizeRule::Min => tenth(first.0.min(second.0)),
            SizeRule::MinOfText if first.1 && second.1 => tenth(first.0.min(second.0)),
            SizeRule::SumOfText if first.1 && second.1 => tenth(first.0 + second.0),
            SizeRule::MinOfText | SizeRule::SumOfText => 1,
            SizeRule::Product => tenth(first.0) * tenth(second.0),
            // For `in`, the flag says whether the operand is a list (a map costs 1).
            SizeRule::InList if second.1 => second.0,
            SizeRule::InList => 1,
            SizeRule::Text => tenth(second.0),
            SizeRule::TextTwice => tenth(2 * second.0),
            // The operand's traversal cost, measured by the caller.
            SizeRule::Traversal => second.0,
            SizeRule::SetsProduct => first.0.saturating_mul(second.0),
            SizeRule::SetsProductTwice => first.0.saturating_mul(second.0).saturating_mul(2),
            SizeRule::ListAllocation => second.0.saturating_add(LIST_CREATE),
            // cel-go multiplies in floating point and takes a negative depth as 1.
            SizeRule::FlattenDepth if first.1 => second.0.saturating_add(LIST_CREATE),
            SizeRule::FlattenDepth => {
                ((second.0 as f64 * first.0 as f64) as u64).saturating_add(LIST_CREATE)
            }
            SizeRule::SelfCompare if second.0 == 0 => LIST_CREATE,
            SizeRule::SelfCompare => {
                // cel-go computes the factor and the product in floating point.
                let factor = if second.1 { 2.0 + 0.1 } else { 2.0 };
                let squared = second.0.saturating_mul(second.0);
                ((squared as f64 * factor) as u64).saturating_add(LIST_CREATE)
            }
            SizeRule::ContainsIp
            | SizeRule::ContainsIpString
            | SizeRule::ContainsCidr
            | SizeRule::ContainsCidrString => {
                let prefix_bytes = second.0;
                let mut units = tenth(2 * prefix_bytes);
                if matches!(self, SizeRule::ContainsCidr | SizeRule::ContainsCidrString) {
                    units += tenth(prefix_bytes) + 1;
                }
                if matches!(
                    self,
                    SizeRule::ContainsIpString | SizeRule::ContainsCidrString
                ) {
                    units += tenth(first.0);
                }
                units
            }
        }
    }
}

/// A distinct site number for each sized call compiled.
static NEXT_SITE: std::sync::atomic::AtomicI64 = std::sync::atomic::AtomicI64::new(0);

/// cel-go's units for building a list, a map and a struct literal.
const LIST_CREATE: u64 = 10;
const MAP_CREATE: u64 = 30;
const STRUCT_CREATE: u64 = 40;

/// Conversions cel-go folds when their argument is a constant.
pub(super) const CONVERSIONS: &[&str] = &[
    "bool",
    "bytes",
    "double",
    "duration",
    "dyn",
    "int",
    "string",
    "timestamp",
    "type",
    "uint",
];

/// cel-go's units for an authorizer check (Kubernetes' `authz` library: two per expression).
const AUTHORIZER_CHECK: u64 = 350_000;

/// Kubernetes library functions charged by the size of their first operand (the receiver of
/// a member call), with the rule that turns the size into units (`library.CostEstimator`).
const LIBRARY_SIZED: &[(&str, SizeRule)] = &[
    ("url", SizeRule::Text),
    ("lowerAscii", SizeRule::Text),
    ("upperAscii", SizeRule::Text),
    ("substring", SizeRule::Text),
    ("trim", SizeRule::Text),
    ("escapeKey", SizeRule::Text),
    ("cidr", SizeRule::Text),
    ("isIP", SizeRule::Text),
    ("isCIDR", SizeRule::Text),
    ("ip", SizeRule::Text),
    ("quantity", SizeRule::Text),
    ("isQuantity", SizeRule::Text),
    ("semver", SizeRule::Text),
    ("isSemver", SizeRule::Text),
    ("replace", SizeRule::TextTwice),
    ("split", SizeRule::TextTwice),
    ("isCanonical", SizeRule::TextTwice),
    ("isSorted", SizeRule::Traversal),
    ("sum", SizeRule::Traversal),
    ("max", SizeRule::Traversal),
    ("min", SizeRule::Traversal),
    ("indexOf", SizeRule::Traversal),
    ("lastIndexOf", SizeRule::Traversal),
    // Refused at create for now (see `library::MEMBER_FUNCTIONS`); its cost when enabled.
    ("includes", SizeRule::Traversal),
    // cel-go's own units for these (Kubernetes' estimator leaves them to it): the format
    // string's (the quoted string's) size / 10, rounded up.
    ("format", SizeRule::Text),
    ("quote", SizeRule::Text),
];

/// Kubernetes library calls that charge their own units as they run, from their operands
/// (regexes: `matches`, `find`, `findAll`; a named format's `validate`; the authorizer's
/// selectors): the call costs nothing here.
pub(super) const CHARGED_BY_IMPLEMENTATION: &[&str] = &[
    "matches",
    "find",
    "findAll",
    "validate",
    "labelSelector",
    "fieldSelector",
];

/// Receivers that name a function namespace, not a value (`jsonpatch.escapeKey(…)`).
const NAMESPACES: &[&str] = &["jsonpatch", "strings", "lists", "optional", "sets", "math"];

/// Whether `call` is a namespaced global function (`sets.contains(…)`, `ip.isCanonical(…)`,
/// `format.named(…)`, `format.dns1123Label()`), whose receiver is a name, not a value.
fn is_namespaced(call: &CallExpr) -> bool {
    let Some(IdedExpr {
        expr: Expr::Ident(namespace),
        ..
    }) = call.target.as_deref()
    else {
        return false;
    };
    let function = call.func_name.as_str();
    NAMESPACES.contains(&namespace.as_str())
        || (namespace == "ip" && function == "isCanonical")
        || (namespace == "format"
            && (function == "named" || super::library::FORMATS.contains(&function)))
}

/// What the apiserver's checker knows of an expression's type, where a cost depends on it:
/// `object`, `oldObject`, `params`, … are `dyn`, and so is all read from them; literals and
/// the results of some functions are typed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum StaticType {
    String,
    Bytes,
    /// A list of strings (`split`, `findAll`, a literal of strings).
    StringList,
    /// A list of ints (`lists.range`, a literal of ints).
    IntList,
    List,
    /// An int, uint, double, bool, duration or timestamp (a literal, `size`, a conversion, a
    /// comparison, an item of a list of ints).
    Scalar,
    Dyn,
}

impl StaticType {
    fn is_list(self) -> bool {
        matches!(
            self,
            StaticType::List | StaticType::StringList | StaticType::IntList
        )
    }
}

thread_local! {
    /// The comprehension variables in scope while a program is instrumented, innermost last,
    /// with what the checker knows of their types (strings, over a list of strings).
    static SCOPES: std::cell::RefCell<Vec<(String, StaticType)>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

/// A comprehension variable in scope until dropped.
struct Scope;

impl Scope {
    fn enter(variable: &str, range: StaticType) -> Scope {
        let element = match range {
            StaticType::StringList => StaticType::String,
            StaticType::IntList => StaticType::Scalar,
            _ => StaticType::Dyn,
        };
        Scope::bind(variable, element)
    }

    /// A variable that holds a value of this type (a binding's).
    fn bind(variable: &str, value: StaticType) -> Scope {
        SCOPES.with(|scopes| scopes.borrow_mut().push((variable.to_owned(), value)));
        Scope
    }
}

impl Drop for Scope {
    fn drop(&mut self) {
        SCOPES.with(|scopes| scopes.borrow_mut().pop());
    }
}

/// The checker's type of `expr`, as far as [`StaticType`] tells it (`Dyn` for anything else).
fn static_type(expr: &IdedExpr) -> StaticType {
    match &expr.expr {
        Expr::Literal(LiteralValue::String(_)) => StaticType::String,
        Expr::Literal(LiteralValue::Bytes(_)) => StaticType::Bytes,
        Expr::Literal(
            LiteralValue::Int(_)
            | LiteralValue::UInt(_)
            | LiteralValue::Double(_)
            | LiteralValue::Boolean(_),
        ) => StaticType::Scalar,
        Expr::Ident(name) => SCOPES.with(|scopes| {
            scopes
                .borrow()
                .iter()
                .rev()
                .find(|(variable, _)| variable == name)
                .map_or(StaticType::Dyn, |(_, t)| *t)
        }),
        Expr::List(list)
            if !list.elements.is_empty()
                && list
                    .elements
                    .iter()
                    .all(|e| static_type(e) == StaticType::String) =>
        {
            StaticType::StringList
        }
        Expr::List(list)
            if !list.elements.is_empty()
                && list
                    .elements
                    .iter()
                    .all(|e| matches!(e.expr, Expr::Literal(LiteralValue::Int(_)))) =>
        {
            StaticType::IntList
        }
        Expr::List(_) => StaticType::List,
        // `map` and `filter` build their result in a list.
        Expr::Comprehension(c) if matches!(c.accu_init.expr, Expr::List(_)) => StaticType::List,
        Expr::Call(call) => {
            let member = call.target.is_some();
            match call.func_name.as_str() {
                "string" if !member && call.args.len() == 1 => StaticType::String,
                "bytes" if !member && call.args.len() == 1 => StaticType::Bytes,
                "lowerAscii" | "upperAscii" | "trim" | "replace" | "substring" | "charAt"
                | "format" | "join" | "find"
                    if member && !is_namespaced(call) =>
                {
                    StaticType::String
                }
                "quote" if is_namespaced(call) => StaticType::String,
                "size" if call.args.len() + usize::from(member) == 1 => StaticType::Scalar,
                "int" | "uint" | "double" | "bool" | "duration" | "timestamp"
                    if !member && call.args.len() == 1 =>
                {
                    StaticType::Scalar
                }
                "indexOf" | "lastIndexOf" | "startsWith" | "endsWith" | "matches"
                    if member && !is_namespaced(call) =>
                {
                    StaticType::Scalar
                }
                operators::EQUALS
                | operators::NOT_EQUALS
                | operators::LESS
                | operators::LESS_EQUALS
                | operators::GREATER
                | operators::GREATER_EQUALS
                | operators::LOGICAL_NOT
                | operators::LOGICAL_AND
                | operators::LOGICAL_OR
                | operators::IN
                    if !member =>
                {
                    StaticType::Scalar
                }
                "split" | "findAll" if member => StaticType::StringList,
                "range" if is_namespaced(call) => StaticType::IntList,
                // `list(T)` in, `list(T)` out.
                "reverse" | "slice" | "distinct" | "sort" if member && !is_namespaced(call) => {
                    match call.target.as_deref().map(static_type) {
                        Some(typed @ (StaticType::StringList | StaticType::IntList)) => typed,
                        Some(other) if other.is_list() => StaticType::List,
                        _ => StaticType::Dyn,
                    }
                }
                // `+` resolves to one overload when either operand is typed: that one's type.
                operators::ADD if !member && call.args.len() == 2 => {
                    match (static_type(&call.args[0]), static_type(&call.args[1])) {
                        (StaticType::Dyn, other) | (other, StaticType::Dyn) if other.is_list() => {
                            StaticType::List
                        }
                        (StaticType::Dyn, other) | (other, StaticType::Dyn) => other,
                        (first, second) if first == second => first,
                        (first, second) if first.is_list() && second.is_list() => StaticType::List,
                        _ => StaticType::Dyn,
                    }
                }
                operators::CONDITIONAL if call.args.len() == 3 => {
                    match (static_type(&call.args[1]), static_type(&call.args[2])) {
                        (first, second) if first == second => first,
                        _ => StaticType::Dyn,
                    }
                }
                _ => StaticType::Dyn,
            }
        }
        _ => StaticType::Dyn,
    }
}

/// The call `sortBy` expands into: the list, sorted by the keys its argument computes.
const SORT_BY_KEYS: &str = "@sortByAssociatedKeys";

/// Whether the checker knows the type of the keys `sortBy` computes (`keys`: its `map`
/// expansion, `@result + [key]`): then it picks that type's overload.
fn sort_keys_are_typed(keys: &IdedExpr) -> bool {
    let Expr::Comprehension(c) = &keys.expr else {
        return false;
    };
    let Expr::Call(step) = &c.loop_step.expr else {
        return false;
    };
    let Some(Expr::List(item)) = step.args.get(1).map(|arg| &arg.expr) else {
        return false;
    };
    let _scope = Scope::enter(&c.iter_var, static_type(&c.iter_range));
    item.elements.len() == 1
        && matches!(
            static_type(&item.elements[0]),
            StaticType::String | StaticType::Bytes | StaticType::Scalar
        )
}

/// Whether the checker knows `expr` is a string or bytes.
fn is_text(expr: &IdedExpr) -> bool {
    matches!(static_type(expr), StaticType::String | StaticType::Bytes)
}

/// `list.reverse()`, `list.slice(from, to)`, `lists.range(n)`: charged by the list they
/// return (see [`region`]).
fn is_list_result_sized(call: &CallExpr) -> bool {
    match (call.func_name.as_str(), call.args.len()) {
        ("reverse", 0) | ("slice", 2) => call.target.is_some() && !is_namespaced(call),
        ("range", 1) => is_namespaced(call),
        _ => false,
    }
}

/// `list.join()`, `list.join(separator)`: charged by its result (see [`region`]).
fn is_join(call: &CallExpr) -> bool {
    call.func_name == "join" && call.target.is_some() && call.args.len() <= 1
}

/// Wraps the regions of `expr` in `@cost` calls charging their units.
pub(super) fn instrument(expr: &mut IdedExpr) {
    let units = region(expr);
    charge(expr, units);
}

/// Wraps `expr` to charge `units` each time it is evaluated (nothing when 0).
fn charge(expr: &mut IdedExpr, units: u64) {
    if units == 0 {
        return;
    }
    let inner = std::mem::take(expr);
    *expr = IdedExpr {
        id: inner.id,
        expr: Expr::Call(CallExpr {
            func_name: COST_FUNCTION.to_owned(),
            target: None,
            args: vec![
                IdedExpr {
                    id: inner.id,
                    expr: Expr::Literal(LiteralValue::Int(
                        (units.min(i64::MAX as u64) as i64).into(),
                    )),
                },
                inner,
            ],
        }),
    };
}

/// Wraps `expr` as a region of its own.
fn own_region(expr: &mut IdedExpr) {
    let units = region(expr);
    charge(expr, units);
}

/// An arm of `?:`. cel-go plans a conditional as an attribute and resolves an arm that is
/// itself an attribute without observing its root: `c ? a.b : x` charges 1 for `a.b`, 0 for
/// `x` (as the false arm of `exists_one`'s and `filter`'s steps, `@result`, is free).
fn arm(expr: &mut IdedExpr) {
    let units = region(expr);
    let units = if is_attribute(expr) {
        units.saturating_sub(1)
    } else {
        units
    };
    charge(expr, units);
}

/// A literal operand that makes a comparison cost 1 whatever the other operand (unless that
/// one is empty, which cel-go charges 0): a number, a boolean, null, or a string or byte string
/// of 1 to 10 characters.
fn is_short_literal(expr: &IdedExpr) -> bool {
    match &expr.expr {
        Expr::Literal(LiteralValue::String(s)) => (1..=10).contains(&s.chars().count()),
        Expr::Literal(LiteralValue::Bytes(b)) => (1..=10).contains(&b.len()),
        Expr::Literal(_) => true,
        _ => false,
    }
}

fn is_empty_literal(expr: &IdedExpr) -> bool {
    match &expr.expr {
        Expr::Literal(LiteralValue::String(s)) => s.is_empty(),
        Expr::Literal(LiteralValue::Bytes(b)) => b.is_empty(),
        Expr::List(list) => list.elements.is_empty(),
        Expr::Map(map) => map.entries.is_empty(),
        _ => false,
    }
}

fn is_literal(expr: &IdedExpr) -> bool {
    match &expr.expr {
        Expr::Literal(_) => true,
        Expr::List(list) => list.elements.iter().all(is_literal),
        Expr::Map(map) => map.entries.iter().all(|entry| match &entry.expr {
            EntryExpr::MapEntry(e) => is_literal(&e.key) && is_literal(&e.value),
            EntryExpr::StructField(_) => false,
        }),
        _ => false,
    }
}

/// A variable, or fields and indexes applied to one: one attribute in cel-go.
fn is_attribute(expr: &IdedExpr) -> bool {
    match &expr.expr {
        Expr::Ident(_) => true,
        Expr::Select(select) => !select.test && is_attribute(&select.operand),
        Expr::Call(call) if is_index(call) => is_attribute(&call.args[0]),
        _ => false,
    }
}

fn is_index(call: &CallExpr) -> bool {
    call.target.is_none()
        && call.args.len() == 2
        && matches!(
            call.func_name.as_str(),
            operators::INDEX | operators::OPT_INDEX | operators::OPT_SELECT
        )
}

/// The units of `expr` charged whenever it is evaluated; conditional parts inside it are
/// wrapped as regions of their own.
fn region(expr: &mut IdedExpr) -> u64 {
    match &mut expr.expr {
        Expr::Literal(_) | Expr::Unspecified => 0,
        Expr::Ident(name) => {
            if super::check::TYPE_NAMES.contains(&name.as_str()) {
                0
            } else {
                1
            }
        }
        Expr::Select(select) => {
            let relative = u64::from(!is_attribute(&select.operand));
            let field = u64::from(!select.test);
            region(&mut select.operand) + relative + field
        }
        Expr::List(list) => {
            if list.elements.iter().all(is_literal) {
                0
            } else {
                LIST_CREATE + list.elements.iter_mut().map(region).sum::<u64>()
            }
        }
        Expr::Map(map) => {
            if map.entries.iter().all(|entry| match &entry.expr {
                EntryExpr::MapEntry(e) => is_literal(&e.key) && is_literal(&e.value),
                EntryExpr::StructField(_) => false,
            }) {
                return 0;
            }
            let mut units = MAP_CREATE;
            for entry in &mut map.entries {
                if let EntryExpr::MapEntry(e) = &mut entry.expr {
                    units += region(&mut e.key) + region(&mut e.value);
                }
            }
            units
        }
        Expr::Struct(strct) => {
            let mut units = STRUCT_CREATE;
            for entry in &mut strct.entries {
                if let EntryExpr::StructField(field) = &mut entry.expr {
                    units += region(&mut field.value);
                }
            }
            units
        }
        Expr::Comprehension(comprehension) => {
            let c = &mut **comprehension;
            if c.iter_var == "#unused" {
                // A binding: the two-variable macros bind their names from `@it[0]`/`@it[1]`,
                // which cel-go iterates natively, for free.
                let value = static_type(&c.accu_init);
                let init = match &c.accu_init.expr {
                    Expr::Call(call) if is_index(call) => 0,
                    _ => region(&mut c.accu_init),
                };
                let _scope = Scope::bind(&c.accu_var, value);
                return init + region(&mut c.result);
            }
            let range = static_type(&c.iter_range);
            let units = region(&mut c.iter_range) + region(&mut c.accu_init);
            let _scope = Scope::enter(&c.iter_var, range);
            own_region(&mut c.loop_cond);
            let accu = c.accu_var.clone();
            step_region(&accu, &mut c.loop_step);
            units + region(&mut c.result)
        }
        Expr::Call(call) if is_list_result_sized(call) => {
            // cel-go's lists tracker charges these by the list they return, in place of 1:
            // the call's value is measured as it is returned.
            let target = if is_namespaced(call) {
                0
            } else {
                call.target.as_deref_mut().map_or(0, region)
            };
            let units = 1 + target + call.args.iter_mut().map(region).sum::<u64>();
            sized(expr, -1, SizeRule::ListAllocation);
            units
        }
        Expr::Call(call) if is_join(call) => {
            // Kubernetes charges `join` twice its result's size / 10, rounded up, in place of
            // 1: the call's value is measured as it is returned.
            let target = call.target.as_deref_mut().map_or(0, region);
            let units = target + call.args.iter_mut().map(region).sum::<u64>();
            sized(expr, -1, SizeRule::TextTwice);
            units
        }
        Expr::Call(call) => call_units(call),
    }
}

/// The loop step, charged per iteration. The append steps of `map` and `filter`
/// (`@result + [x]`, `f ? @result + [x] : @result`) keep their shape, which the interpreter
/// runs without copying the list: their units go inside the appended item and the guard.
fn step_region(accu: &str, step: &mut IdedExpr) {
    let is_accu = |e: &IdedExpr| matches!(&e.expr, Expr::Ident(name) if name == accu);
    if let Expr::Call(call) = &mut step.expr {
        if matches!(
            call.func_name.as_str(),
            operators::LOGICAL_AND | operators::LOGICAL_OR
        ) && call.args.len() == 2
            && is_accu(&call.args[0])
        {
            // `all` and `exists`: the condition lets the step run only while the accumulator
            // does not decide the result, so the predicate always runs with it. The charge
            // goes inside, before the predicate, as the connective's identity
            // (`acc || (@cost(n, false) || p)`): the step keeps the shape by which the
            // interpreter defers a predicate's error to the items after it, which may absorb
            // it (`error || true` is `true`), as cel-go's fold does, and an item whose
            // predicate fails is charged as cel-go charges it.
            let units = 1 + region(&mut call.args[1]);
            let identity = call.func_name == operators::LOGICAL_AND;
            let predicate = std::mem::take(&mut call.args[1]);
            let mut charged = IdedExpr {
                id: predicate.id,
                expr: Expr::Literal(LiteralValue::Boolean(identity.into())),
            };
            charge(&mut charged, units);
            call.args[1] = IdedExpr {
                id: predicate.id,
                expr: Expr::Call(CallExpr {
                    func_name: call.func_name.clone(),
                    target: None,
                    args: vec![charged, predicate],
                }),
            };
            return;
        }
        if call.func_name == operators::ADD
            && call.target.is_none()
            && call.args.len() == 2
            && is_accu(&call.args[0])
            && let Expr::List(list) = &mut call.args[1].expr
            && list.elements.len() == 1
        {
            // `@result` 1, the list, the `+` 1.
            let units = 2 + list_item_units(list);
            charge(&mut list.elements[0], units);
            return;
        }
        if call.func_name == operators::CONDITIONAL
            && call.target.is_none()
            && call.args.len() == 3
            && is_accu(&call.args[2])
            && let [guard, append, _] = call.args.as_mut_slice()
            && let Expr::Call(add) = &mut append.expr
            && add.func_name == operators::ADD
            && add.args.len() == 2
            && is_accu(&add.args[0])
            && let Expr::List(list) = &mut add.args[1].expr
            && list.elements.len() == 1
        {
            // The guard every time; the append arm (`@result` 1, the list, `+` 1) when taken.
            // The arm not taken, `@result`, is free: see [`arm`].
            let guard_units = region(guard);
            charge(guard, guard_units);
            let units = 2 + list_item_units(list);
            charge(&mut list.elements[0], units);
            return;
        }
    }
    own_region(step);
}

/// The rule of a Kubernetes library call charged by its first operand's size, if it is one.
fn library_sized(call: &CallExpr) -> Option<SizeRule> {
    let has_operand = call.target.is_some() || !call.args.is_empty();
    let (_, rule) = LIBRARY_SIZED
        .iter()
        .find(|(name, _)| *name == call.func_name)?;
    has_operand.then_some(*rule)
}

/// The units of a one-item list literal built per iteration, its item included.
fn list_item_units(list: &mut ListExpr) -> u64 {
    if list.elements.iter().all(is_literal) {
        0
    } else {
        LIST_CREATE + region(&mut list.elements[0])
    }
}

/// Wraps `expr` in `@sized(site, rule, expr)`.
fn sized(expr: &mut IdedExpr, site: i64, rule: SizeRule) {
    let inner = std::mem::take(expr);
    let literal = |value: i64| IdedExpr {
        id: inner.id,
        expr: Expr::Literal(LiteralValue::Int(value.into())),
    };
    *expr = IdedExpr {
        id: inner.id,
        expr: Expr::Call(CallExpr {
            func_name: SIZED_FUNCTION.to_owned(),
            target: None,
            args: vec![literal(site), literal(rule as i64), inner],
        }),
    };
}

/// Charges a two-operand call by its operands' sizes: `first` is evaluated first (the
/// interpreter evaluates a call's arguments before its target), `second` charges.
fn sized_pair(first: &mut IdedExpr, second: &mut IdedExpr, rule: SizeRule) -> u64 {
    let units = region(first) + region(second);
    let site = NEXT_SITE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    sized(first, site, SizeRule::Note);
    sized(second, site, rule);
    units
}

fn call_units(call: &mut CallExpr) -> u64 {
    let name = call.func_name.as_str();
    let binary = call.target.is_none() && call.args.len() == 2;
    let both_literal = call.args.iter().all(is_literal);
    match name {
        operators::LOGICAL_AND | operators::LOGICAL_OR if call.args.len() == 2 => {
            let units = region(&mut call.args[0]);
            own_region(&mut call.args[1]);
            units
        }
        operators::CONDITIONAL if call.args.len() == 3 => {
            let units = region(&mut call.args[0]);
            arm(&mut call.args[1]);
            arm(&mut call.args[2]);
            units
        }
        operators::EQUALS | operators::NOT_EQUALS
            if call.args.len() == 2 && call.args.iter().any(is_empty_literal) =>
        {
            // cel-go charges equality the smaller operand's size / 10, rounded up: nothing
            // against an empty string, list or map.
            call.args.iter_mut().map(region).sum()
        }
        _ if is_index(call) => {
            let relative = u64::from(!is_attribute(&call.args[0]));
            let operand = region(&mut call.args[0]);
            let index = &mut call.args[1];
            let index_units = if is_literal(index) {
                1
            } else if is_attribute(index) {
                region(index)
            } else {
                region(index) + 1
            };
            operand + relative + index_units
        }
        operators::IN if call.args.len() == 2 && is_literal(&call.args[1]) => {
            // Membership in a constant list is a set lookup, planned at compile time.
            region(&mut call.args[0])
        }
        // `in` a list the checker knows is one (`in_list`); on a `dyn` operand the call is
        // dispatched at runtime and costs 1.
        operators::IN if binary && static_type(&call.args[1]).is_list() => {
            let units = region(&mut call.args[0]) + region(&mut call.args[1]);
            sized(&mut call.args[1], -1, SizeRule::InList);
            units
        }
        // Against a short literal: 1 (0 in cel-go when the other operand is empty; the check is
        // not worth its cost on every comparison).
        operators::EQUALS
        | operators::NOT_EQUALS
        | operators::LESS
        | operators::LESS_EQUALS
        | operators::GREATER
        | operators::GREATER_EQUALS
            if binary && call.args.iter().any(is_short_literal) =>
        {
            1 + call.args.iter_mut().map(region).sum::<u64>()
        }
        operators::ADD
            if binary
                && call.args.iter().any(|arg| {
                    matches!(
                        &arg.expr,
                        Expr::Literal(
                            LiteralValue::Int(_) | LiteralValue::UInt(_) | LiteralValue::Double(_)
                        )
                    )
                }) =>
        {
            // Numbers: 1.
            1 + call.args.iter_mut().map(region).sum::<u64>()
        }
        operators::EQUALS | operators::NOT_EQUALS if binary && !both_literal => {
            let [first, second] = call.args.as_mut_slice() else {
                unreachable!("two arguments")
            };
            sized_pair(first, second, SizeRule::Min)
        }
        // Ordering and `+` of strings (bytes) are charged by size only where the checker
        // chose the string (bytes) overload, for an operand it knows is one; between two `dyn`
        // operands the call is dispatched at runtime and costs 1.
        operators::LESS
        | operators::LESS_EQUALS
        | operators::GREATER
        | operators::GREATER_EQUALS
            if binary && !both_literal && call.args.iter().any(is_text) =>
        {
            let [first, second] = call.args.as_mut_slice() else {
                unreachable!("two arguments")
            };
            sized_pair(first, second, SizeRule::MinOfText)
        }
        operators::ADD if binary && !both_literal && call.args.iter().any(is_text) => {
            let [first, second] = call.args.as_mut_slice() else {
                unreachable!("two arguments")
            };
            sized_pair(first, second, SizeRule::SumOfText)
        }
        // cel-go's sets tracker: 1 and the operands' sizes multiplied (twice for
        // `equivalent`), in place of 1; each set function has one overload, so the checker
        // always picks it.
        "contains" | "intersects" | "equivalent"
            if call.args.len() == 2
                && matches!(call.target.as_deref(), Some(IdedExpr { expr: Expr::Ident(n), .. }) if n == "sets") =>
        {
            let rule = if name == "equivalent" {
                SizeRule::SetsProductTwice
            } else {
                SizeRule::SetsProduct
            };
            let [first, second] = call.args.as_mut_slice() else {
                unreachable!("two arguments")
            };
            1 + sized_pair(first, second, rule)
        }
        // cel-go's lists tracker: `flatten()` by its operand's size, `distinct()` (one
        // overload) and `sort()` of a list the checker knows holds strings or ints (the
        // overload it picks) by its operand's size squared; a `sort()` dispatched at runtime
        // costs 1.
        "flatten" | "distinct" | "sort"
            if call.args.is_empty()
                && call.target.is_some()
                && !is_namespaced(call)
                && (name != "sort"
                    || matches!(
                        call.target.as_deref().map(static_type),
                        Some(StaticType::StringList | StaticType::IntList)
                    )) =>
        {
            let rule = if name == "flatten" {
                SizeRule::ListAllocation
            } else {
                SizeRule::SelfCompare
            };
            let target = call.target.as_deref_mut().expect("a target");
            let units = 1 + region(target);
            sized(target, -1, rule);
            units
        }
        // `sortBy`'s sort (cel-go's lists tracker, on the overload for the keys' type): the
        // keys' size squared, as `sort`, where the checker knows their type; dispatched at
        // runtime (`dyn` keys) 1.
        SORT_BY_KEYS
            if call.args.len() == 1
                && call.target.is_some()
                && sort_keys_are_typed(&call.args[0]) =>
        {
            let units =
                1 + call.target.as_deref_mut().map_or(0, region) + region(&mut call.args[0]);
            sized(&mut call.args[0], -1, SizeRule::SelfCompare);
            units
        }
        // `flatten(depth)`: by its receiver's size times the depth (one overload).
        "flatten" if call.args.len() == 1 && call.target.is_some() && !is_namespaced(call) => {
            let target = call.target.as_deref_mut().expect("a target");
            let units = 1 + region(target) + region(&mut call.args[0]);
            let site = NEXT_SITE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            sized(&mut call.args[0], site, SizeRule::NoteInt);
            sized(target, site, SizeRule::FlattenDepth);
            units
        }
        "contains" if call.args.len() == 1 && call.target.is_some() => {
            let target = call.target.as_deref_mut().expect("a target");
            sized_pair(&mut call.args[0], target, SizeRule::Product)
        }
        "startsWith" | "endsWith" if call.args.len() == 1 && call.target.is_some() => {
            // cel-go v0.29 charges the prefix's (suffix's) size, not the text's.
            let target = call.target.as_deref_mut().expect("a target");
            let units = region(target) + region(&mut call.args[0]);
            sized(&mut call.args[0], -1, SizeRule::Text);
            units
        }
        "containsIP" | "containsCIDR" if call.args.len() == 1 && call.target.is_some() => {
            // The string's parse is charged only where the checker chose the string overload.
            let string = static_type(&call.args[0]) == StaticType::String;
            let rule = match (name, string) {
                ("containsIP", false) => SizeRule::ContainsIp,
                ("containsIP", true) => SizeRule::ContainsIpString,
                (_, false) => SizeRule::ContainsCidr,
                (_, true) => SizeRule::ContainsCidrString,
            };
            let target = call.target.as_deref_mut().expect("a target");
            sized_pair(&mut call.args[0], target, rule)
        }
        // Charged by the implementation, from its operands.
        _ if CHARGED_BY_IMPLEMENTATION.contains(&name) => {
            let target = call.target.as_deref_mut().map_or(0, region);
            target + call.args.iter_mut().map(region).sum::<u64>()
        }
        // cel-go's units for `string(bytes)` and `bytes(string)`: the operand's size / 10, when
        // the checker chose that overload, which it does only for an operand known to be bytes
        // (a string); on a `dyn` operand (anything read from `object`) the call is dispatched
        // at runtime and costs 1, as other conversions; a conversion of a constant nothing.
        "string" | "bytes"
            if call.target.is_none()
                && call.args.len() == 1
                && !is_literal(&call.args[0])
                && static_type(&call.args[0])
                    == if name == "string" {
                        StaticType::Bytes
                    } else {
                        StaticType::String
                    } =>
        {
            let units = region(&mut call.args[0]);
            sized(&mut call.args[0], -1, SizeRule::Text);
            units
        }
        "check" if call.args.len() == 1 && call.target.is_some() => {
            let target = call.target.as_deref_mut().map_or(0, region);
            AUTHORIZER_CHECK + target + region(&mut call.args[0])
        }
        _ if library_sized(call).is_some() => {
            let rule = library_sized(call).expect("a sized library call");
            let namespaced = is_namespaced(call);
            let mut units = call.args.iter_mut().map(region).sum::<u64>();
            let operand = match call.target.as_deref_mut() {
                Some(target) if !namespaced => {
                    units += region(target);
                    target
                }
                _ => &mut call.args[0],
            };
            sized(operand, -1, rule);
            units
        }
        // The two-variable macros' plumbing, which cel-go does not need.
        "@pairs" | "@mapFromPairs" | "@mapFromMaps" => call.args.iter_mut().map(region).sum(),
        _ if call.target.is_none()
            && call.args.len() == 1
            && CONVERSIONS.contains(&name)
            && is_literal(&call.args[0]) =>
        {
            0
        }
        _ => {
            let target = if is_namespaced(call) {
                0
            } else {
                call.target.as_deref_mut().map_or(0, region)
            };
            1 + target + call.args.iter_mut().map(region).sum::<u64>()
        }
    }
}

// ---- at evaluation -----------------------------------------------------------------------

thread_local! {
    /// The first operand's size and textness of each sized call being evaluated, by site.
    static NOTED: std::cell::RefCell<Vec<(i64, (u64, bool))>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Charges (or notes, for [`SizeRule::Note`]) the call at `site` for an operand of `size`.
/// A charge with nothing noted (the first operand failed, and the error was absorbed) charges
/// nothing: cel-go charges no call whose arguments failed.
pub(crate) fn charge_sized(
    site: i64,
    rule: SizeRule,
    operand: (u64, bool),
) -> Result<(), cel::ExecutionError> {
    match rule {
        SizeRule::Note | SizeRule::NoteInt => {
            NOTED.with(|noted| {
                let mut noted = noted.borrow_mut();
                match noted.iter_mut().find(|(s, _)| *s == site) {
                    Some(entry) => entry.1 = operand,
                    None => noted.push((site, operand)),
                }
            });
            Ok(())
        }
        SizeRule::InList
        | SizeRule::Text
        | SizeRule::TextTwice
        | SizeRule::Traversal
        | SizeRule::ListAllocation
        | SizeRule::SelfCompare => super::charge_cost(rule.units((0, false), operand)),
        _ => {
            let first = NOTED.with(|noted| {
                let mut noted = noted.borrow_mut();
                let at = noted.iter().position(|(s, _)| *s == site)?;
                Some(noted.swap_remove(at).1)
            });
            match first {
                Some(first) => super::charge_cost(rule.units(first, operand)),
                None => Ok(()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use serde_json::json;

    use super::super::{
        Activation, AuthorizationCheck, AuthorizationDecision, Authorizer, CelEnvironment,
        CelLimits,
    };

    struct Allows;

    impl Authorizer for Allows {
        fn authorize(&self, _: &AuthorizationCheck) -> Result<AuthorizationDecision, String> {
            Ok(AuthorizationDecision {
                allowed: true,
                reason: String::new(),
                error: String::new(),
            })
        }
    }

    /// 35 characters in 40 bytes: the library's sizes count characters, `string(bytes)` and
    /// the traversals bytes.
    fn text() -> String {
        format!("{}{}", "é".repeat(5), "a".repeat(30))
    }

    fn pod() -> serde_json::Value {
        json!({"metadata": {"name": "web", "annotations": {
            "text": text(),
            "ip6": "2001:db8::1",
            "selector": "app=web,tier!=db",
        }}, "spec": {"names": ["a", "b", "web"], "texts": [text()]}})
    }

    fn cost_of(source: &str) -> u64 {
        let env = CelEnvironment::kubernetes().limits(CelLimits {
            max_eval_time: Duration::from_secs(60),
            ..CelLimits::default()
        });
        let program = env.compile(source).unwrap();
        let object = pod();
        let activation = Activation::new()
            .object(&object)
            .authorizer(Arc::new(Allows), None);
        let (result, cost) = program.evaluate_with_cost(&activation);
        assert_eq!(result, Ok(cel::Value::Bool(true)), "{source}");
        cost
    }

    fn assert_costs(cases: &[(&str, u64)]) {
        for (source, expected) in cases {
            assert_eq!(cost_of(source), *expected, "{source}");
        }
    }

    #[test]
    fn join_costs_twice_its_result_over_ten() {
        assert_costs(&[
            // The list 10 + its items 4 + 3; the result of 35 + 1 + 3 characters: 78 / 10 → 8;
            // `!= ''` nothing.
            (
                "[object.metadata.annotations.text, object.metadata.name].join('-') != ''",
                17 + 8,
            ),
            // 'web': 6 / 10 → 1.
            ("[object.metadata.name].join() == 'web'", 13 + 1 + 1),
            // An empty result costs nothing (the constant list nothing either).
            ("[''].join() == ''", 0),
        ]);
    }

    #[test]
    fn set_and_list_calls_cost_as_cel_go_tracks_them() {
        assert_costs(&[
            // `spec.names` 3 twice; 1 + 3 × 1 (the literal list is constant); `!` 1.
            ("!sets.contains(object.spec.names, ['z'])", 3 + 1 + 3 + 1),
            // 1 + 3 × 3; 3 + 3.
            (
                "sets.intersects(object.spec.names, object.spec.names)",
                6 + 1 + 9,
            ),
            // 1 + 2 × 3 × 3.
            (
                "sets.equivalent(object.spec.names, object.spec.names)",
                6 + 1 + 18,
            ),
            // 3; 1 + the result's 3 + a list's 10; size() 1; == 1.
            ("object.spec.names.reverse().size() == 3", 3 + 14 + 1 + 1),
            ("object.spec.names.slice(1, 3).size() == 2", 3 + 13 + 1 + 1),
            ("lists.range(4).size() == 4", 15 + 1 + 1),
            // The list literal 10 + `spec.names` 3 (a constant list nothing); 1 + its 2 items
            // + 10.
            (
                "[object.spec.names, ['x']].flatten().size() == 4",
                13 + 13 + 1 + 1,
            ),
            // 3 strings: 1 + 3² × 2.1 → 18 + 10; of no items: 1 + 10.
            ("object.spec.names.distinct().size() == 3", 3 + 29 + 1 + 1),
            (
                "object.spec.names.slice(0, 0).distinct().size() == 0",
                3 + 11 + 11 + 1 + 1,
            ),
            // A list the checker knows holds strings: sorted like `distinct`; 1 + 4² × 2.1 →
            // 33 + 10; `split` 2 × 7 / 10 → 2.
            ("'a,b,c,d'.split(',').sort().size() == 4", 2 + 44 + 1 + 1),
            // A `dyn` list: dispatched at runtime, 1.
            ("object.spec.names.sort().size() == 3", 3 + 1 + 1 + 1),
            // Ints, typed through `slice`: 1 + 2 + 10; 1 + 2² × 2 + 10.
            (
                "lists.range(4).slice(0, 2).sort().size() == 2",
                15 + 13 + 19 + 1 + 1,
            ),
            ("[3, 1, 2].sort() == [1, 2, 3]", 1 + 18 + 10 + 1),
            // The receiver's 2 items times the depth, + 1 + 10: 13 + 15 + 1 + 1; depth 0: 11;
            // a depth read from the object (`size` 1 + 3): 2 × 3 + 11.
            (
                "[object.spec.names, ['x']].flatten(2).size() == 4",
                13 + 15 + 1 + 1,
            ),
            (
                "[object.spec.names].flatten(0).size() == 1",
                13 + 11 + 1 + 1,
            ),
            (
                "[object.spec.names, ['x']].flatten(size(object.spec.names)).size() == 4",
                13 + 4 + 17 + 1 + 1,
            ),
        ]);
    }

    #[test]
    fn find_and_find_all_cost_as_matches() {
        assert_costs(&[
            // (1 + 35) / 10 → 4 times the pattern's 2 / 4 → 1.
            ("object.metadata.annotations.text.find('a+') != ''", 4 + 4),
            // (1 + 35) / 10 → 4 times 6 / 4 → 2; size() 1; == 1.
            (
                "object.metadata.annotations.text.findAll('[a-z]+', 1).size() == 1",
                4 + 8 + 1 + 1,
            ),
        ]);
    }

    #[test]
    fn conversions_between_strings_and_bytes_cost_their_operand_over_ten() {
        assert_costs(&[
            // bytes() of a `dyn` operand is dispatched at runtime: 1; size() 1; == 1.
            (
                "bytes(object.metadata.annotations.text).size() == 40",
                4 + 1 + 1 + 1,
            ),
            // `+ ''` makes it a string (the `+` 35 / 10 → 4): bytes() of 35 characters → 4.
            (
                "bytes(object.metadata.annotations.text + '').size() == 40",
                4 + 4 + 4 + 1 + 1,
            ),
            // bytes() 1, string() of 40 bytes 4, == of 35 characters 4, the two paths 4 each.
            (
                "string(bytes(object.metadata.annotations.text)) == \
                 object.metadata.annotations.text",
                4 + 1 + 4 + 4 + 4,
            ),
            // A string to a string costs 1; a conversion of a constant nothing.
            ("string(object.metadata.name) == 'web'", 3 + 1 + 1),
            ("string(1) == '1'", 1),
            // A comprehension variable over a list of strings is a string: the range 4 + split
            // 7; the condition 2, the step 1 + s 1 + bytes() 4 + size() 1 + `>` 1; the result 1.
            (
                "object.metadata.annotations.text.split(',').all(s, bytes(s).size() > 0)",
                11 + (2 + 1 + 7) + 1,
            ),
            // Over a `dyn` list, `dyn`: bytes() 1.
            (
                "object.spec.texts.all(s, bytes(s).size() > 0)",
                3 + (2 + 1 + 4) + 1,
            ),
        ]);
    }

    #[test]
    fn quote_and_format_cost_their_string_over_ten() {
        assert_costs(&[
            (
                "strings.quote(object.metadata.annotations.text).size() > 0",
                4 + 4 + 1 + 1,
            ),
            ("object.metadata.annotations.text.format([]) != ''", 4 + 4),
            // The format string 1; the list 10 + 3 (the constant 0); == 1.
            (
                "'%s-%d'.format([object.metadata.name, 1]) == 'web-1'",
                1 + 13 + 1,
            ),
        ]);
    }

    #[test]
    fn network_calls_cost_what_kubernetes_charges() {
        assert_costs(&[
            // `ip` names the function, not a variable: twice 11 / 10 → 3, and the path 4.
            ("ip.isCanonical(object.metadata.annotations.ip6)", 4 + 3),
            // cidr('10.0.0.0/8') 1; a /8 prefix is 1 byte: 2 / 10 → 1, the string 8 / 10 → 1.
            ("cidr('10.0.0.0/8').containsIP('10.1.2.3')", 1 + 2),
            // A /32 is 4 bytes: 8 / 10 → 1; the path 4. A `dyn` operand (the checker cannot
            // choose the string overload) is not charged its parse.
            (
                "cidr('2001:db8::/32').containsIP(object.metadata.annotations.ip6)",
                2 + 1 + 4,
            ),
            // A string it can: + 11 / 10 → 2 (and the `+ ''` 2).
            (
                "cidr('2001:db8::/32').containsIP(object.metadata.annotations.ip6 + '')",
                2 + 1 + 2 + 4 + 2,
            ),
            // A /0 has no bytes to compare: the call costs nothing.
            ("cidr('::/0').containsIP(ip('::1'))", 1 + 1),
            // /128 is 16 bytes: 32 / 10 → 4, and 16 / 10 → 2 + 1; the string 14 / 10 → 2.
            (
                "cidr('2001:db8::/128').containsCIDR('2001:db8::/128')",
                2 + 4 + 3 + 2,
            ),
            // /24 is 3 bytes: 6 / 10 → 1, 3 / 10 → 1 + 1.
            (
                "cidr('10.0.0.0/24').containsCIDR(cidr('10.0.0.0/28'))",
                2 + 2 + 3,
            ),
            // Equality of CIDRs costs 1, whatever their prefixes.
            (
                "cidr('2001:db8::/128') == cidr('2001:db8::/128')",
                2 + 2 + 1,
            ),
        ]);
    }

    #[test]
    fn validate_costs_a_match_against_the_format_regex_size() {
        assert_costs(&[
            // format.dns1123Label() 1 (`format` names the function); (1 + 3) / 10 → 1 times
            // 30 / 4 → 8; hasValue() 1.
            (
                "!format.dns1123Label().validate(object.metadata.name).hasValue()",
                1 + 3 + 8 + 1 + 1,
            ),
            // format.named() 1, value() 1; (1 + 35) / 10 → 4 times 1103 / 4 → 276.
            (
                "format.named('uri').value().validate(object.metadata.annotations.text) \
                 .hasValue()",
                1 + 1 + 4 + 4 * 276 + 1,
            ),
        ]);
    }

    #[test]
    fn selectors_cost_their_parse() {
        // authorizer, group, resource 1 each; the path 4; a selector of n characters costs
        // 10 + n / 10 + 50 × n / 2 (rounded up): 16 → 412, 3 → 111; the list 10, size 1, == 1.
        assert_costs(&[(
            "[authorizer.group('').resource('pods') \
             .labelSelector(object.metadata.annotations.selector).fieldSelector('a=b')] \
             .size() == 1",
            3 + 4 + 412 + 111 + 10 + 1 + 1,
        )]);
    }

    #[test]
    fn operators_between_dyn_operands_cost_1() {
        assert_costs(&[
            // Two `dyn` strings: `+` and `>=` are dispatched at runtime, 1 each.
            (
                "object.metadata.annotations.text + object.metadata.annotations.text != ''",
                4 + 4 + 1,
            ),
            (
                "object.metadata.annotations.text >= object.metadata.annotations.text",
                4 + 4 + 1,
            ),
            // A string operand chooses the string overloads: `+` 35 / 10 → 4, `>=` 4.
            (
                "object.metadata.annotations.text + '' >= object.metadata.annotations.text",
                4 + 4 + 4 + 4,
            ),
            // `in` a `dyn` list: 1; in a list literal: its size, 2.
            ("object.metadata.name in object.spec.names", 3 + 3 + 1),
            (
                "object.metadata.name in [object.metadata.name, 'a']",
                3 + 10 + 3 + 2,
            ),
        ]);
    }
}
