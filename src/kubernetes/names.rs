//! Kubernetes name rules, worded as apimachinery's `k8s.io/apimachinery/pkg/util/validation`
//! words them: each function returns the messages for what is wrong (none when the value is
//! valid). Used by Pod Security configuration checks and CEL's `format` library alike.

const DNS1123_LABEL_MAX: usize = 63;
const DNS1123_SUBDOMAIN_MAX: usize = 253;
const DNS1035_LABEL_MAX: usize = 63;
const QUALIFIED_NAME_MAX: usize = 63;

/// The regex apimachinery reports for a DNS-1123 label.
pub const DNS1123_LABEL_FORMAT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
/// The regex apimachinery reports for a DNS-1123 subdomain.
pub const DNS1123_SUBDOMAIN_FORMAT: &str =
    "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
/// The regex apimachinery reports for a DNS-1035 label.
pub const DNS1035_LABEL_FORMAT: &str = "[a-z]([-a-z0-9]*[a-z0-9])?";
/// The regex apimachinery reports for a qualified name's name part.
pub const QUALIFIED_NAME_FORMAT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";

fn max_len_error(max: usize) -> String {
    format!("must be no more than {max} characters")
}

/// The newer `api/validate/content` wording that label keys and values use (Kubernetes v1.37).
fn max_bytes_error(max: usize) -> String {
    format!("must be no more than {max} bytes")
}

/// `first`, then any of `middle`, ending with `last`: the shape of every name regex here.
fn shaped(
    value: &str,
    first: fn(u8) -> bool,
    middle: fn(u8) -> bool,
    last: fn(u8) -> bool,
) -> bool {
    let bytes = value.as_bytes();
    match (bytes.first(), bytes.last()) {
        (Some(&f), Some(&l)) => first(f) && last(l) && bytes.iter().all(|&b| middle(b)),
        _ => false,
    }
}

fn lower_alnum(b: u8) -> bool {
    b.is_ascii_lowercase() || b.is_ascii_digit()
}

fn is_dns1123_label(value: &str) -> bool {
    shaped(
        value,
        lower_alnum,
        |b| lower_alnum(b) || b == b'-',
        lower_alnum,
    )
}

fn is_dns1123_subdomain(value: &str) -> bool {
    value.split('.').all(is_dns1123_label)
}

/// `IsDNS1123Label`: what a namespace name must be.
pub fn dns1123_label_errors(value: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if value.len() > DNS1123_LABEL_MAX {
        errors.push(max_len_error(DNS1123_LABEL_MAX));
    }
    if !is_dns1123_label(value) {
        if is_dns1123_subdomain(value) {
            errors.push("must not contain dots".to_owned());
        } else {
            errors.push(format!(
                "a lowercase RFC 1123 label must consist of lower case alphanumeric characters \
                 or '-', and must start and end with an alphanumeric character (e.g. \
                 'my-name',  or '123-abc', regex used for validation is \
                 '{DNS1123_LABEL_FORMAT}')"
            ));
        }
    }
    errors
}

/// `IsDNS1123Subdomain`: what most object names must be.
pub fn dns1123_subdomain_errors(value: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if value.len() > DNS1123_SUBDOMAIN_MAX {
        errors.push(max_len_error(DNS1123_SUBDOMAIN_MAX));
    }
    if !is_dns1123_subdomain(value) {
        errors.push(format!(
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric \
             characters, '-' or '.', and must start and end with an alphanumeric character \
             (e.g. 'example.com', regex used for validation is '{DNS1123_SUBDOMAIN_FORMAT}')"
        ));
    }
    errors
}

/// `IsDNS1035Label`: what a Service name must be.
pub fn dns1035_label_errors(value: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if value.len() > DNS1035_LABEL_MAX {
        errors.push(max_len_error(DNS1035_LABEL_MAX));
    }
    if !shaped(
        value,
        |b| b.is_ascii_lowercase(),
        |b| lower_alnum(b) || b == b'-',
        lower_alnum,
    ) {
        errors.push(format!(
            "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start \
             with an alphabetic character, and end with an alphanumeric character (e.g. \
             'my-name',  or 'abc-123', regex used for validation is '{DNS1035_LABEL_FORMAT}')"
        ));
    }
    errors
}

/// Whether `value` matches [`QUALIFIED_NAME_FORMAT`] (length not checked).
pub fn is_qualified_name_part(value: &str) -> bool {
    shaped(
        value,
        |b| b.is_ascii_alphanumeric(),
        |b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'),
        |b| b.is_ascii_alphanumeric(),
    )
}

const QUALIFIED_NAME_MESSAGE: &str = "must consist of alphanumeric characters, '-', '_' or '.', \
     and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or \
     '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";

/// `IsQualifiedName` (`IsLabelKey`): an optional DNS subdomain prefix and `/`, then a name
/// part of at most 63 characters (label keys, annotation keys, condition names).
pub fn qualified_name_errors(value: &str) -> Vec<String> {
    let mut errors = Vec::new();
    let (prefix, name) = match value.split_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, value),
    };
    if value.matches('/').count() > 1 {
        errors.push(format!(
            "a valid label key {QUALIFIED_NAME_MESSAGE} with an optional DNS subdomain prefix \
             and '/' (e.g. 'example.com/MyName')"
        ));
        return errors;
    }
    if let Some(prefix) = prefix {
        if prefix.is_empty() {
            errors.push("prefix part must be non-empty".to_owned());
        } else {
            errors.extend(dns1123_subdomain_errors(prefix).into_iter().map(|e| {
                format!(
                    "prefix part {}",
                    e.replace(&max_len_error(253), &max_bytes_error(253))
                )
            }));
        }
    }
    if name.is_empty() {
        errors.push("name part must be non-empty".to_owned());
    } else if name.len() > QUALIFIED_NAME_MAX {
        errors.push(format!("name part {}", max_bytes_error(QUALIFIED_NAME_MAX)));
    }
    if !is_qualified_name_part(name) {
        errors.push(format!("name part {QUALIFIED_NAME_MESSAGE}"));
    }
    errors
}

/// `IsValidLabelValue`: empty, or a qualified name part of at most 63 characters.
pub fn label_value_errors(value: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if value.len() > QUALIFIED_NAME_MAX {
        errors.push(max_bytes_error(QUALIFIED_NAME_MAX));
    }
    if !value.is_empty() && !is_qualified_name_part(value) {
        errors.push(
            "a valid label must be an empty string or consist of alphanumeric characters, '-', \
             '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  \
              or 'my_value',  or '12345', regex used for validation is \
             '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
                .to_owned(),
        );
    }
    errors
}

/// The resource a kind is served as when nothing says otherwise: the lower-case kind in the plural by
/// English rules, as kubebuilder names CRD plurals: `s`, `x`, `z`, `ch`, `sh` → `+es`;
/// consonant + `y` → `ies`; otherwise `+s` (`Gateway` → `gateways`, `Policy` → `policies`).
/// A CRD with an irregular plural needs an AdmissionReview to be checked exactly.
pub fn plural_resource(kind: &str) -> String {
    let lower = kind.to_ascii_lowercase();
    let consonant_y = lower.len() >= 2
        && lower.ends_with('y')
        && !matches!(
            lower.as_bytes()[lower.len() - 2],
            b'a' | b'e' | b'i' | b'o' | b'u'
        );
    if consonant_y {
        format!("{}ies", &lower[..lower.len() - 1])
    } else if ["s", "x", "z", "ch", "sh"]
        .iter()
        .any(|end| lower.ends_with(end))
    {
        format!("{lower}es")
    } else {
        format!("{lower}s")
    }
}

/// The resource a built-in kind is served as: [`plural_resource`], but for the one irregular
/// built-in plural (`Endpoints` → `endpoints`).
pub fn resource_for_kind(kind: &str) -> String {
    match kind {
        "Endpoints" => "endpoints".to_owned(),
        _ => plural_resource(kind),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_errors_as_apimachinery() {
        assert!(dns1123_label_errors("kube-system").is_empty());
        assert_eq!(dns1123_label_errors("a.b"), ["must not contain dots"]);
        assert!(dns1123_label_errors("Kube_System")[0].starts_with("a lowercase RFC 1123 label"));
        assert_eq!(
            dns1123_label_errors(&"x".repeat(64)),
            ["must be no more than 63 characters"]
        );
        assert!(dns1123_subdomain_errors("kata.io").is_empty());
        assert!(dns1123_subdomain_errors("Kata")[0].starts_with("a lowercase RFC 1123 subdomain"));
        assert!(dns1123_subdomain_errors("a..b").len() == 1);
        assert!(dns1035_label_errors("svc-1").is_empty());
        assert!(dns1035_label_errors("1svc")[0].starts_with("a DNS-1035 label"));
        assert!(qualified_name_errors("example.com/My_Name.1").is_empty());
        assert_eq!(
            qualified_name_errors("/x"),
            ["prefix part must be non-empty"]
        );
        assert_eq!(qualified_name_errors("x/").len(), 2);
        assert_eq!(qualified_name_errors("a/b/c").len(), 1);
        assert!(qualified_name_errors("has space")[0].starts_with("name part must consist"));
        assert!(label_value_errors("").is_empty());
        assert!(label_value_errors("-x")[0].starts_with("a valid label must be an empty string"));
    }
}
