//! `format.named()`, `format.<name>()` and `validate()`: the named formats of Kubernetes
//! (apimachinery validation messages, word for word).

use super::*;
use crate::kubernetes::names;

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct NamedFormat(&'static str);

impl Opaque for NamedFormat {
    fn runtime_type_name(&self) -> &str {
        "kubernetes.NamedFormat"
    }
}

pub(super) const UUID: &str =
    "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}";

/// The names `format.named()` knows, each also a constructor (`format.dns1123Label()`).
pub(crate) const FORMATS: &[&str] = &[
    "dns1123Label",
    "dns1123Subdomain",
    "dns1035Label",
    "qualifiedName",
    "dns1123LabelPrefix",
    "dns1123SubdomainPrefix",
    "dns1035LabelPrefix",
    "labelValue",
    "uri",
    "uuid",
    "byte",
    "date",
    "datetime",
];

macro_rules! format_constructors {
    ($($name:literal),*) => {
        &[$(($name, {
            fn f<'b, 'v>(_: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
                let out: Box<dyn Val> = wrap(NamedFormat($name)).try_into()?;
                Ok(CowVal::Owned(out))
            }
            f as cel::common::functions::Function
        })),*]
    };
}

pub(super) const FORMAT_CONSTRUCTORS: &[(&str, cel::common::functions::Function)] = format_constructors!(
    "dns1123Label",
    "dns1123Subdomain",
    "dns1035Label",
    "qualifiedName",
    "dns1123LabelPrefix",
    "dns1123SubdomainPrefix",
    "dns1035LabelPrefix",
    "labelValue",
    "uri",
    "uuid",
    "byte",
    "date",
    "datetime"
);

pub(super) fn format_named(args: &[Value]) -> Fallible {
    let name = str_arg("format.named", args, 0)?;
    Ok(optional(
        FORMATS
            .iter()
            .find(|f| **f == name)
            .map(|f| wrap(NamedFormat(f))),
    ))
}

pub(super) fn full_match(pattern: &str, s: &str) -> bool {
    with_regex("validate", &format!("^(?:{pattern})$"), |re| re.is_match(s)).unwrap_or(false)
}

/// A generated-name prefix may end in `-`: validate as if it ended in `a`.
pub(super) fn mask_trailing_dash(s: &str) -> String {
    match s.strip_suffix('-') {
        Some(head) if s.len() > 1 => format!("{head}a"),
        _ => s.to_owned(),
    }
}

/// The size Kubernetes assumes for a format's regex when it charges `validate`
/// (`MaxRegexSize` in k8s.io/apiserver pkg/cel/library/format.go; `uri` the length of
/// govalidator's URL regex, `uuid`, `date` and `datetime` those of kube-openapi's
/// `UUIDPattern` and `DateTimePattern`, `byte` a base64 regex's).
fn max_regex_size(name: &str) -> u64 {
    match name {
        "dns1123Label" | "dns1035Label" | "dns1123LabelPrefix" | "dns1035LabelPrefix" => 30,
        "dns1123Subdomain" | "qualifiedName" | "dns1123SubdomainPrefix" => 60,
        "labelValue" => 40,
        "uri" => 1103,
        "uuid" => 70,
        "byte" => 84,
        _ => 71,
    }
}

pub(super) fn format_validate(args: &[Value]) -> Fallible {
    let Some(NamedFormat(name)) = args.first().and_then(opaque::<NamedFormat>) else {
        return Err(no_overload("validate", args));
    };
    let s = str_arg("validate", args, 1)?;
    // Kubernetes charges a regex match of the text against the format's assumed regex size:
    // (1 + the text's length) / 10 times that size / 4, each rounded up.
    crate::expressions::charge_cost(regex_units(s, max_regex_size(name)))?;
    let mut errors = Vec::new();
    match *name {
        "dns1123Label" => errors = names::dns1123_label_errors(s),
        "dns1123Subdomain" => errors = names::dns1123_subdomain_errors(s),
        "dns1035Label" => errors = names::dns1035_label_errors(s),
        "dns1123LabelPrefix" => errors = names::dns1123_label_errors(&mask_trailing_dash(s)),
        "dns1123SubdomainPrefix" => {
            errors = names::dns1123_subdomain_errors(&mask_trailing_dash(s))
        }
        "dns1035LabelPrefix" => errors = names::dns1035_label_errors(&mask_trailing_dash(s)),
        "qualifiedName" => errors = names::qualified_name_errors(s),
        "labelValue" => errors = names::label_value_errors(s),
        "uri" => {
            if parse_url(s).is_err() {
                errors.push("invalid URI".to_owned());
            }
        }
        "uuid" => {
            if !full_match(UUID, s) {
                errors.push("does not match the UUID format".to_owned());
            }
        }
        "byte" => {
            use base64::Engine;
            if base64::engine::general_purpose::STANDARD.decode(s).is_err() {
                errors.push("invalid base64".to_owned());
            }
        }
        "date" => {
            if !valid_date(s) {
                errors.push("invalid date".to_owned());
            }
        }
        _ => {
            if !valid_datetime(s) {
                errors.push("invalid datetime".to_owned());
            }
        }
    }
    Ok(optional((!errors.is_empty()).then(|| {
        Value::List(Arc::new(
            errors
                .into_iter()
                .map(|e| Value::String(Arc::new(e)))
                .collect(),
        ))
    })))
}

/// `YYYY-MM-DD` naming a real day.
pub(super) fn valid_date(s: &str) -> bool {
    let parts: Vec<&str> = s.split('-').collect();
    let [y, m, d] = parts.as_slice() else {
        return false;
    };
    if y.len() != 4 || m.len() != 2 || d.len() != 2 {
        return false;
    }
    let (Ok(y), Ok(m), Ok(d)) = (y.parse::<i32>(), m.parse::<u8>(), d.parse::<u8>()) else {
        return false;
    };
    time::Month::try_from(m)
        .and_then(|m| time::Date::from_calendar_date(y, m, d))
        .is_ok()
}

/// RFC 3339 date-time: `YYYY-MM-DDTHH:MM:SS[.frac](Z|±HH:MM)`.
pub(super) fn valid_datetime(s: &str) -> bool {
    let Some((date, rest)) = s.split_once(['T', 't']) else {
        return false;
    };
    const TIME: &str = r"^([01][0-9]|2[0-3]):[0-5][0-9]:([0-5][0-9]|60)(\.[0-9]+)?([zZ]|[+-]([01][0-9]|2[0-3]):[0-5][0-9])$";
    valid_date(date) && with_regex("validate", TIME, |re| re.is_match(rest)).unwrap_or(false)
}
