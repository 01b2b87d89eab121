//! Static types of CEL expressions, as the apiserver's type checker infers them for
//! ValidatingAdmissionPolicy `status.typeChecking`: `object`, `oldObject` and `params` typed
//! from their schemas, `request` and `namespaceObject` from the apiserver's hand-written types.
//!
//! The checker reports what cel-go reports with certainty and stays silent elsewhere: a field
//! that the type of its operand does not have (`undefined field 'x'`), a selection on a value
//! that has no fields, and operators applied to primitive types that have no overload for
//! them. Anything it cannot type (unknown functions, two-variable comprehensions, `dyn`) is
//! `dyn`, which cel-go accepts everywhere.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use super::check::TYPE_NAMES;
use cel::common::ast::{
    CallExpr, ComprehensionExpr, EntryExpr, Expr, IdedExpr, LiteralValue, operators,
};

use super::macros::{PAIR, PAIRS};

/// The static type of a CEL value.
#[derive(Clone)]
pub enum CelType {
    /// Any value (`dyn`).
    Dyn,
    /// The result of an expression that already has an error; silences further errors.
    Error,
    /// The still-free item type of an empty list or map literal: takes any type.
    Free,
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

    /// The type's name as cel-go prints it (`kubernetes.UserInfo`, `Pod#.spec`: the apiserver
    /// numbers schema types per run, Portcullis writes `#`), if it has one.
    fn name(&self) -> Option<&str>;
}

/// The type of a mutation's struct literal (`Object{…}`, `Object.spec{…}`, `JSONPatch{…}`):
/// named, its fields not judged.
struct StructLiteral(String);

impl ObjectFields for StructLiteral {
    fn field(&self, _: &str) -> Option<CelType> {
        Some(CelType::Dyn)
    }

    fn name(&self) -> Option<&str> {
        Some(&self.0)
    }
}

/// The type a MutatingAdmissionPolicy's `applyConfiguration` must evaluate to (`Object`).
pub fn apply_configuration_type() -> CelType {
    CelType::Object(Arc::new(StructLiteral("Object".to_owned())))
}

/// The type a MutatingAdmissionPolicy's `jsonPatch` must evaluate to (`list(JSONPatch)`).
pub fn json_patch_list_type() -> CelType {
    CelType::List(Box::new(CelType::Object(Arc::new(StructLiteral(
        "JSONPatch".to_owned(),
    )))))
}

/// An object type with a fixed list of fields.
pub struct DeclaredObject {
    name: &'static str,
    fields: Vec<(String, CelType)>,
}

impl DeclaredObject {
    /// An object type named `name` with these fields.
    pub fn object_type(
        name: &'static str,
        fields: impl IntoIterator<Item = (impl Into<String>, CelType)>,
    ) -> CelType {
        CelType::Object(Arc::new(DeclaredObject {
            name,
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

    fn name(&self) -> Option<&str> {
        Some(self.name)
    }
}

impl fmt::Debug for CelType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// cel-go's `Type.String()` spelling, as the apiserver's `must evaluate to … but got …`
/// prints it.
impl fmt::Display for CelType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.write(f, false)
    }
}

/// A type as cel-go's checker names it in its error messages (`null`, `timestamp`).
struct CheckerName<'t>(&'t CelType);

impl fmt::Display for CheckerName<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.write(f, true)
    }
}

impl CelType {
    fn write(&self, f: &mut fmt::Formatter<'_>, checker: bool) -> fmt::Result {
        match self {
            CelType::Dyn | CelType::Error | CelType::Free => f.write_str("dyn"),
            CelType::Null if checker => f.write_str("null"),
            CelType::Null => f.write_str("null_type"),
            CelType::Bool => f.write_str("bool"),
            CelType::Int => f.write_str("int"),
            CelType::Uint => f.write_str("uint"),
            CelType::Double => f.write_str("double"),
            CelType::String => f.write_str("string"),
            CelType::Bytes => f.write_str("bytes"),
            CelType::Duration if checker => f.write_str("duration"),
            CelType::Duration => f.write_str("google.protobuf.Duration"),
            CelType::Timestamp if checker => f.write_str("timestamp"),
            CelType::Timestamp => f.write_str("google.protobuf.Timestamp"),
            CelType::List(item) => {
                f.write_str("list(")?;
                item.write(f, checker)?;
                f.write_str(")")
            }
            CelType::Map(key, value) => {
                f.write_str("map(")?;
                key.write(f, checker)?;
                f.write_str(", ")?;
                value.write(f, checker)?;
                f.write_str(")")
            }
            CelType::Object(object) => f.write_str(object.name().unwrap_or("object")),
            CelType::Optional(inner) => {
                f.write_str("optional_type(")?;
                inner.write(f, checker)?;
                f.write_str(")")
            }
            CelType::Type => f.write_str("type"),
            CelType::Opaque(name) => f.write_str(name),
        }
    }

    /// `dyn`, an error, or a free type: accepted wherever a type is expected.
    fn is_dyn(&self) -> bool {
        matches!(self, CelType::Dyn | CelType::Error | CelType::Free)
    }

    fn is_error(&self) -> bool {
        match self {
            CelType::Error => true,
            CelType::List(item) | CelType::Optional(item) => item.is_error(),
            CelType::Map(key, value) => key.is_error() || value.is_error(),
            _ => false,
        }
    }

    /// A scalar type.
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

    /// Whether the name cel-go gives the type is known here: upstream names object types
    /// after the time they were declared, so messages about them cannot be reproduced.
    fn printable(&self) -> bool {
        match self {
            CelType::Dyn | CelType::Opaque(_) => true,
            CelType::Object(object) => object.name().is_some(),
            CelType::List(item) | CelType::Optional(item) => item.printable(),
            CelType::Map(key, value) => key.printable() && value.printable(),
            t => t.primitive(),
        }
    }

    /// cel-go's assignability between two argument types of one overload parameter: `dyn`
    /// (and free types) on either side, `null` to nullable types, the same type structurally.
    fn assignable(&self, other: &CelType) -> bool {
        use CelType as T;
        match (self, other) {
            (a, b) if a.is_dyn() || b.is_dyn() => true,
            (T::Null, b) | (b, T::Null) => !matches!(
                b,
                T::Bool
                    | T::Int
                    | T::Uint
                    | T::Double
                    | T::String
                    | T::Bytes
                    | T::List(_)
                    | T::Map(..)
            ),
            (T::List(a), T::List(b)) | (T::Optional(a), T::Optional(b)) => a.assignable(b),
            (T::Map(ka, va), T::Map(kb, vb)) => ka.assignable(kb) && va.assignable(vb),
            (T::Object(a), T::Object(b)) => match (a.name(), b.name()) {
                (Some(a), Some(b)) => a == b,
                _ => true,
            },
            (T::Opaque(a), T::Opaque(b)) => a == b,
            (a, b) => std::mem::discriminant(a) == std::mem::discriminant(b),
        }
    }

    /// The exact sameness the checker asks of the items of a list or map literal
    /// (homogeneous aggregate literals): `dyn` matches only `dyn`; free types match anything.
    fn exactly(&self, other: &CelType) -> bool {
        use CelType as T;
        match (self, other) {
            (T::Free | T::Error, _) | (_, T::Free | T::Error) => true,
            (T::List(a), T::List(b)) | (T::Optional(a), T::Optional(b)) => a.exactly(b),
            (T::Map(ka, va), T::Map(kb, vb)) => ka.exactly(kb) && va.exactly(vb),
            (T::Object(a), T::Object(b)) => {
                Arc::ptr_eq(a, b) || a.name().is_some() && a.name() == b.name()
            }
            (T::Opaque(a), T::Opaque(b)) => a == b,
            (a, b) => std::mem::discriminant(a) == std::mem::discriminant(b),
        }
    }

    /// The more general of two assignable types (`dyn` wins; a free type yields).
    fn most_general(&self, other: &CelType) -> CelType {
        use CelType as T;
        match (self, other) {
            (T::Dyn, _) | (_, T::Dyn) => T::Dyn,
            (T::Error, _) | (_, T::Error) => T::Error,
            (T::Free, t) | (t, T::Free) => t.clone(),
            (T::Null, t) | (t, T::Null) => t.clone(),
            (T::List(a), T::List(b)) => T::List(Box::new(a.most_general(b))),
            (T::Optional(a), T::Optional(b)) => T::Optional(Box::new(a.most_general(b))),
            (T::Map(ka, va), T::Map(kb, vb)) => {
                T::Map(Box::new(ka.most_general(kb)), Box::new(va.most_general(vb)))
            }
            (a, _) => a.clone(),
        }
    }

    /// Whether the type is exactly `expected` (the apiserver's `IsExactType` check of an
    /// expression's output type).
    pub fn is_exactly(&self, expected: &CelType) -> bool {
        match (self, expected) {
            (CelType::Dyn, CelType::Dyn) => true,
            (t, _) if t.is_dyn() => false,
            (t, expected) => t.exactly(expected),
        }
    }

    /// Whether the type has an error inside (the checker reported it).
    pub fn has_error(&self) -> bool {
        self.is_error()
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

// ---- The apiserver's hand-written types ----

fn strings() -> CelType {
    CelType::List(Box::new(CelType::String))
}

fn string_map(values: CelType) -> CelType {
    CelType::Map(Box::new(CelType::String), Box::new(values))
}

/// `request`: `kubernetes.AdmissionRequest`.
pub fn admission_request_type() -> CelType {
    let gvk = || {
        DeclaredObject::object_type(
            "kubernetes.GroupVersionKind",
            [
                ("group", CelType::String),
                ("version", CelType::String),
                ("kind", CelType::String),
            ],
        )
    };
    let gvr = || {
        DeclaredObject::object_type(
            "kubernetes.GroupVersionResource",
            [
                ("group", CelType::String),
                ("version", CelType::String),
                ("resource", CelType::String),
            ],
        )
    };
    let user_info = DeclaredObject::object_type(
        "kubernetes.UserInfo",
        [
            ("username", CelType::String),
            ("uid", CelType::String),
            ("groups", strings()),
            ("extra", string_map(strings())),
        ],
    );
    DeclaredObject::object_type(
        "kubernetes.AdmissionRequest",
        [
            ("kind", gvk()),
            ("resource", gvr()),
            ("subResource", CelType::String),
            ("requestKind", gvk()),
            ("requestResource", gvr()),
            ("requestSubResource", CelType::String),
            ("name", CelType::String),
            ("namespace", CelType::String),
            ("operation", CelType::String),
            ("userInfo", user_info),
            ("dryRun", CelType::Bool),
            ("options", CelType::Dyn),
        ],
    )
}

/// `namespaceObject`: `kubernetes.Namespace`, the fields upstream exposes.
pub fn namespace_object_type() -> CelType {
    let condition = DeclaredObject::object_type(
        "kubernetes.NamespaceCondition",
        [
            ("status", CelType::String),
            ("type", CelType::String),
            ("lastTransitionTime", CelType::Timestamp),
            ("message", CelType::String),
            ("reason", CelType::String),
        ],
    );
    let metadata = DeclaredObject::object_type(
        "kubernetes.NamespaceMetadata",
        [
            ("name", CelType::String),
            ("generateName", CelType::String),
            ("namespace", CelType::String),
            ("labels", string_map(CelType::String)),
            ("annotations", string_map(CelType::String)),
            ("UID", CelType::String),
            ("creationTimestamp", CelType::Timestamp),
            ("deletionGracePeriodSeconds", CelType::Int),
            ("deletionTimestamp", CelType::Timestamp),
            ("generation", CelType::Int),
            ("resourceVersion", CelType::String),
            ("finalizers", strings()),
        ],
    );
    DeclaredObject::object_type(
        "kubernetes.Namespace",
        [
            ("metadata", metadata),
            (
                "spec",
                DeclaredObject::object_type(
                    "kubernetes.NamespaceSpec",
                    [("finalizers", strings())],
                ),
            ),
            (
                "status",
                DeclaredObject::object_type(
                    "kubernetes.NamespaceStatus",
                    [
                        ("conditions", CelType::List(Box::new(condition))),
                        ("phase", CelType::String),
                    ],
                ),
            ),
        ],
    )
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
pub(super) fn infer(
    expr: &IdedExpr,
    declared: &[(&str, CelType)],
    undeclared: &[&str],
) -> (CelType, Vec<TypeIssue>) {
    let mut checker = Checker {
        declared,
        undeclared,
        scope: Vec::new(),
        issues: Vec::new(),
        literal_issues: Vec::new(),
        in_format: 0,
        format_types: HashMap::new(),
        pairs: Vec::new(),
    };
    let output = checker.expr(expr);
    // cel-go validates literals after checking, only when checking found nothing.
    let issues = if checker.issues.is_empty() {
        checker.literal_issues
    } else {
        checker.issues
    };
    (output, issues)
}

struct Checker<'d> {
    declared: &'d [(&'d str, CelType)],
    /// Variables of the environment that this expression's field does not have (`params`
    /// without `paramKind`, `variables` without `spec.variables` or in match conditions).
    undeclared: &'d [&'d str],
    scope: Vec<(String, CelType)>,
    issues: Vec<TypeIssue>,
    /// Items of list and map literals unlike the first (cel-go's homogeneous aggregate
    /// literal validator).
    literal_issues: Vec<TypeIssue>,
    /// How many `format(…)` calls the walk is inside: their literals are exempt.
    in_format: usize,
    /// The type of each node inside a `format(…)` call, for the format string's validator.
    format_types: HashMap<u64, CelType>,
    /// The types of the two variables of each two-variable comprehension the walk is in
    /// (innermost last): what `@it[0]` and `@it[1]` of its expansion hold.
    pairs: Vec<(CelType, CelType)>,
}

/// Namespaces of library functions called as `ns.fn(…)`.
const FUNCTION_NAMESPACES: &[&str] = &[
    "sets",
    "strings",
    "lists",
    "base64",
    "optional",
    "math",
    "cel",
    "jsonpatch",
    "format",
];

fn no_overload(name: &str, args: &[&CelType]) -> String {
    let args: Vec<String> = args.iter().map(|t| CheckerName(t).to_string()).collect();
    format!(
        "found no matching overload for '{name}' applied to '({})'",
        args.join(", ")
    )
}

fn no_member_overload(name: &str, target: &CelType, args: &[CelType]) -> String {
    let args: Vec<String> = args.iter().map(|t| CheckerName(t).to_string()).collect();
    format!(
        "found no matching overload for '{name}' applied to '{}.({})'",
        CheckerName(target),
        args.join(", ")
    )
}

impl Checker<'_> {
    fn report(&mut self, id: u64, message: String) -> CelType {
        self.issues.push(TypeIssue { id, message });
        CelType::Error
    }

    /// Reports an overload error when every type involved can be named; an error type among
    /// them means the cause was reported already.
    fn overload_error(&mut self, id: u64, types: &[&CelType], message: String) -> CelType {
        if types.iter().all(|t| t.printable() && !t.is_error()) {
            self.report(id, message)
        } else {
            CelType::Error
        }
    }

    /// The type an optional entry (`[?x]`, `{?k: x}`) adds: what its optional holds; an entry
    /// that is not optional is reported as cel-go's checker reports it, and counts as itself.
    fn optional_entry(&mut self, id: u64, found: CelType) -> CelType {
        match found {
            CelType::Optional(inner) => *inner,
            t if t.is_dyn() => t,
            t if t.printable() && !t.is_error() => {
                let message = format!(
                    "expected type '{}' but found '{}'",
                    CheckerName(&CelType::Optional(Box::new(t.clone()))),
                    CheckerName(&t)
                );
                self.report(id, message);
                t
            }
            _ => CelType::Dyn,
        }
    }

    /// Reports a comprehension range that is neither a list, a map nor `dyn`.
    fn check_range(&mut self, id: u64, range: &CelType) {
        if !matches!(range, CelType::List(_) | CelType::Map(..))
            && !range.is_dyn()
            && range.printable()
        {
            self.report(
                id,
                format!(
                    "expression of type '{}' cannot be range of a comprehension (must be list, \
                     map, or dynamic)",
                    CheckerName(range)
                ),
            );
        }
    }

    /// Checks a comprehension's initial value, condition, step and result with its variables
    /// in scope, typed `first` and `second`; its type is the result's.
    fn fold(&mut self, c: &ComprehensionExpr, first: CelType, second: CelType) -> CelType {
        let init = self.expr(&c.accu_init);
        let depth = self.scope.len();
        self.scope.push((c.iter_var.clone(), first));
        if let Some(second_name) = &c.iter_var2 {
            self.scope.push((second_name.clone(), second));
        }
        self.scope.push((c.accu_var.clone(), init.clone()));
        self.expr(&c.loop_cond);
        let step = self.expr(&c.loop_step);
        let accumulator = if step.assignable(&init) {
            init.most_general(&step)
        } else {
            CelType::Dyn
        };
        if let Some(slot) = self.scope.last_mut() {
            slot.1 = accumulator;
        }
        let result = self.expr(&c.result);
        self.scope.truncate(depth);
        result
    }

    /// A field of a `JSONPatch{…}` literal against the type's fields (`op`, `path` and `from`
    /// strings, `value` anything), reported as cel-go reports a field of a declared type.
    fn json_patch_field(&mut self, id: u64, field: &str, provided: &CelType) {
        let expected = match field {
            "op" | "path" | "from" => Some(CelType::String),
            "value" => return,
            _ => None,
        };
        let fits = expected
            .as_ref()
            .is_some_and(|expected| provided.assignable(expected));
        if fits || !provided.printable() || provided.is_error() {
            return;
        }
        let expected = expected
            .map(|t| CheckerName(&t).to_string())
            .unwrap_or_default();
        self.report(
            id,
            format!(
                "expected type of field '{field}' is '{expected}' but provided type is '{}'",
                CheckerName(provided)
            ),
        );
    }

    fn in_scope(&self, name: &str) -> bool {
        self.scope.iter().any(|(n, _)| n == name) || self.declared.iter().any(|(n, _)| *n == name)
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
        let found = self.expr_type(expr);
        if self.in_format > 0 {
            self.format_types.insert(expr.id, found.clone());
        }
        found
    }

    fn expr_type(&mut self, expr: &IdedExpr) -> CelType {
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
            Expr::Ident(name)
                if self.undeclared.contains(&name.as_str())
                    && !self.scope.iter().any(|(n, _)| n == name) =>
            {
                self.report(
                    expr.id,
                    format!("undeclared reference to '{name}' (in container '')"),
                )
            }
            Expr::Ident(name) => self.lookup(name),
            Expr::Select(select) => {
                if self.qualified_library_name(expr) {
                    return CelType::Dyn;
                }
                let operand = self.expr(&select.operand);
                let field = self.select(expr.id, operand, &select.field);
                if select.test && !field.is_error() {
                    CelType::Bool
                } else {
                    field
                }
            }
            Expr::List(list) => {
                let mut items = CelType::Free;
                let mut first: Option<CelType> = None;
                let mut mismatch = false;
                for (i, element) in list.elements.iter().enumerate() {
                    let mut t = self.expr(element);
                    if list.optional_indices.contains(&i) {
                        t = self.optional_entry(element.id, t);
                    }
                    match &first {
                        None => first = Some(t.clone()),
                        Some(first) if !mismatch => {
                            mismatch = self.literal_item(element.id, first, &t);
                        }
                        Some(_) => {}
                    }
                    items = join(&items, &t);
                }
                CelType::List(Box::new(items))
            }
            Expr::Map(map) => {
                let mut keys = CelType::Free;
                let mut values = CelType::Free;
                let mut first: Option<(CelType, CelType)> = None;
                for entry in &map.entries {
                    match &entry.expr {
                        EntryExpr::MapEntry(e) => {
                            let key = self.expr(&e.key);
                            let mut value = self.expr(&e.value);
                            if e.optional {
                                value = self.optional_entry(e.value.id, value);
                            }
                            match &first {
                                None => first = Some((key.clone(), value.clone())),
                                Some((first_key, first_value)) => {
                                    let (first_key, first_value) =
                                        (first_key.clone(), first_value.clone());
                                    self.literal_item(e.key.id, &first_key, &key);
                                    self.literal_item(e.value.id, &first_value, &value);
                                }
                            }
                            keys = join(&keys, &key);
                            values = join(&values, &value);
                        }
                        EntryExpr::StructField(f) => {
                            self.expr(&f.value);
                        }
                    }
                }
                CelType::Map(Box::new(keys), Box::new(values))
            }
            Expr::Struct(s) => {
                for entry in &s.entries {
                    match &entry.expr {
                        EntryExpr::MapEntry(e) => {
                            self.expr(&e.value);
                        }
                        EntryExpr::StructField(f) => {
                            let provided = self.expr(&f.value);
                            if s.type_name == "JSONPatch" {
                                self.json_patch_field(entry.id, &f.field, &provided);
                            }
                        }
                    }
                }
                CelType::Object(Arc::new(StructLiteral(s.type_name.clone())))
            }
            Expr::Comprehension(c) => {
                // A two-variable comprehension, expanded over `@pairs(range)` (macros.rs): its
                // variables are typed from the range, as cel-go types them.
                if c.iter_var == PAIR
                    && let Expr::Call(pairs) = &c.iter_range.expr
                    && pairs.func_name == PAIRS
                    && let [range] = pairs.args.as_slice()
                {
                    let found = self.expr(range);
                    self.check_range(range.id, &found);
                    let types = match found {
                        CelType::List(item) => (CelType::Int, *item),
                        CelType::Map(key, value) => (*key, *value),
                        _ => (CelType::Dyn, CelType::Dyn),
                    };
                    self.pairs.push(types);
                    let result = self.fold(c, CelType::Dyn, CelType::Dyn);
                    self.pairs.pop();
                    return result;
                }
                let range = self.expr(&c.iter_range);
                self.check_range(c.iter_range.id, &range);
                let (first, second) = match (&range, c.iter_var2.is_some()) {
                    (CelType::List(item), false) => (item.as_ref().clone(), CelType::Dyn),
                    (CelType::List(item), true) => (CelType::Int, item.as_ref().clone()),
                    (CelType::Map(key, _), false) => (key.as_ref().clone(), CelType::Dyn),
                    (CelType::Map(key, value), true) => {
                        (key.as_ref().clone(), value.as_ref().clone())
                    }
                    _ => (CelType::Dyn, CelType::Dyn),
                };
                self.fold(c, first, second)
            }
            Expr::Call(call) => self.call(expr.id, call),

            Expr::Unspecified => CelType::Dyn,
        }
    }

    /// Records an item of a literal that is not exactly like the first (outside `format`
    /// arguments); whether it was unlike.
    fn literal_item(&mut self, id: u64, first: &CelType, current: &CelType) -> bool {
        if first.exactly(current) {
            return false;
        }
        if self.in_format == 0 && first.printable() && current.printable() {
            self.literal_issues.push(TypeIssue {
                id,
                message: format!(
                    "expected type '{}' but found '{}'",
                    CheckerName(first),
                    CheckerName(current)
                ),
            });
        }
        true
    }

    /// `net.IP`-style qualified names of library types read as selections.
    fn qualified_library_name(&self, expr: &IdedExpr) -> bool {
        fn root(expr: &IdedExpr) -> Option<&str> {
            match &expr.expr {
                Expr::Ident(name) => Some(name),
                Expr::Select(select) if !select.test => root(&select.operand),
                _ => None,
            }
        }
        root(expr).is_some_and(|name| {
            !self.in_scope(name) && matches!(name, "net" | "kubernetes" | "google")
        })
    }

    /// `operand.field`: cel-go's field selection rules.
    fn select(&mut self, id: u64, operand: CelType, field: &str) -> CelType {
        match operand {
            CelType::Dyn | CelType::Free => CelType::Dyn,
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
            // The authorizer's one field; library objects are not judged further.
            CelType::Opaque("kubernetes.authorization.Authorizer")
                if field == "requestResource" =>
            {
                RESOURCE_CHECK
            }
            CelType::Opaque(_) => CelType::Dyn,
            other if other.printable() => self.report(
                id,
                format!(
                    "type '{}' does not support field selection",
                    CheckerName(&other)
                ),
            ),
            _ => CelType::Dyn,
        }
    }

    fn call(&mut self, id: u64, call: &CallExpr) -> CelType {
        let name = call.func_name.as_str();
        if name == operators::INDEX
            && let [container, position] = call.args.as_slice()
            && let (Expr::Ident(pair), Expr::Literal(LiteralValue::Int(index))) =
                (&container.expr, &position.expr)
            && pair == PAIR
            && let Some((first, second)) = self.pairs.last()
        {
            match i64::from(*index) {
                0 => return first.clone(),
                1 => return second.clone(),
                _ => {}
            }
        }
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
        if matches!(name, "_&&_" | "_||_") {
            for arg in &call.args {
                let t = self.expr(arg);
                if !t.assignable(&CelType::Bool) && t.printable() {
                    self.report(
                        arg.id,
                        format!("expected type 'bool' but found '{}'", CheckerName(&t)),
                    );
                }
            }
            return CelType::Bool;
        }
        // `sets.contains(a, b)`: a namespaced global function, unless `sets` is in scope.
        if let Some(target) = &call.target
            && let Expr::Ident(namespace) = &target.expr
            && FUNCTION_NAMESPACES.contains(&namespace.as_str())
            && !self.in_scope(namespace)
        {
            if self.undeclared.contains(&namespace.as_str()) {
                self.report(
                    target.id,
                    format!("undeclared reference to '{namespace}' (in container '')"),
                );
                for argument in &call.args {
                    self.expr(argument);
                }
                return self.report(
                    id,
                    format!("undeclared reference to '{name}' (in container '')"),
                );
            }
            let args: Vec<CelType> = call.args.iter().map(|a| self.expr(a)).collect();
            return self.global(id, &format!("{namespace}.{name}"), &args);
        }
        let format = name == "format";
        self.in_format += usize::from(format);
        let target = call.target.as_ref().map(|t| self.expr(t));
        let args: Vec<CelType> = call.args.iter().map(|a| self.expr(a)).collect();
        self.in_format -= usize::from(format);
        if format && let Some(issue) = format_call_issue(id, call, &self.format_types) {
            self.literal_issues.push(issue);
        }
        match target {
            Some(target) => self.member(id, name, &target, &args),
            None => self.global(id, name, &args),
        }
    }

    fn global(&mut self, id: u64, name: &str, args: &[CelType]) -> CelType {
        use CelType as T;
        let refs: Vec<&CelType> = args.iter().collect();
        match (name, args) {
            ("!_", [t]) => {
                if t.assignable(&T::Bool) {
                    T::Bool
                } else {
                    self.overload_error(id, &refs, no_overload(name, &refs))
                }
            }
            ("-_", [t]) => {
                if t.is_dyn() || matches!(t, T::Int | T::Double) {
                    t.clone()
                } else {
                    self.overload_error(id, &refs, no_overload(name, &refs))
                }
            }
            ("@not_strictly_false", _) => T::Bool,
            ("_?_:_", [condition, a, b]) => {
                if condition.assignable(&T::Bool) && a.assignable(b) {
                    a.most_general(b)
                } else {
                    self.overload_error(id, &refs, no_overload(name, &refs))
                }
            }
            ("@in", [element, container]) => {
                let ok = match container {
                    T::List(item) => element.assignable(item),
                    T::Map(key, _) => element.assignable(key),
                    t => !t.printable() || t.is_dyn(),
                };
                if ok {
                    T::Bool
                } else {
                    self.overload_error(id, &refs, no_overload(name, &refs))
                }
            }
            ("_[_]" | "_[?_]", [container, index]) => {
                let item = match container {
                    T::List(item) if index.assignable(&T::Int) => Some(item.as_ref().clone()),
                    T::Map(key, value) if index.assignable(key) => Some(value.as_ref().clone()),
                    T::Optional(_) | T::Object(_) | T::Opaque(_) | T::Type => Some(T::Dyn),
                    t if t.is_dyn() => Some(T::Dyn),
                    _ => None,
                };
                match item {
                    Some(item) if name == "_[?_]" => match item {
                        T::Error => T::Error,
                        T::Optional(inner) => T::Optional(inner),
                        t => T::Optional(Box::new(t)),
                    },
                    Some(item) => item,
                    None => self.overload_error(id, &refs, no_overload(name, &refs)),
                }
            }
            (
                "_+_" | "_-_" | "_*_" | "_/_" | "_%_" | "_<_" | "_<=_" | "_>_" | "_>=_" | "_==_"
                | "_!=_",
                [a, b],
            ) => match binary(name, a, b) {
                Some(t) => t,
                None => self.overload_error(id, &refs, no_overload(name, &refs)),
            },
            ("size", [t]) => {
                if t.is_dyn() || matches!(t, T::String | T::Bytes | T::List(_) | T::Map(..)) {
                    T::Int
                } else {
                    self.overload_error(id, &refs, no_overload(name, &refs))
                }
            }
            ("sets.contains" | "sets.equivalent" | "sets.intersects", [a, b]) => {
                let ok = match (a, b) {
                    (T::List(x), T::List(y)) => x.assignable(y),
                    (x, y) => x.is_dyn() || y.is_dyn() || !x.printable() || !y.printable(),
                };
                if ok {
                    T::Bool
                } else {
                    self.overload_error(id, &refs, no_overload(name, &refs))
                }
            }
            ("int", _) => T::Int,
            ("uint", _) => T::Uint,
            ("double", _) => T::Double,
            ("string", _) => T::String,
            ("bytes", _) => T::Bytes,
            ("bool" | "matches", _) => T::Bool,
            ("duration", _) => T::Duration,
            ("timestamp", _) => T::Timestamp,
            ("type", _) => T::Type,
            ("optional.of" | "optional.ofNonZeroValue", [t]) => T::Optional(Box::new(t.clone())),
            ("optional.none", []) => T::Optional(Box::new(T::Dyn)),
            (
                "quantity" | "url" | "ip" | "cidr" | "semver" | "isQuantity" | "isURL" | "isIP"
                | "isCIDR" | "isSemver" | "ip.isCanonical",
                [arg, ..],
            ) if arg.printable() && !arg.is_dyn() && !matches!(arg, T::String) => {
                self.overload_error(id, &refs, no_overload(name, &refs))
            }
            ("format.named", [_]) => T::Optional(Box::new(T::Opaque("kubernetes.NamedFormat"))),
            (format, []) if format.starts_with("format.") => T::Opaque("kubernetes.NamedFormat"),
            ("quantity", _) => T::Opaque("kubernetes.Quantity"),
            ("url", _) => T::Opaque("kubernetes.URL"),
            ("ip", _) => T::Opaque("net.IP"),
            ("cidr", _) => T::Opaque("net.CIDR"),
            ("semver", _) => T::Opaque("kubernetes.Semver"),
            ("isQuantity" | "isURL" | "isIP" | "isCIDR" | "isSemver" | "ip.isCanonical", _) => {
                T::Bool
            }
            ("base64.encode" | "strings.quote", _) => T::String,
            ("base64.decode", _) => T::Bytes,
            _ => T::Dyn,
        }
    }

    fn member(&mut self, id: u64, name: &str, target: &CelType, args: &[CelType]) -> CelType {
        use CelType as T;
        let Some(result) =
            library_member(name, target, args).or_else(|| member_result(name, target, args))
        else {
            return T::Dyn;
        };
        match result {
            Ok(t) => t,
            Err(()) => {
                let mut types = vec![target];
                types.extend(args.iter());
                self.overload_error(id, &types, no_member_overload(name, target, args))
            }
        }
    }
}

/// cel-go's `joinTypes` for the items of a literal: the more general of assignable types, else
/// `dyn`.
fn join(previous: &CelType, current: &CelType) -> CelType {
    if previous.assignable(current) {
        previous.most_general(current)
    } else {
        CelType::Dyn
    }
}

/// The result of a binary operator on `a` and `b`, or `None` when cel-go has no overload for
/// them.
fn binary(name: &str, a: &CelType, b: &CelType) -> Option<CelType> {
    use CelType as T;
    let comparison = matches!(name, "_<_" | "_<=_" | "_>_" | "_>=_");
    if a.is_dyn() || b.is_dyn() {
        return Some(match name {
            "_==_" | "_!=_" => T::Bool,
            _ if comparison => T::Bool,
            _ if a.is_dyn() && b.is_dyn() => T::Dyn,
            "_-_" if matches!((a, b), (T::Timestamp, _) | (_, T::Timestamp)) => T::Dyn,
            _ if a.is_dyn() => b.clone(),
            _ => a.clone(),
        });
    }
    if let ("_+_", T::List(x), T::List(y)) = (name, a, b)
        && x.assignable(y)
    {
        return Some(T::List(Box::new(x.most_general(y))));
    }
    if !a.printable() || !b.printable() {
        return Some(if comparison || name == "_==_" || name == "_!=_" {
            T::Bool
        } else {
            T::Dyn
        });
    }
    let same = std::mem::discriminant(a) == std::mem::discriminant(b);
    match name {
        "_==_" | "_!=_" => a.assignable(b).then_some(T::Bool),
        _ if comparison => {
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
            (T::List(x), T::List(y)) => x
                .assignable(y)
                .then(|| T::List(Box::new(x.most_general(y)))),
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

const QUANTITY: CelType = CelType::Opaque("kubernetes.Quantity");
const SEMVER: CelType = CelType::Opaque("kubernetes.Semver");
const IP: CelType = CelType::Opaque("net.IP");
const CIDR: CelType = CelType::Opaque("net.CIDR");
const AUTHORIZER: CelType = CelType::Opaque("kubernetes.authorization.Authorizer");
const GROUP_CHECK: CelType = CelType::Opaque("kubernetes.authorization.GroupCheck");
const RESOURCE_CHECK: CelType = CelType::Opaque("kubernetes.authorization.ResourceCheck");
const PATH_CHECK: CelType = CelType::Opaque("kubernetes.authorization.PathCheck");
const DECISION: CelType = CelType::Opaque("kubernetes.authorization.Decision");

/// The member functions of the Kubernetes libraries' own types (quantity, semver, IP, CIDR,
/// URL, named formats, the authorizer), each `(name, receiver, arguments, result)`.
fn library_signatures() -> Vec<(&'static str, CelType, Vec<CelType>, CelType)> {
    use CelType as T;
    let url = T::Opaque("kubernetes.URL");
    let format = T::Opaque("kubernetes.NamedFormat");
    let mut table = Vec::new();
    for (receiver, other) in [(QUANTITY, QUANTITY), (SEMVER, SEMVER)] {
        table.push(("compareTo", receiver.clone(), vec![other.clone()], T::Int));
        table.push((
            "isGreaterThan",
            receiver.clone(),
            vec![other.clone()],
            T::Bool,
        ));
        table.push(("isLessThan", receiver, vec![other], T::Bool));
    }
    for name in ["add", "sub"] {
        table.push((name, QUANTITY, vec![QUANTITY], QUANTITY));
        table.push((name, QUANTITY, vec![T::Int], QUANTITY));
    }
    table.push(("isInteger", QUANTITY, vec![], T::Bool));
    table.push(("asInteger", QUANTITY, vec![], T::Int));
    table.push(("asApproximateFloat", QUANTITY, vec![], T::Double));
    for name in ["major", "minor", "patch"] {
        table.push((name, SEMVER, vec![], T::Int));
    }
    table.push(("family", IP, vec![], T::Int));
    for name in [
        "isUnspecified",
        "isLoopback",
        "isLinkLocalMulticast",
        "isLinkLocalUnicast",
        "isGlobalUnicast",
    ] {
        table.push((name, IP, vec![], T::Bool));
    }
    table.push(("containsIP", CIDR, vec![T::String], T::Bool));
    table.push(("containsIP", CIDR, vec![IP], T::Bool));
    table.push(("containsCIDR", CIDR, vec![T::String], T::Bool));
    table.push(("containsCIDR", CIDR, vec![CIDR], T::Bool));
    table.push(("ip", CIDR, vec![], IP));
    table.push(("masked", CIDR, vec![], CIDR));
    table.push(("prefixLength", CIDR, vec![], T::Int));
    for name in [
        "getScheme",
        "getHost",
        "getHostname",
        "getPort",
        "getEscapedPath",
    ] {
        table.push((name, url.clone(), vec![], T::String));
    }
    table.push((
        "getQuery",
        url,
        vec![],
        T::Map(Box::new(T::String), Box::new(T::List(Box::new(T::String)))),
    ));
    table.push((
        "validate",
        format,
        vec![T::String],
        T::Optional(Box::new(T::List(Box::new(T::String)))),
    ));
    table.push(("path", AUTHORIZER, vec![T::String], PATH_CHECK));
    table.push(("group", AUTHORIZER, vec![T::String], GROUP_CHECK));
    table.push((
        "serviceAccount",
        AUTHORIZER,
        vec![T::String, T::String],
        AUTHORIZER,
    ));
    table.push(("resource", GROUP_CHECK, vec![T::String], RESOURCE_CHECK));
    for name in [
        "subresource",
        "namespace",
        "name",
        "fieldSelector",
        "labelSelector",
    ] {
        table.push((name, RESOURCE_CHECK, vec![T::String], RESOURCE_CHECK));
    }
    table.push(("check", PATH_CHECK, vec![T::String], DECISION));
    table.push(("check", RESOURCE_CHECK, vec![T::String], DECISION));
    table.push(("errored", DECISION, vec![], T::Bool));
    table.push(("allowed", DECISION, vec![], T::Bool));
    table.push(("error", DECISION, vec![], T::String));
    table.push(("reason", DECISION, vec![], T::String));
    table
}

/// A member call on a Kubernetes library type: its result, or `Err` when no signature of
/// that name takes these arguments; `None` for other receivers.
fn library_member(name: &str, target: &CelType, args: &[CelType]) -> Option<Result<CelType, ()>> {
    let CelType::Opaque(receiver) = target else {
        return None;
    };
    let table = library_signatures();
    let mut known = false;
    for (function, on, parameters, result) in &table {
        if *function != name || !matches!(on, CelType::Opaque(r) if r == receiver) {
            continue;
        }
        known = true;
        if parameters.len() == args.len()
            && parameters.iter().zip(args).all(|(p, a)| a.assignable(p))
        {
            return Some(Ok(result.clone()));
        }
    }
    let named_elsewhere = table.iter().any(|(function, ..)| *function == name);
    if known || named_elsewhere || name == "sign" {
        // `sign` is a global function of quantities (`sign(q)`), not a member.
        Some(if args.iter().all(CelType::printable) {
            Err(())
        } else {
            Ok(CelType::Dyn)
        })
    } else {
        None
    }
}

/// A member function's result: `None` for a function not judged here (its result is `dyn`),
/// `Some(Err(()))` when cel-go has no overload for these receiver and argument types.
fn member_result(name: &str, target: &CelType, args: &[CelType]) -> Option<Result<CelType, ()>> {
    use CelType as T;
    let judged = !target.is_dyn() && target.printable() && args.iter().all(CelType::printable);
    let is = |t: &CelType, expected: &CelType| t.assignable(expected);
    let string_args = |types: &[&[CelType]]| {
        types.iter().any(|signature| {
            signature.len() == args.len() && signature.iter().zip(args).all(|(e, a)| is(a, e))
        })
    };
    let on_string = |result: CelType, signatures: &[&[CelType]]| {
        if !judged {
            return Ok(result);
        }
        if matches!(target, T::String) && string_args(signatures) {
            Ok(result)
        } else {
            Err(())
        }
    };
    Some(match name {
        "contains" | "startsWith" | "endsWith" | "matches" => on_string(T::Bool, &[&[T::String]]),
        "lowerAscii" | "upperAscii" | "trim" => on_string(T::String, &[&[]]),
        "format" => on_string(T::String, &[&[T::List(Box::new(T::Dyn))]]),
        "charAt" => on_string(T::String, &[&[T::Int]]),
        "replace" => on_string(
            T::String,
            &[&[T::String, T::String], &[T::String, T::String, T::Int]],
        ),
        "split" => on_string(
            T::List(Box::new(T::String)),
            &[&[T::String], &[T::String, T::Int]],
        ),
        "substring" => on_string(T::String, &[&[T::Int], &[T::Int, T::Int]]),
        "indexOf" | "lastIndexOf" => match target {
            T::List(item) if judged => match args {
                [a] if is(a, item) => Ok(T::Int),
                _ => Err(()),
            },
            _ => on_string(T::Int, &[&[T::String], &[T::String, T::Int]]),
        },
        "join" => {
            if !judged {
                Ok(T::String)
            } else {
                match (target, args) {
                    (T::List(item), []) | (T::List(item), [T::String]) if is(item, &T::String) => {
                        Ok(T::String)
                    }
                    _ => Err(()),
                }
            }
        }
        "size" => {
            if !judged || matches!(target, T::String | T::Bytes | T::List(_) | T::Map(..)) {
                Ok(T::Int)
            } else {
                Err(())
            }
        }
        "orValue" => match (target, args) {
            (T::Optional(inner), [alternative]) => {
                if inner.assignable(alternative) {
                    Ok(inner.most_general(alternative))
                } else if judged {
                    Err(())
                } else {
                    Ok(T::Dyn)
                }
            }
            _ => Ok(T::Dyn),
        },
        "value" => Ok(match target {
            T::Optional(inner) => inner.as_ref().clone(),
            _ => T::Dyn,
        }),
        "hasValue" => Ok(T::Bool),
        "or" => Ok(match target {
            T::Optional(_) => target.clone(),
            _ => T::Dyn,
        }),
        "getFullYear" | "getMonth" | "getDayOfYear" | "getDayOfMonth" | "getDate"
        | "getDayOfWeek" | "getHours" | "getMinutes" | "getSeconds" | "getMilliseconds" => {
            Ok(T::Int)
        }
        "sum" | "min" | "max" => match target {
            T::List(item) if judged && !item.is_dyn() => {
                let ok = if name == "sum" {
                    matches!(**item, T::Int | T::Uint | T::Double | T::Duration)
                } else {
                    matches!(
                        **item,
                        T::Int
                            | T::Uint
                            | T::Double
                            | T::String
                            | T::Bytes
                            | T::Bool
                            | T::Timestamp
                            | T::Duration
                    )
                };
                if ok {
                    Ok(item.as_ref().clone())
                } else {
                    Err(())
                }
            }
            T::List(item) => Ok(item.as_ref().clone()),
            _ => Ok(T::Dyn),
        },
        "reverse" if judged && matches!(target, T::String) => Err(()),
        // The Kubernetes libraries: every overload of these names has this result type.
        "compareTo" | "sign" | "asInteger" | "family" | "prefixLength" | "major" | "minor"
        | "patch" => Ok(T::Int),
        "isGreaterThan"
        | "isLessThan"
        | "isInteger"
        | "isCanonical"
        | "isUnspecified"
        | "isLoopback"
        | "isLinkLocalMulticast"
        | "isLinkLocalUnicast"
        | "isGlobalUnicast"
        | "containsIP"
        | "containsCIDR"
        | "allowed"
        | "errored"
        | "isSorted" => Ok(T::Bool),
        "asApproximateFloat" => Ok(T::Double),
        "getScheme" | "getHost" | "getHostname" | "getPort" | "getEscapedPath" | "reason"
        | "error" => Ok(T::String),
        "find" => on_string(T::String, &[&[T::String]]),
        "findAll" => on_string(
            T::List(Box::new(T::String)),
            &[&[T::String], &[T::String, T::Int]],
        ),
        "getQuery" => Ok(T::Map(
            Box::new(T::String),
            Box::new(T::List(Box::new(T::String))),
        )),
        "add" | "sub" => Ok(T::Opaque("kubernetes.Quantity")),
        "masked" => Ok(T::Opaque("net.CIDR")),
        _ => return None,
    })
}

/// cel-go's validator of `'<literal>'.format([<list literal>])` calls (the strings extension
/// at the version Kubernetes uses): the format string's clauses against the checked types of
/// the list's items, the first problem reported at the node cel-go reports it at. Items of a
/// type whose name the apiserver prints differently (objects, opaque types) are not judged.
fn format_call_issue(
    call_id: u64,
    call: &CallExpr,
    types: &HashMap<u64, CelType>,
) -> Option<TypeIssue> {
    let Expr::Literal(LiteralValue::String(text)) = &call.target.as_deref()?.expr else {
        return None;
    };
    let [argument] = call.args.as_slice() else {
        return None;
    };
    let Expr::List(list) = &argument.expr else {
        return None;
    };
    let issue = |id: u64, message: String| Some(TypeIssue { id, message });
    let bytes = text.as_bytes();
    let (mut i, mut index, mut requested) = (0, 0, 0);
    while i < bytes.len() {
        if bytes[i] != b'%' {
            i += 1;
            continue;
        }
        if bytes.get(i + 1) == Some(&b'%') {
            i += 2;
            continue;
        }
        requested += 1;
        if i + 1 >= bytes.len() {
            return issue(call_id, "unexpected end of string".to_owned());
        }
        let Some(item) = list.elements.get(index) else {
            return issue(call_id, format!("index {index} out of range"));
        };
        let clause = &bytes[i + 1..];
        let mut read = 0;
        if clause[0] == b'.' {
            read = 1;
            while clause.get(read).is_some_and(u8::is_ascii_digit) {
                read += 1;
            }
            let precision_error = if read >= clause.len() {
                Some("could not find end of precision specifier".to_owned())
            } else {
                let digits = std::str::from_utf8(&clause[1..read]).unwrap_or_default();
                match digits.parse::<i64>() {
                    Ok(_) => None,
                    Err(_) if digits.is_empty() => Some(
                        "error while converting precision to integer: strconv.Atoi: parsing \"\": \
                         invalid syntax"
                            .to_owned(),
                    ),
                    Err(_) => Some(format!(
                        "error while converting precision to integer: strconv.Atoi: parsing \
                         {digits:?}: value out of range"
                    )),
                }
            };
            if let Some(error) = precision_error {
                return issue(
                    call_id,
                    format!(
                        "could not parse formatting clause: error while parsing precision: {error}"
                    ),
                );
            }
        }
        let verb = clause[read];
        read += 1;
        let accepted: &[fn(&CelType) -> bool] = match verb {
            // Every type but objects and opaque ones, which are not judged here.
            b's' => &[],
            b'd' | b'o' => &[is_int, is_uint],
            b'f' | b'e' => &[is_double, is_string],
            b'b' => &[is_int, is_uint, is_bool],
            b'x' | b'X' => &[is_int, is_uint, is_string, is_bytes],
            other => {
                return issue(
                    call_id,
                    format!(
                        "could not parse formatting clause: unrecognized formatting clause \"{}\"",
                        char::from(other)
                    ),
                );
            }
        };
        let clause_words = match verb {
            b'd' => "decimal clause can only be used on integers",
            b'o' => "octal clause can only be used on integers",
            b'f' => "fixed-point clause can only be used on doubles",
            b'e' => "scientific clause can only be used on doubles",
            b'b' => "only integers and bools can be formatted as binary",
            b'x' | b'X' => "only integers, byte buffers, and strings can be formatted as hex",
            _ => "",
        };
        if !accepted.is_empty() {
            let found = types.get(&item.id).cloned().unwrap_or(CelType::Dyn);
            if !found.is_dyn() && !accepted.iter().any(|accepts| accepts(&found)) {
                let name = cel_go_type_name(&found)?;
                return issue(
                    item.id,
                    format!("error during formatting: {clause_words}, was given {name}"),
                );
            }
        }
        i += 1 + read;
        index += 1;
    }
    if list.elements.len() > requested {
        return issue(
            call_id,
            format!(
                "too many arguments supplied to string.format (expected {requested}, got {})",
                list.elements.len()
            ),
        );
    }
    None
}

fn is_int(t: &CelType) -> bool {
    matches!(t, CelType::Int)
}

fn is_uint(t: &CelType) -> bool {
    matches!(t, CelType::Uint)
}

fn is_double(t: &CelType) -> bool {
    matches!(t, CelType::Double)
}

fn is_string(t: &CelType) -> bool {
    matches!(t, CelType::String)
}

fn is_bool(t: &CelType) -> bool {
    matches!(t, CelType::Bool)
}

fn is_bytes(t: &CelType) -> bool {
    matches!(t, CelType::Bytes)
}

/// cel-go's `Type.TypeName()` of the types whose name does not depend on the apiserver's run.
fn cel_go_type_name(t: &CelType) -> Option<&'static str> {
    Some(match t {
        CelType::Null => "null_type",
        CelType::Bool => "bool",
        CelType::Int => "int",
        CelType::Uint => "uint",
        CelType::Double => "double",
        CelType::String => "string",
        CelType::Bytes => "bytes",
        CelType::Duration => "google.protobuf.Duration",
        CelType::Timestamp => "google.protobuf.Timestamp",
        CelType::List(_) => "list",
        CelType::Map(..) => "map",
        CelType::Type => "type",
        _ => return None,
    })
}
