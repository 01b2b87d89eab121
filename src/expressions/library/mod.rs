//! The Kubernetes CEL libraries `cel` 0.15 lacks, registered as overloads on the environment.
//!
//! Provided by `cel` 0.15 and used as is: the standard library, optionals, the strings
//! extension (`charAt`, `indexOf`, `lastIndexOf`, `lowerAscii`, `upperAscii`, `replace`, `split`,
//! `substring`, `trim`, `join`, `strings.quote`; not its `format`, which follows cel-go's
//! formatting v2, where Kubernetes runs v1: [`string_format`]), the lists extension (`slice`,
//! `flatten`, `distinct`, `reverse`, `sort`, `sortBy`, `lists.range`, `first`, `last`). The
//! crate's math and encoders extensions and `cel.bind` are not declared: Kubernetes v1.37 has
//! none of them (the apiserver refuses `math.*`, `base64.*` and `cel.bind` at create).
//!
//! Added here: Kubernetes lists (`isSorted`, `sum`, `min`, `max`, `indexOf`, `lastIndexOf`),
//! sets, regex (`find`, `findAll`, and a caching `matches`), `url`, `ip`, `cidr`, `quantity`,
//! `semver`, `format`, `jsonpatch.escapeKey`, `authorizer`, and `string.format` as cel-go's
//! formatting v1 writes it.

use std::cell::RefCell;
use std::cmp::Ordering;
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;

use cel::common::types::{DYN_TYPE, STRING_TYPE, Type};
use cel::common::value::{CowVal, Val};
use cel::objects::{Key, Map, Opaque, OptionalValue};
use cel::{Env, ExecutionError, Value};

use super::activation::{AuthorizationCheck, AuthorizationDecision, Authorizer};

mod authz;
mod double_text;
mod formats;
mod lists;
mod net;
mod patterns;
mod quantity;
mod regexp_errors;
mod semver;
mod string_format;
mod urls;

use self::{authz::*, formats::*, lists::*, net::*, patterns::*, quantity::*, semver::*, urls::*};
pub(crate) use authz::authorizer_value;
pub(in crate::expressions) use double_text::wrap_string_conversions;
pub(crate) use double_text::{go_format_g, go_rfc3339_nano};
pub(crate) use formats::FORMATS;
#[cfg(test)]
pub(crate) use patterns::cached_regexes;
pub(crate) use patterns::{cached_regex_match, compile_as_go};

type Fallible = Result<Value, ExecutionError>;

/// Global functions and their argument counts (an empty list: any), for the static checks.
pub(crate) const GLOBAL_FUNCTIONS: &[(&str, &[usize])] = &[
    // standard library
    ("size", &[1]),
    ("matches", &[2]),
    ("int", &[1]),
    ("uint", &[1]),
    ("double", &[1]),
    ("string", &[1]),
    ("bytes", &[1]),
    ("bool", &[1]),
    ("type", &[1]),
    ("dyn", &[1]),
    ("duration", &[1]),
    ("timestamp", &[1]),
    ("optional.of", &[1]),
    ("optional.none", &[0]),
    ("optional.ofNonZeroValue", &[1]),
    ("lists.range", &[1]),
    ("strings.quote", &[1]),
    // Kubernetes
    ("sets.contains", &[2]),
    ("sets.equivalent", &[2]),
    ("sets.intersects", &[2]),
    ("url", &[1]),
    ("isURL", &[1]),
    ("ip", &[1]),
    ("isIP", &[1]),
    ("ip.isCanonical", &[1]),
    ("cidr", &[1]),
    ("isCIDR", &[1]),
    ("quantity", &[1]),
    ("isQuantity", &[1]),
    ("semver", &[1, 2]),
    ("isSemver", &[1, 2]),
    ("jsonpatch.escapeKey", &[1]),
    ("format.named", &[1]),
    ("format.dns1123Label", &[0]),
    ("format.dns1123Subdomain", &[0]),
    ("format.dns1035Label", &[0]),
    ("format.qualifiedName", &[0]),
    ("format.dns1123LabelPrefix", &[0]),
    ("format.dns1123SubdomainPrefix", &[0]),
    ("format.dns1035LabelPrefix", &[0]),
    ("format.labelValue", &[0]),
    ("format.uri", &[0]),
    ("format.uuid", &[0]),
    ("format.byte", &[0]),
    ("format.date", &[0]),
    ("format.datetime", &[0]),
];

/// Member functions (receiver not counted) and their argument counts.
pub(crate) const MEMBER_FUNCTIONS: &[(&str, &[usize])] = &[
    ("contains", &[1]),
    ("startsWith", &[1]),
    ("endsWith", &[1]),
    ("matches", &[1]),
    ("size", &[0]),
    ("value", &[0]),
    ("hasValue", &[0]),
    ("or", &[1]),
    ("orValue", &[1]),
    ("getFullYear", &[0, 1]),
    ("getMonth", &[0, 1]),
    ("getDayOfYear", &[0, 1]),
    ("getDayOfMonth", &[0, 1]),
    ("getDate", &[0, 1]),
    ("getDayOfWeek", &[0, 1]),
    ("getHours", &[0, 1]),
    ("getMinutes", &[0, 1]),
    ("getSeconds", &[0, 1]),
    ("getMilliseconds", &[0, 1]),
    ("charAt", &[1]),
    ("indexOf", &[1, 2]),
    ("lastIndexOf", &[1, 2]),
    ("join", &[0, 1]),
    ("lowerAscii", &[0]),
    ("upperAscii", &[0]),
    ("trim", &[0]),
    ("replace", &[2, 3]),
    ("split", &[1, 2]),
    ("substring", &[1, 2]),
    ("format", &[1]),
    ("reverse", &[0]),
    ("slice", &[2]),
    ("flatten", &[0, 1]),
    ("distinct", &[0]),
    ("sort", &[0]),
    ("first", &[0]),
    ("last", &[0]),
    ("fieldSelector", &[1]),
    ("labelSelector", &[1]),
    // Kubernetes
    ("isSorted", &[0]),
    ("sum", &[0]),
    ("min", &[0]),
    ("max", &[0]),
    ("find", &[1]),
    ("findAll", &[1, 2]),
    ("getScheme", &[0]),
    ("getHost", &[0]),
    ("getHostname", &[0]),
    ("getPort", &[0]),
    ("getEscapedPath", &[0]),
    ("getQuery", &[0]),
    ("family", &[0]),
    ("isUnspecified", &[0]),
    ("isLoopback", &[0]),
    ("isLinkLocalMulticast", &[0]),
    ("isLinkLocalUnicast", &[0]),
    ("isGlobalUnicast", &[0]),
    ("containsIP", &[1]),
    ("containsCIDR", &[1]),
    ("ip", &[0]),
    ("masked", &[0]),
    ("prefixLength", &[0]),
    ("sign", &[0]),
    ("isInteger", &[0]),
    ("asInteger", &[0]),
    ("asApproximateFloat", &[0]),
    ("add", &[1]),
    ("sub", &[1]),
    ("mul", &[1]),
    ("div", &[1]),
    ("divInt", &[1]),
    // Not `includes` (Kubernetes lists v1): introduced in v1.37, it is not in the environment
    // a v1.37 apiserver compiles new expressions with (its compatibility version, v1.36), so
    // a policy using it is refused at create ("undeclared reference to 'includes'").
    ("isGreaterThan", &[1]),
    ("isLessThan", &[1]),
    ("compareTo", &[1]),
    ("major", &[0]),
    ("minor", &[0]),
    ("patch", &[0]),
    ("validate", &[1]),
    ("group", &[1]),
    ("resource", &[1]),
    ("subresource", &[1]),
    ("namespace", &[1]),
    ("name", &[1]),
    ("check", &[1]),
    ("allowed", &[0]),
    ("reason", &[0]),
    ("errored", &[0]),
    ("error", &[0]),
    ("path", &[1]),
    ("serviceAccount", &[2]),
];

/// Type names of the values this library adds (`type(ip('::1')) == net.IP`).
pub(crate) const OPAQUE_TYPES: &[&str] = &[
    "net.IP",
    "net.CIDR",
    "kubernetes.URL",
    "kubernetes.Quantity",
    "kubernetes.Semver",
    "kubernetes.NamedFormat",
    "kubernetes.authorization.Authorizer",
    "kubernetes.authorization.Decision",
];

/// Wraps `fn(&[Value]) -> Result<Value>` as an interpreter overload.
macro_rules! overload {
    ($f:path, $name:literal) => {{
        fn wrapper<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
            let values = args
                .iter()
                .map(|a| Value::try_from(a.as_ref()))
                .collect::<Result<Vec<_>, _>>()?;
            let out: Box<dyn Val> = $f($name, &values)?.try_into()?;
            Ok(CowVal::Owned(out))
        }
        wrapper as cel::common::functions::Function
    }};
    ($f:path) => {{
        fn wrapper<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
            let values = args
                .iter()
                .map(|a| Value::try_from(a.as_ref()))
                .collect::<Result<Vec<_>, _>>()?;
            let out: Box<dyn Val> = $f(&values)?.try_into()?;
            Ok(CowVal::Owned(out))
        }
        wrapper as cel::common::functions::Function
    }};
}

fn global(env: &mut Env, name: &str, arity: usize, f: cel::common::functions::Function) {
    env.add_overload(
        name,
        &format!("k8s_{name}_{arity}"),
        (0..arity).map(|_| DYN_TYPE).collect(),
        f,
    )
    .unwrap_or_else(|e| panic!("registering {name}: {e}"));
}

fn member(env: &mut Env, name: &str, arity: usize, f: cel::common::functions::Function) {
    env.add_member_overload(
        name,
        &format!("k8s_{name}_member_{arity}"),
        DYN_TYPE,
        (0..arity).map(|_| DYN_TYPE).collect(),
        f,
    )
    .unwrap_or_else(|e| panic!("registering {name}: {e}"));
}

/// Registers `$f(name, args)` as a member function under each name.
macro_rules! members {
    ($env:expr, $f:path, $arity:expr, [$($name:literal),* $(,)?]) => {
        $( member($env, $name, $arity, overload!($f, $name)); )*
    };
}

/// Registers the Kubernetes libraries on `env` (which has the standard library).
pub(super) fn register(env: &mut Env) {
    use cel::extensions;
    // Ahead of the strings extension's `string.format(list)`, so that calls find this one:
    // the first overload declared that accepts the arguments runs. Its argument is `dyn`,
    // as a second `(string, list)` signature would be refused.
    env.add_member_overload(
        "format",
        "k8s_string_format_v1",
        STRING_TYPE,
        vec![DYN_TYPE],
        string_format::format,
    )
    .expect("string.format");
    env.add_extension(extensions::strings).expect("strings");
    env.add_extension(extensions::lists).expect("lists");
    env.add_extension(extensions::math).expect("math");
    env.add_extension(extensions::encoders).expect("encoders");

    // internal
    global(env, "@budget", 1, budget);
    global(env, double_text::DOUBLE_TEXT, 1, double_text::double_text);
    global(env, "@cost", 2, cost);
    global(env, "@sized", 3, sized);
    global(env, "@pairs", 1, overload!(pairs));
    global(env, "@entry", 2, overload!(entry));
    global(env, "@mapFromPairs", 1, overload!(map_from_pairs));
    global(env, "@mapFromMaps", 1, overload!(map_from_maps));
    global(env, "@matches", 2, regex_matches);
    global(env, "@requestResource", 1, overload!(request_resource));
    member(env, "@matches", 1, regex_matches);

    // lists
    member(env, "isSorted", 0, overload!(is_sorted));
    member(env, "sum", 0, overload!(sum));
    member(env, "min", 0, overload!(list_min));
    member(env, "max", 0, overload!(list_max));
    member(env, "indexOf", 1, overload!(list_index_of));
    member(env, "lastIndexOf", 1, overload!(list_last_index_of));
    member(env, "includes", 1, overload!(includes));
    member(env, "first", 0, overload!(first));
    member(env, "last", 0, overload!(last));
    // sets
    global(env, "sets.contains", 2, overload!(sets_contains));
    global(env, "sets.equivalent", 2, overload!(sets_equivalent));
    global(env, "sets.intersects", 2, overload!(sets_intersects));
    // regex
    member(env, "find", 1, overload!(regex_find));
    member(env, "findAll", 1, overload!(regex_find_all));
    member(env, "findAll", 2, overload!(regex_find_all));
    // jsonpatch
    global(env, "jsonpatch.escapeKey", 1, overload!(escape_key));
    // url
    global(env, "url", 1, overload!(url));
    global(env, "isURL", 1, overload!(is_url));
    members!(
        env,
        url_part,
        0,
        [
            "getScheme",
            "getHost",
            "getHostname",
            "getPort",
            "getEscapedPath",
            "getQuery"
        ]
    );
    // ip and cidr
    global(env, "ip", 1, overload!(ip));
    global(env, "isIP", 1, overload!(is_ip));
    global(env, "ip.isCanonical", 1, overload!(ip_is_canonical));
    global(env, "cidr", 1, overload!(cidr));
    global(env, "isCIDR", 1, overload!(is_cidr));
    members!(
        env,
        net_member,
        0,
        [
            "family",
            "isUnspecified",
            "isLoopback",
            "isLinkLocalMulticast",
            "isLinkLocalUnicast",
            "isGlobalUnicast",
            "ip",
            "masked",
            "prefixLength",
        ]
    );
    member(env, "containsIP", 1, overload!(contains_ip));
    member(env, "containsCIDR", 1, overload!(contains_cidr));
    // quantity and semver
    global(env, "quantity", 1, overload!(quantity));
    global(env, "isQuantity", 1, overload!(is_quantity));
    global(env, "semver", 1, overload!(semver));
    global(env, "semver", 2, overload!(semver));
    global(env, "isSemver", 1, overload!(is_semver));
    global(env, "isSemver", 2, overload!(is_semver));
    members!(
        env,
        number_member,
        0,
        [
            "sign",
            "isInteger",
            "asInteger",
            "asApproximateFloat",
            "major",
            "minor",
            "patch"
        ]
    );
    members!(
        env,
        number_binary,
        1,
        [
            "add",
            "sub",
            "mul",
            "div",
            "divInt",
            "isGreaterThan",
            "isLessThan",
            "compareTo"
        ]
    );
    for t in OPAQUE_TYPES {
        env.add_type(Type::new_opaque_type(*t))
            .expect("opaque types");
    }
    for t in [
        "net.IP",
        "net.CIDR",
        "kubernetes.URL",
        "kubernetes.Quantity",
        "kubernetes.Semver",
    ] {
        env.add_overload(
            "string",
            &format!("string_{t}"),
            vec![Type::new_opaque_type(t)],
            overload!(opaque_string),
        )
        .expect("string overloads");
    }
    // format
    global(env, "format.named", 1, overload!(format_named));
    for (name, f) in FORMAT_CONSTRUCTORS {
        global(env, &format!("format.{name}"), 0, *f);
    }
    member(env, "validate", 1, overload!(format_validate));
    // authorizer
    members!(
        env,
        authz_member,
        1,
        [
            "group",
            "resource",
            "subresource",
            "namespace",
            "name",
            "path",
            "fieldSelector",
            "labelSelector",
            "check"
        ]
    );
    members!(env, authz_member, 2, ["serviceAccount"]);
    members!(
        env,
        authz_member,
        0,
        ["allowed", "reason", "errored", "error"]
    );
}

// ---- helpers ------------------------------------------------------------------------------

fn fail(function: &str, message: impl ToString) -> ExecutionError {
    ExecutionError::function_error(function, message)
}

fn no_overload(function: &str, args: &[Value]) -> ExecutionError {
    ExecutionError::no_such_overload(
        function,
        args.iter()
            .map(|a| super::convert::type_name(a).to_owned())
            .collect(),
    )
}

fn str_arg<'a>(function: &str, args: &'a [Value], i: usize) -> Result<&'a str, ExecutionError> {
    match args.get(i) {
        Some(Value::String(s)) => Ok(s.as_str()),
        _ => Err(no_overload(function, args)),
    }
}

fn list_arg<'a>(
    function: &str,
    args: &'a [Value],
    i: usize,
) -> Result<&'a [Value], ExecutionError> {
    match args.get(i) {
        Some(Value::List(l)) => Ok(l.as_slice()),
        _ => Err(no_overload(function, args)),
    }
}

fn opaque<T: Opaque>(v: &Value) -> Option<&T> {
    match v {
        Value::Opaque(o) => o.downcast_ref::<T>(),
        _ => None,
    }
}

fn wrap(o: impl Opaque) -> Value {
    Value::Opaque(Arc::new(o))
}

fn optional(v: Option<Value>) -> Value {
    Value::Opaque(Arc::new(match v {
        Some(v) => OptionalValue::of(v),
        None => OptionalValue::none(),
    }))
}

fn compare(function: &str, a: &Value, b: &Value) -> Result<Ordering, ExecutionError> {
    match (a, b) {
        (Value::Int(x), Value::UInt(y)) => Some(i128::from(*x).cmp(&i128::from(*y))),
        (Value::UInt(x), Value::Int(y)) => Some(i128::from(*x).cmp(&i128::from(*y))),
        (Value::Int(x), Value::Float(y)) => (*x as f64).partial_cmp(y),
        (Value::Float(x), Value::Int(y)) => x.partial_cmp(&(*y as f64)),
        (Value::UInt(x), Value::Float(y)) => (*x as f64).partial_cmp(y),
        (Value::Float(x), Value::UInt(y)) => x.partial_cmp(&(*y as f64)),
        _ if std::mem::discriminant(a) == std::mem::discriminant(b) => a.partial_cmp(b),
        _ => None,
    }
    .ok_or_else(|| no_overload(function, &[a.clone(), b.clone()]))
}

// ---- internal -----------------------------------------------------------------------------

fn budget<'b, 'v>(mut args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let range = args
        .pop()
        .ok_or_else(ExecutionError::missing_argument_or_target)?;
    let size = range
        .as_sizer()
        .map_or(1, |s| (*s.size().inner()).max(1) as u64);
    super::charge(size)?;
    Ok(range)
}

/// `@cost(units, expr)`: `expr`, after charging `units` of runtime cost.
fn cost<'b, 'v>(mut args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let value = args
        .pop()
        .ok_or_else(ExecutionError::missing_argument_or_target)?;
    let units = args
        .pop()
        .and_then(|units| {
            <cel::common::types::CelInt as cel::common::value::FromVal>::from_val(units.as_ref())
                .map(|units| *units.inner())
        })
        .ok_or_else(ExecutionError::missing_argument_or_target)?;
    super::charge_cost(units.max(0) as u64)?;
    Ok(value)
}

/// `@sized(site, rule, x)`: `x`, after charging (or noting) its size for the call at `site`.
fn sized<'b, 'v>(mut args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    use cel::common::types::{CelInt, Kind};
    use cel::common::value::FromVal;
    let value = args
        .pop()
        .ok_or_else(ExecutionError::missing_argument_or_target)?;
    let mut int = || {
        args.pop()
            .and_then(|arg| CelInt::from_val(arg.as_ref()).map(|i| *i.inner()))
            .ok_or_else(ExecutionError::missing_argument_or_target)
    };
    let rule = super::cost::SizeRule::from_code(int()?)
        .ok_or_else(ExecutionError::missing_argument_or_target)?;
    let site = int()?;
    let kind = value.get_type().kind();
    let size = if rule == super::cost::SizeRule::Traversal || rule.is_containment() {
        cel::Value::try_from(value.as_ref()).map_or(1, |v| library_size(rule, &v).unwrap_or(1))
    } else if rule == super::cost::SizeRule::NoteInt {
        CelInt::from_val(value.as_ref()).map_or(1, |depth| depth.inner().unsigned_abs())
    } else {
        // cel-go's `actualSize`: a string's code points, a list's or map's items; 1 otherwise.
        value
            .as_sizer()
            .map_or(1, |s| (*s.size().inner()).max(0) as u64)
    };
    let textlike = match rule {
        super::cost::SizeRule::InList => kind == Kind::List,
        super::cost::SizeRule::NoteInt => {
            CelInt::from_val(value.as_ref()).is_some_and(|depth| *depth.inner() < 0)
        }
        super::cost::SizeRule::SelfCompare => {
            cel::Value::try_from(value.as_ref()).is_ok_and(|list| first_item_is_text(&list))
        }
        _ => matches!(kind, Kind::String | Kind::Bytes),
    };
    super::cost::charge_sized(site, rule, (size, textlike))?;
    Ok(value)
}

/// The size a Kubernetes library rule charges `value` by, where it is not cel-go's
/// `actualSize`: a traversal's cost ([`traversal_cost`]); for the receiver of
/// `containsIP`/`containsCIDR`, Kubernetes' size of a CIDR, its prefix in bytes, rounded up
/// (equality charges CIDRs and IPs 1, not by this size).
pub(crate) fn library_size(rule: super::cost::SizeRule, value: &Value) -> Option<u64> {
    if rule == super::cost::SizeRule::Traversal {
        Some(traversal_cost(value))
    } else if rule.is_containment() {
        Some(opaque::<Cidr>(value).map_or(1, |cidr| u64::from(cidr.prefix).div_ceil(8)))
    } else {
        None
    }
}

/// Whether a list's first item is a string or bytes (cel-go's self-comparing list calls cost
/// more for those).
pub(crate) fn first_item_is_text(list: &Value) -> bool {
    matches!(list, Value::List(items)
        if matches!(items.first(), Some(Value::String(_) | Value::Bytes(_))))
}

/// The Kubernetes library's `traversalCost`: a tenth of a string's or bytes' length, rounded
/// down; the sum over a list's items or a map's keys and values; 1 for anything else.
fn traversal_cost(value: &Value) -> u64 {
    match value {
        Value::String(text) => text.len() as u64 / 10,
        Value::Bytes(bytes) => bytes.len() as u64 / 10,
        Value::List(items) => items.iter().map(traversal_cost).sum(),
        Value::Map(map) => map
            .map
            .iter()
            .map(|(key, value)| traversal_cost(&Value::from(key)) + traversal_cost(value))
            .sum(),
        _ => 1,
    }
}

fn pairs(args: &[Value]) -> Fallible {
    let pairs: Vec<Value> = match &args[0] {
        Value::List(items) => items
            .iter()
            .enumerate()
            .map(|(i, v)| Value::List(Arc::new(vec![Value::Int(i as i64), v.clone()])))
            .collect(),
        Value::Map(map) => {
            let mut entries: Vec<(&Key, &Value)> = map.map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            entries
                .into_iter()
                .map(|(k, v)| Value::List(Arc::new(vec![Value::from(k), v.clone()])))
                .collect()
        }
        _ => return Err(no_overload("comprehension", args)),
    };
    Ok(Value::List(Arc::new(pairs)))
}

/// `[key, value]`, for `transformMap`'s steps.
fn entry(args: &[Value]) -> Fallible {
    Ok(Value::List(Arc::new(args.to_vec())))
}

fn map_from_pairs(args: &[Value]) -> Fallible {
    let mut map = HashMap::new();
    for pair in list_arg("transformMap", args, 0)? {
        if let Value::List(kv) = pair
            && let [k, v] = kv.as_slice()
        {
            let key: Key = k
                .clone()
                .try_into()
                .map_err(|_| fail("transformMap", "unsupported key type"))?;
            map.insert(key, v.clone());
        }
    }
    Ok(Value::Map(Map { map: Arc::new(map) }))
}

/// `transformMapEntry`'s result: the entries of every map its steps yielded, as cel-go's
/// `@mapInsert` merges them (a key already present is an error).
fn map_from_maps(args: &[Value]) -> Fallible {
    let mut map = HashMap::new();
    for entries in list_arg("transformMapEntry", args, 0)? {
        let Value::Map(entries) = entries else {
            return Err(no_overload("@mapInsert", std::slice::from_ref(entries)));
        };
        for (key, value) in entries.map.iter() {
            if map.contains_key(key) {
                return Err(fail(
                    "transformMapEntry",
                    format!("insert failed: key {key} already exists"),
                ));
            }
            map.insert(key.clone(), value.clone());
        }
    }
    Ok(Value::Map(Map { map: Arc::new(map) }))
}

fn opaque_string(args: &[Value]) -> Fallible {
    let v = &args[0];
    let text = if let Some(Ip(ip)) = opaque::<Ip>(v) {
        ip.to_string()
    } else if let Some(c) = opaque::<Cidr>(v) {
        format!("{}/{}", c.addr, c.prefix)
    } else if let Some(u) = opaque::<Url>(v) {
        u.raw.clone()
    } else if let Some(q) = opaque::<Quantity>(v) {
        q.raw.clone()
    } else if let Some(s) = opaque::<Semver>(v) {
        s.to_string()
    } else {
        return Err(no_overload("string", args));
    };
    Ok(Value::String(Arc::new(text)))
}

// ---- quantity and semver members ------------------------------------------------------------

fn number_member(function: &str, args: &[Value]) -> Fallible {
    if let Some(v) = args.first().and_then(opaque::<Semver>) {
        return match function {
            "major" => Ok(Value::Int(v.major as i64)),
            "minor" => Ok(Value::Int(v.minor as i64)),
            "patch" => Ok(Value::Int(v.patch as i64)),
            _ => Err(no_overload(function, args)),
        };
    }
    let Some(q) = args.first().and_then(opaque::<Quantity>) else {
        return Err(no_overload(function, args));
    };
    let integer = q
        .nanos
        .filter(|n| n % NANO == 0)
        .and_then(|n| i64::try_from(n / NANO).ok());
    match function {
        "sign" => Ok(Value::Int(
            q.approx.partial_cmp(&0.0).map_or(0, |o| o as i64),
        )),
        "isInteger" => Ok(Value::Bool(integer.is_some())),
        "asInteger" => integer
            .map(Value::Int)
            .ok_or_else(|| fail("asInteger", "cannot convert value to integer")),
        "asApproximateFloat" => Ok(Value::Float(q.approx)),
        _ => Err(no_overload(function, args)),
    }
}

fn format_nanos(nanos: i128) -> String {
    if nanos % NANO == 0 {
        return (nanos / NANO).to_string();
    }
    for (unit, suffix) in [(1_000_000, "m"), (1_000, "u"), (1, "n")] {
        if nanos % unit == 0 {
            return format!("{}{suffix}", nanos / unit);
        }
    }
    nanos.to_string()
}

fn number_binary(function: &str, args: &[Value]) -> Fallible {
    if let (Some(a), Some(b)) = (
        args.first().and_then(opaque::<Semver>),
        args.get(1).and_then(opaque::<Semver>),
    ) {
        let ord = a.cmp(b);
        return match function {
            "isGreaterThan" => Ok(Value::Bool(ord == Ordering::Greater)),
            "isLessThan" => Ok(Value::Bool(ord == Ordering::Less)),
            "compareTo" => Ok(Value::Int(ord as i64)),
            _ => Err(no_overload(function, args)),
        };
    }
    let Some(a) = args.first().and_then(opaque::<Quantity>) else {
        return Err(no_overload(function, args));
    };
    let overflow = || fail(function, "quantity overflow");
    if let Some(Value::Int(n)) = args.get(1)
        && matches!(function, "mul" | "div" | "divInt")
    {
        let nanos = a.nanos.ok_or_else(overflow)?;
        let n = i128::from(*n);
        if n == 0 && function != "mul" {
            return Err(fail(function, "division by zero"));
        }
        return Ok(wrap(Quantity::exact(match function {
            "mul" => nanos.checked_mul(n).ok_or_else(overflow)?,
            "div" => nanos / n,
            _ => nanos / n / NANO * NANO,
        })));
    }
    let b = match args.get(1) {
        Some(Value::Int(i)) => Quantity::exact(i128::from(*i) * NANO),
        Some(other) => opaque::<Quantity>(other)
            .ok_or_else(|| no_overload(function, args))?
            .clone(),
        None => return Err(no_overload(function, args)),
    };
    let ord = a.cmp(&b);
    let exact = |f: fn(i128, i128) -> Option<i128>| {
        a.nanos
            .zip(b.nanos)
            .and_then(|(x, y)| f(x, y))
            .map(|n| wrap(Quantity::exact(n)))
            .ok_or_else(overflow)
    };
    match function {
        "add" => exact(i128::checked_add),
        "sub" => exact(i128::checked_sub),
        "isGreaterThan" => Ok(Value::Bool(ord == Ordering::Greater)),
        "isLessThan" => Ok(Value::Bool(ord == Ordering::Less)),
        "compareTo" => Ok(Value::Int(ord as i64)),
        _ => Err(no_overload(function, args)),
    }
}
