//! Static types of CEL expressions, as the apiserver's type checker infers them for
//! ValidatingAdmissionPolicy `status.typeChecking`: `object`, `oldObject` and `params` typed
//! from their schemas, `request` and `namespaceObject` from the apiserver's hand-written types.
//!
//! The checker reports what cel-go reports with certainty and stays silent elsewhere: a field
//! that the type of its operand does not have (`undefined field 'x'`), a selection on a value
//! that has no fields, and operators applied to primitive types that have no overload for
//! them. Anything it cannot type (unknown functions, two-variable comprehensions, `dyn`) is
//! `dyn`, which cel-go accepts everywhere.

use std::fmt;
use std::sync::Arc;

use cel::common::ast::{CallExpr, EntryExpr, Expr, IdedExpr, LiteralValue};

/// The static type of a CEL value.
#[derive(Clone)]
pub enum CelType {
    /// Any value: never an error.
    Dyn,
    /// The result of an expression that already has an error; silences further errors.
    Error,
    /// `null_type`.
    Null,
    /// `bool`.
    Bool,
    /// `int`.
    Int,
    /// `uint`.
    Uint,
    /// `double`.
    Double,
    /// `string`.
    String,
    /// `bytes`.
    Bytes,
    /// `google.protobuf.Duration`.
    Duration,
    /// `google.protobuf.Timestamp`.
    Timestamp,
    /// `list(T)`.
    List(Box<CelType>),
    /// `map(K, V)`.
    Map(Box<CelType>, Box<CelType>),
    /// An object with named fields.
    Object(Arc<dyn ObjectFields>),
    /// `optional_type(T)`.
    Optional(Box<CelType>),
    /// `type`.
    Type,
    /// An opaque library type (`net.IP`, `kubernetes.authorization.Authorizer`).
    Opaque(&'static str),
}

/// The fields of an object type.
pub trait ObjectFields: Send + Sync {
    /// The type of field `name` as CEL sees it (escaped), or `None` if the type has no such
    /// field.
    fn field(&self, name: &str) -> Option<CelType>;
}

/// An object type with a fixed list of fields.
pub struct DeclaredObject {
    fields: Vec<(String, CelType)>,
}

impl DeclaredObject {
    /// An object type with these fields.
    pub fn object_type(fields: impl IntoIterator<Item = (impl Into<String>, CelType)>) -> CelType {
        CelType::Object(Arc::new(DeclaredObject {
            fields: fields.into_iter().map(|(n, t)| (n.into(), t)).collect(),
        }))
    }
}

impl ObjectFields for DeclaredObject {
    fn field(&self, name: &str) -> Option<CelType> {
        self.fields
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, t)| t.clone())
    }
}

impl fmt::Debug for CelType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// cel-go's `FormatCELType` spelling.
impl fmt::Display for CelType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CelType::Dyn | CelType::Error => f.write_str("dyn"),
            CelType::Null => f.write_str("null_type"),
            CelType::Bool => f.write_str("bool"),
            CelType::Int => f.write_str("int"),
            CelType::Uint => f.write_str("uint"),
            CelType::Double => f.write_str("double"),
            CelType::String => f.write_str("string"),
            CelType::Bytes => f.write_str("bytes"),
            CelType::Duration => f.write_str("google.protobuf.Duration"),
            CelType::Timestamp => f.write_str("google.protobuf.Timestamp"),
            CelType::List(item) => write!(f, "list({item})"),
            CelType::Map(key, value) => write!(f, "map({key}, {value})"),
            CelType::Object(_) => f.write_str("object"),
            CelType::Optional(inner) => write!(f, "optional_type({inner})"),
            CelType::Type => f.write_str("type"),
            CelType::Opaque(name) => f.write_str(name),
        }
    }
}

impl CelType {
    fn is_dyn(&self) -> bool {
        matches!(self, CelType::Dyn | CelType::Error)
    }

    /// A primitive type whose name prints the same in every run (no generated type names).
    fn primitive(&self) -> bool {
        matches!(
            self,
            CelType::Null
                | CelType::Bool
                | CelType::Int
                | CelType::Uint
                | CelType::Double
                | CelType::String
                | CelType::Bytes
                | CelType::Duration
                | CelType::Timestamp
        )
    }

    fn numeric(&self) -> bool {
        matches!(self, CelType::Int | CelType::Uint | CelType::Double)
    }

    /// Structural equality; objects are equal only to themselves.
    fn same(&self, other: &CelType) -> bool {
        match (self, other) {
            (CelType::List(a), CelType::List(b)) | (CelType::Optional(a), CelType::Optional(b)) => {
                a.same(b)
            }
            (CelType::Map(ka, va), CelType::Map(kb, vb)) => ka.same(kb) && va.same(vb),
            (CelType::Object(a), CelType::Object(b)) => Arc::ptr_eq(a, b),
            (CelType::Opaque(a), CelType::Opaque(b)) => a == b,
            _ => std::mem::discriminant(self) == std::mem::discriminant(other),
        }
    }

    /// The type of a variable declared from this expression type, as the apiserver keeps
    /// `variables.<name>`: primitives, lists and maps keep their types; objects, optionals and
    /// the rest become `dyn`.
    pub fn as_variable(&self) -> CelType {
        match self {
            CelType::List(item) => CelType::List(Box::new(item.as_variable())),
            CelType::Map(key, value) => {
                CelType::Map(Box::new(key.as_variable()), Box::new(value.as_variable()))
            }
            t if t.primitive() => t.clone(),
            _ => CelType::Dyn,
        }
    }
}

/// A type error: the node it is about and cel-go's message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TypeIssue {
    /// The AST node id.
    pub id: u64,
    /// The message, as cel-go words it.
    pub message: String,
}

/// Infers the type of `expr` with `declared` variables; returns it and the issues found.
pub(super) fn infer(expr: &IdedExpr, declared: &[(&str, CelType)]) -> (CelType, Vec<TypeIssue>) {
    let mut checker = Checker {
        declared,
        scope: Vec::new(),
        issues: Vec::new(),
    };
    let output = checker.expr(expr);
    (output, checker.issues)
}

struct Checker<'d> {
    declared: &'d [(&'d str, CelType)],
    scope: Vec<(String, CelType)>,
    issues: Vec<TypeIssue>,
}

const TYPE_NAMES: &[&str] = &[
    "int",
    "uint",
    "double",
    "bool",
    "string",
    "bytes",
    "list",
    "map",
    "null_type",
    "type",
    "dyn",
    "optional_type",
];

impl Checker<'_> {
    fn report(&mut self, id: u64, message: String) -> CelType {
        self.issues.push(TypeIssue { id, message });
        CelType::Error
    }

    fn lookup(&self, name: &str) -> CelType {
        if let Some((_, t)) = self.scope.iter().rev().find(|(n, _)| n == name) {
            return t.clone();
        }
        if let Some((_, t)) = self.declared.iter().find(|(n, _)| *n == name) {
            return t.clone();
        }
        if TYPE_NAMES.contains(&name) {
            return CelType::Type;
        }
        CelType::Dyn
    }

    fn expr(&mut self, expr: &IdedExpr) -> CelType {
        match &expr.expr {
            Expr::Literal(literal) => match literal {
                LiteralValue::Boolean(_) => CelType::Bool,
                LiteralValue::Bytes(_) => CelType::Bytes,
                LiteralValue::Double(_) => CelType::Double,
                LiteralValue::Int(_) => CelType::Int,
                LiteralValue::Null => CelType::Null,
                LiteralValue::String(_) => CelType::String,
                LiteralValue::UInt(_) => CelType::Uint,
            },
            Expr::Ident(name) => self.lookup(name),
            Expr::Select(select) => {
                if qualified_library_name(expr) {
                    return CelType::Dyn;
                }
                let operand = self.expr(&select.operand);
                let field = self.select(expr.id, operand, &select.field);
                if select.test { CelType::Bool } else { field }
            }
            Expr::List(list) => {
                let items: Vec<CelType> = list
                    .elements
                    .iter()
                    .enumerate()
                    .map(|(i, e)| {
                        let t = self.expr(e);
                        match (list.optional_indices.contains(&i), t) {
                            (true, CelType::Optional(inner)) => *inner,
                            (true, _) => CelType::Dyn,
                            (false, t) => t,
                        }
                    })
                    .collect();
                CelType::List(Box::new(join(&items)))
            }
            Expr::Map(map) => {
                let mut keys = Vec::new();
                let mut values = Vec::new();
                for entry in &map.entries {
                    match &entry.expr {
                        EntryExpr::MapEntry(e) => {
                            keys.push(self.expr(&e.key));
                            let value = self.expr(&e.value);
                            values.push(match (e.optional, value) {
                                (true, CelType::Optional(inner)) => *inner,
                                (true, _) => CelType::Dyn,
                                (false, t) => t,
                            });
                        }
                        EntryExpr::StructField(f) => {
                            self.expr(&f.value);
                        }
                    }
                }
                CelType::Map(Box::new(join(&keys)), Box::new(join(&values)))
            }
            Expr::Struct(s) => {
                for entry in &s.entries {
                    match &entry.expr {
                        EntryExpr::MapEntry(e) => {
                            self.expr(&e.value);
                        }
                        EntryExpr::StructField(f) => {
                            self.expr(&f.value);
                        }
                    }
                }
                CelType::Dyn
            }
            Expr::Comprehension(c) => {
                let range = self.expr(&c.iter_range);
                let (first, second) = match (&range, c.iter_var2.is_some()) {
                    (CelType::List(item), false) => (item.as_ref().clone(), CelType::Dyn),
                    (CelType::List(item), true) => (CelType::Int, item.as_ref().clone()),
                    (CelType::Map(key, _), false) => (key.as_ref().clone(), CelType::Dyn),
                    (CelType::Map(key, value), true) => {
                        (key.as_ref().clone(), value.as_ref().clone())
                    }
                    _ => (CelType::Dyn, CelType::Dyn),
                };
                let init = self.expr(&c.accu_init);
                let depth = self.scope.len();
                self.scope.push((c.iter_var.clone(), first));
                if let Some(second_name) = &c.iter_var2 {
                    self.scope.push((second_name.clone(), second));
                }
                self.scope.push((c.accu_var.clone(), init.clone()));
                self.expr(&c.loop_cond);
                let step = self.expr(&c.loop_step);
                let accumulator = match init {
                    CelType::List(item) if item.is_dyn() => step,
                    init => init,
                };
                if let Some(slot) = self.scope.last_mut() {
                    slot.1 = accumulator;
                }
                let result = self.expr(&c.result);
                self.scope.truncate(depth);
                result
            }
            Expr::Call(call) => self.call(expr.id, call),
            Expr::Unspecified => CelType::Dyn,
        }
    }

    /// `operand.field`: cel-go's field selection rules.
    fn select(&mut self, id: u64, operand: CelType, field: &str) -> CelType {
        match operand {
            CelType::Dyn => CelType::Dyn,
            CelType::Error => CelType::Error,
            CelType::Map(_, value) => *value,
            CelType::Object(object) => match object.field(field) {
                Some(t) => t,
                None => self.report(id, format!("undefined field '{field}'")),
            },
            CelType::Optional(inner) => match self.select(id, *inner, field) {
                CelType::Error => CelType::Error,
                t => CelType::Optional(Box::new(t)),
            },
            other if other.primitive() || matches!(other, CelType::List(_)) => {
                if printable(&other) {
                    self.report(
                        id,
                        format!("type '{other}' does not support field selection"),
                    )
                } else {
                    CelType::Error
                }
            }
            _ => CelType::Dyn,
        }
    }

    fn call(&mut self, id: u64, call: &CallExpr) -> CelType {
        let name = call.func_name.as_str();
        if name == "_?._" && call.args.len() == 2 {
            let operand = self.expr(&call.args[0]);
            let Expr::Literal(LiteralValue::String(field)) = &call.args[1].expr else {
                return CelType::Dyn;
            };
            return match self.select(id, operand, field.as_ref()) {
                CelType::Error => CelType::Error,
                CelType::Optional(inner) => CelType::Optional(inner),
                t => CelType::Optional(Box::new(t)),
            };
        }
        let target = call.target.as_ref().map(|t| self.expr(t));
        let args: Vec<CelType> = call.args.iter().map(|a| self.expr(a)).collect();
        if let Some(target) = target {
            return member_result(name, &target, &args);
        }
        match (name, args.as_slice()) {
            ("_&&_" | "_||_" | "!_" | "@in" | "@not_strictly_false", _) => CelType::Bool,
            ("_?_:_", [_, a, b]) => join(&[a.clone(), b.clone()]),
            ("_[_]", [container, _]) => index(container),
            ("_[?_]", [container, _]) => match index(container) {
                CelType::Error => CelType::Error,
                CelType::Optional(inner) => CelType::Optional(inner),
                t => CelType::Optional(Box::new(t)),
            },
            ("-_", [t]) => t.clone(),
            (
                "_+_" | "_-_" | "_*_" | "_/_" | "_%_" | "_<_" | "_<=_" | "_>_" | "_>=_" | "_==_"
                | "_!=_",
                [a, b],
            ) => match binary(name, a, b) {
                Some(t) => t,
                None => self.report(
                    id,
                    format!("found no matching overload for '{name}' applied to '({a}, {b})'"),
                ),
            },
            _ => global_result(name, &args),
        }
    }
}

/// Whether a type prints deterministically (the apiserver names object types after the time).
fn printable(t: &CelType) -> bool {
    match t {
        CelType::List(item) => printable(item),
        CelType::Map(key, value) => printable(key) && printable(value),
        t => t.primitive(),
    }
}

/// `net.IP`-style qualified names of library types and functions read as selections.
fn qualified_library_name(expr: &IdedExpr) -> bool {
    fn root(expr: &IdedExpr) -> Option<&str> {
        match &expr.expr {
            Expr::Ident(name) => Some(name),
            Expr::Select(select) if !select.test => root(&select.operand),
            _ => None,
        }
    }
    matches!(
        root(expr),
        Some("net" | "kubernetes" | "google" | "optional" | "math" | "strings" | "sets")
    )
}

fn index(container: &CelType) -> CelType {
    match container {
        CelType::List(item) => item.as_ref().clone(),
        CelType::Map(_, value) => value.as_ref().clone(),
        CelType::Optional(inner) => match index(inner) {
            CelType::Error => CelType::Error,
            t => CelType::Optional(Box::new(t)),
        },
        CelType::Error => CelType::Error,
        _ => CelType::Dyn,
    }
}

/// The common type of `types`: the type itself when all agree, else `dyn`.
fn join(types: &[CelType]) -> CelType {
    let mut known = types.iter().filter(|t| !t.is_dyn());
    let Some(first) = known.next() else {
        return CelType::Dyn;
    };
    if known.all(|t| t.same(first)) {
        first.clone()
    } else {
        CelType::Dyn
    }
}

/// The result of a binary operator on `a` and `b`, or `None` when cel-go has no overload for
/// them. Only primitive operands are judged; anything else is accepted as `dyn`.
fn binary(name: &str, a: &CelType, b: &CelType) -> Option<CelType> {
    use CelType as T;
    if !(a.primitive() || matches!(a, T::List(_))) || !(b.primitive() || matches!(b, T::List(_))) {
        return Some(match name {
            "_<_" | "_<=_" | "_>_" | "_>=_" | "_==_" | "_!=_" => T::Bool,
            _ if a.is_dyn() => b.clone(),
            _ => a.clone(),
        });
    }
    let same = a.same(b);
    match name {
        "_==_" | "_!=_" => {
            (same || (a.numeric() && b.numeric()) || matches!(a, T::Null) || matches!(b, T::Null))
                .then_some(T::Bool)
        }
        "_<_" | "_<=_" | "_>_" | "_>=_" => {
            let ordered = matches!(
                a,
                T::Int
                    | T::Uint
                    | T::Double
                    | T::String
                    | T::Bytes
                    | T::Bool
                    | T::Timestamp
                    | T::Duration
            );
            ((same && ordered) || (a.numeric() && b.numeric())).then_some(T::Bool)
        }
        "_+_" => match (a, b) {
            (T::List(x), T::List(y)) => Some(if x.is_dyn() {
                b.clone()
            } else if y.is_dyn() || x.same(y) {
                a.clone()
            } else {
                T::List(Box::new(T::Dyn))
            }),
            (T::Timestamp, T::Duration) | (T::Duration, T::Timestamp) => Some(T::Timestamp),
            _ if same
                && matches!(
                    a,
                    T::Int | T::Uint | T::Double | T::String | T::Bytes | T::Duration
                ) =>
            {
                Some(a.clone())
            }
            _ => None,
        },
        "_-_" => match (a, b) {
            (T::Timestamp, T::Timestamp) => Some(T::Duration),
            (T::Timestamp, T::Duration) => Some(T::Timestamp),
            _ if same && matches!(a, T::Int | T::Uint | T::Double | T::Duration) => Some(a.clone()),
            _ => None,
        },
        "_*_" | "_/_" => (same && a.numeric()).then(|| a.clone()),
        "_%_" => (same && matches!(a, T::Int | T::Uint)).then(|| a.clone()),
        _ => Some(T::Dyn),
    }
}

fn member_result(name: &str, target: &CelType, args: &[CelType]) -> CelType {
    use CelType as T;
    match name {
        "size" | "indexOf" | "lastIndexOf" | "getFullYear" | "getMonth" | "getDayOfYear"
        | "getDayOfMonth" | "getDate" | "getDayOfWeek" | "getHours" | "getMinutes"
        | "getSeconds" | "getMilliseconds" => T::Int,
        "contains" | "startsWith" | "endsWith" | "matches" | "hasValue" | "isSorted" => T::Bool,
        "lowerAscii" | "upperAscii" | "trim" | "replace" | "substring" | "charAt" | "join"
        | "format" => T::String,
        "split" => T::List(Box::new(T::String)),
        "value" => match target {
            T::Optional(inner) => inner.as_ref().clone(),
            _ => T::Dyn,
        },
        "orValue" => match (target, args) {
            (T::Optional(inner), [alternative]) => {
                join(&[inner.as_ref().clone(), alternative.clone()])
            }
            _ => T::Dyn,
        },
        "or" => match target {
            T::Optional(_) => target.clone(),
            _ => T::Dyn,
        },
        "reverse" | "distinct" | "sort" | "slice" => match target {
            T::List(_) => target.clone(),
            _ => T::Dyn,
        },
        _ => T::Dyn,
    }
}

fn global_result(name: &str, args: &[CelType]) -> CelType {
    use CelType as T;
    match name {
        "size" => T::Int,
        "int" => T::Int,
        "uint" => T::Uint,
        "double" => T::Double,
        "string" => T::String,
        "bytes" => T::Bytes,
        "bool" | "matches" => T::Bool,
        "duration" => T::Duration,
        "timestamp" => T::Timestamp,
        "type" => T::Type,
        "optional.of" | "optional.ofNonZeroValue" => match args {
            [t] => T::Optional(Box::new(t.clone())),
            _ => T::Dyn,
        },
        "optional.none" => T::Optional(Box::new(T::Dyn)),
        _ => T::Dyn,
    }
}
