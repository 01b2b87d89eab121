//! What the apiserver answered, what Portcullis answered, and how a disagreement is classified.

use std::collections::BTreeMap;

use serde_json::Value;

/// One side's answer for one object.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize, PartialEq)]
pub struct Answer {
    pub allowed: bool,
    /// The denial message (the apiserver's without its `<resource> "<name>" is forbidden: `
    /// prefix), when denied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// HTTP status code and reason of a denial (the apiserver's; `check` does not report one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<u16>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default)]
    pub warnings: Vec<String>,
    /// Audit annotations (the apiserver's keys written as Portcullis writes them, see
    /// `audit_key`); empty in fixtures, which do not record them.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub audit: BTreeMap<String, String>,
    /// The admitted object (mutating policies only), without what differs between two creates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object: Option<Value>,
}

/// The apiserver's answer from a dry-run create: status, body and `Warning` headers.
pub fn apiserver_answer(
    status: u16,
    body: &Value,
    warnings: Vec<String>,
    mutating: bool,
) -> Answer {
    if (200..300).contains(&status) {
        return Answer {
            allowed: true,
            warnings,
            object: mutating.then(|| comparable(body.clone())),
            ..Answer::default()
        };
    }
    let message = body["message"].as_str().unwrap_or_default();
    let message = match message.split_once(" is forbidden: ") {
        Some((_, rest)) => rest.to_owned(),
        None => message.to_owned(),
    };
    Answer {
        allowed: false,
        message: Some(message),
        code: Some(status),
        reason: body["reason"].as_str().map(str::to_owned),
        warnings,
        audit: BTreeMap::new(),
        object: None,
    }
}

/// Portcullis's answer from one `check --output json` result.
pub fn portcullis_answer(result: &Value, input: &Value, mutating: bool) -> Answer {
    let allowed = result["allowed"].as_bool().unwrap_or(false);
    let warnings = result["warnings"]
        .as_array()
        .map(|w| {
            w.iter()
                .filter_map(|w| w.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    let message = (!allowed).then(|| {
        result["violations"][0]["message"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    });
    let audit = result["auditAnnotations"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(key, value)| (key.clone(), value.as_str().unwrap_or_default().to_owned()))
        .collect();
    let object = (allowed && mutating).then(|| match &result["patchedObject"] {
        Value::Null => comparable(input.clone()),
        object => comparable(object.clone()),
    });
    Answer {
        allowed,
        message,
        warnings,
        audit,
        object,
        ..Answer::default()
    }
}

pub use crate::common::control_plane::comparable;

/// One disagreement on one object.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Divergence {
    pub class: &'static str,
    pub what: &'static str,
    pub apiserver: Option<String>,
    pub portcullis: Option<String>,
}

/// What a cause sees besides the two texts: the apiserver's status when it denied, and whether
/// MutatingAdmissionPolicies judged the object (an admitted object is compared on either side).
#[derive(Debug, Clone, Default)]
struct Context {
    status: Option<(u16, String)>,
    mutating: bool,
}

/// The disagreements between two answers for the same object.
pub fn differences(apiserver: &Answer, portcullis: &Answer) -> Vec<Divergence> {
    let context = Context {
        status: apiserver
            .code
            .map(|code| (code, apiserver.reason.clone().unwrap_or_default())),
        mutating: apiserver.object.is_some() || portcullis.object.is_some(),
    };
    let divergence = |what, a, p| divergence(&context, what, a, p);
    let mut out = Vec::new();
    if apiserver.allowed != portcullis.allowed {
        let describe = |answer: &Answer| {
            Some(match &answer.message {
                Some(message) => format!("denied: {message}"),
                None => "allowed".to_owned(),
            })
        };
        out.push(divergence(
            "decision",
            describe(apiserver),
            describe(portcullis),
        ));
    } else if apiserver.message != portcullis.message {
        out.push(divergence(
            "message",
            apiserver.message.clone(),
            portcullis.message.clone(),
        ));
    }
    // Warnings: a multiset; what is left on each side is paired by policy and binding.
    let mut left: Vec<&String> = apiserver.warnings.iter().collect();
    let mut right: Vec<&String> = Vec::new();
    for warning in &portcullis.warnings {
        match left.iter().position(|w| *w == warning) {
            Some(i) => {
                left.remove(i);
            }
            // A warning given twice where the apiserver gives it once (Portcullis keeps one of
            // identical warnings, as the apiserver's recorder does).
            None if apiserver.warnings.contains(warning) => out.push(Divergence {
                class: NEW,
                what: "warning",
                apiserver: None,
                portcullis: Some(warning.clone()),
            }),
            None => right.push(warning),
        }
    }
    let origin = |w: &str| w.split("': ").next().unwrap_or("").to_owned();
    let mut by_origin: BTreeMap<String, (Vec<&String>, Vec<&String>)> = BTreeMap::new();
    for w in left {
        by_origin.entry(origin(w)).or_default().0.push(w);
    }
    for w in right {
        by_origin.entry(origin(w)).or_default().1.push(w);
    }
    for (_, (a, mut p)) in by_origin {
        // The same expression failing differently on both sides is one divergence.
        let head = |w: &str| w.split(" resulted in error: ").next().map(str::to_owned);
        let mut a_rest = Vec::new();
        for warning in a {
            match p.iter().position(|other| {
                other.contains(" resulted in error: ") && head(other) == head(warning)
            }) {
                Some(i) => {
                    let other = p.remove(i);
                    out.push(divergence(
                        "warning",
                        Some(warning.to_string()),
                        Some(other.to_string()),
                    ));
                }
                None => a_rest.push(warning),
            }
        }
        let a = a_rest;
        for i in 0..a.len().max(p.len()) {
            out.push(divergence(
                "warning",
                a.get(i).map(|w| w.to_string()),
                p.get(i).map(|w| w.to_string()),
            ));
        }
    }
    // Audit annotations: Portcullis writes the key `policy/key` as `policy.key` (a webhook's
    // annotation keys are prefixed by the apiserver), a documented difference of form.
    let apiserver_audit: BTreeMap<String, &String> = apiserver
        .audit
        .iter()
        .map(|(key, value)| (audit_key(key), value))
        .collect();
    let keys: std::collections::BTreeSet<&String> = apiserver_audit
        .keys()
        .chain(portcullis.audit.keys())
        .collect();
    for key in keys {
        let (a, p) = (apiserver_audit.get(key).copied(), portcullis.audit.get(key));
        if let (Some(a), Some(p)) = (a, p)
            && a != p
            && let Some(entries) = failure_entries(&context, a, p)
        {
            out.extend(entries);
            continue;
        }
        if a != p {
            out.push(divergence(
                "audit",
                a.map(|v| format!("{key}: {v}")),
                p.map(|v| format!("{key}: {v}")),
            ));
        }
    }
    if apiserver.allowed && portcullis.allowed && apiserver.object != portcullis.object {
        let (a, p) = (
            apiserver.object.clone().unwrap_or_default(),
            portcullis.object.clone().unwrap_or_default(),
        );
        let (pa, pp) = first_difference(&a, &p, String::new());
        out.push(divergence("object", Some(pa), Some(pp)));
    }
    out
}

/// The first differing path and the values there, as `path: value`.
fn first_difference(a: &Value, b: &Value, path: String) -> (String, String) {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let keys: std::collections::BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            for key in keys {
                let (va, vb) = (
                    x.get(key).unwrap_or(&Value::Null),
                    y.get(key).unwrap_or(&Value::Null),
                );
                if va != vb {
                    return first_difference(va, vb, format!("{path}/{key}"));
                }
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (va, vb)) in x.iter().zip(y).enumerate() {
                if va != vb {
                    return first_difference(va, vb, format!("{path}/{i}"));
                }
            }
        }
        _ => {}
    }
    (format!("{path}: {a}"), format!("{path}: {b}"))
}

fn divergence(
    context: &Context,
    what: &'static str,
    apiserver: Option<String>,
    portcullis: Option<String>,
) -> Divergence {
    let class = classify(&Item {
        what,
        apiserver: apiserver.as_deref(),
        portcullis: portcullis.as_deref(),
        status: context
            .status
            .as_ref()
            .map(|(code, reason)| (*code, reason.as_str())),
        mutating: context.mutating,
    });
    Divergence {
        class,
        what,
        apiserver,
        portcullis,
    }
}

/// One divergent item as a cause sees it.
#[derive(Debug, Clone, Copy)]
pub struct Item<'a> {
    /// What differs: `decision`, `message`, `warning`, `audit`, `object`, or `refusal` (a policy
    /// the apiserver refused at create and `check` loaded).
    pub what: &'a str,
    pub apiserver: Option<&'a str>,
    pub portcullis: Option<&'a str>,
    /// The apiserver's status code and reason, when it denied the request.
    pub status: Option<(u16, &'a str)>,
    /// Whether MutatingAdmissionPolicies judged the object.
    pub mutating: bool,
}

/// A known cause of divergence: the test tolerates these and counts them (against
/// tests/fixtures/conformance/known-divergences.json for the CI seed set); anything else fails
/// it.
pub struct KnownCause {
    pub class: &'static str,
    pub issue: &'static str,
    pub reason: &'static str,
    /// Whether a divergent item is this cause: the shape the cause gives, and nothing wider.
    pub matches: fn(&Item<'_>) -> bool,
}

/// Divergences of the apiserver's order of policies: assigned by the harness, which confirms
/// each against Portcullis's own answers (see its `KnownCause`), never by the texts alone.
pub const POLICY_ORDER: &str = "policy-order";

/// Divergences the test does not know: it fails on them.
pub const NEW: &str = "NEW";

/// The classes whose count in a run depends on the order in which the apiserver runs the
/// policies (Go's map order, random): their record is a range.
pub const ORDER_DEPENDENT: [&str; 2] = ["audit-failure-order", POLICY_ORDER];

/// What differs when two MutatingAdmissionPolicies run in the other order (policy-order).
pub const ORDER_SHAPES: [&str; 3] = ["object", "decision", "message"];

pub const KNOWN: &[KnownCause] = &[
    KnownCause {
        class: "object-validation-after-mutation",
        issue: "#13 (not admission: `check` does not run the registry's object validation)",
        reason: "after a MutatingAdmissionPolicy the apiserver validates the object and refuses \
                 a field a mutation set (a label value, say) with 422 `Invalid`: `<Kind> \"name\" \
                 is invalid: metadata.labels: Invalid value: …`; `check` admits the patched \
                 object. Matched: the decision of an object MutatingAdmissionPolicies judged, 422 \
                 Invalid from the apiserver with that message on a field the generated mutations \
                 set (labels, annotations, data, replicas, minReadySeconds, a container's image), \
                 allowed by Portcullis",
        matches: |item| {
            item.what == "decision"
                && item.mutating
                && item.status == Some((422, "Invalid"))
                && item.portcullis == Some("allowed")
                && item
                    .apiserver
                    .and_then(|a| a.strip_prefix("denied: "))
                    .is_some_and(|message| OBJECT_INVALID.is_match(message))
        },
    },
    KnownCause {
        class: "which-error-is-reported",
        issue: "#13 (item 4)",
        reason: "when two sub-expressions fail, cel-go and the cel crate report different ones: \
                 for `a && b` cel-go the left operand's error, the cel crate the right one's; in \
                 a comprehension cel-go the error of a later element (its accumulator keeps the \
                 last), the cel crate the first (both in the cel crate's interpreter, not \
                 src/expressions); in `all` and `exists`, whose accumulator is the left operand \
                 of `&&`/`||`, cel-go keeps the first element's error and the cel crate the \
                 last. Matched: the same expression of the same policy failing on both sides, \
                 the expression holding `&&`, `||` or a comprehension (or both errors coming from \
                 one variable it reads), each error a whole runtime error as cel-go words it \
                 (`no such key: k`, `index out of range: n`, `insert failed: key k already \
                 exists`, `type conversion error from 'a' to 'b'`, `no such overload…`, `No \
                 Major.Minor.Patch elements found`, `composited variable \"v\" fails to \
                 evaluate: <one of these>`) about something the expression reads (a key it \
                 names or a computed index; an index, `substring` or `charAt` for a range; \
                 `transformMapEntry` for a key inserted twice; the conversion's function; \
                 `semver`; the variable)",
        matches: two_known_errors,
    },
    KnownCause {
        class: "audit-failure-order",
        issue: "#13 (item 4)",
        reason: "the validation_failure audit annotation lists the same failures in another order \
                 of policies: Portcullis in the order of its policy files, the apiserver in the \
                 order its policy source lists them (see policy-order). Matched: both lists hold \
                 the same entries, each policy's entries together and in the same order on both \
                 sides, only the order of the policies differing",
        matches: |item| {
            let lists = (
                item.apiserver.and_then(failure_list),
                item.portcullis.and_then(failure_list),
            );
            item.what == "audit"
                && matches!(lists, (Some(a), Some(p)) if sorted(&a) == sorted(&p) && policies_reordered(&a, &p))
        },
    },
    KnownCause {
        class: POLICY_ORDER,
        issue: "#13",
        reason: "the apiserver runs (and reports) the policies matching a request in the order \
                 its policy source lists them, which is Go's map order (random, and not the same \
                 from one run to the next); Portcullis uses its file order. Two \
                 MutatingAdmissionPolicies setting one field leave different values, or another \
                 one fails first; of several denying ValidatingAdmissionPolicies (a Deny \
                 binding's, and an auditAnnotation failing under failurePolicy Fail, which denies \
                 whatever the binding's actions) another one's denial is reported. Confirmed per \
                 object by the harness, not by the texts: for ValidatingAdmissionPolicies, the \
                 denial message differs and the apiserver's is the first denial of another policy \
                 Portcullis denies for too; for two MutatingAdmissionPolicies, the object, \
                 decision or message differ and `check` with the policies in reverse order \
                 answers as the apiserver did, with no other difference",
        matches: |_| false,
    },
];

pub fn classify(item: &Item<'_>) -> &'static str {
    KNOWN
        .iter()
        .find(|cause| (cause.matches)(item))
        .map_or(NEW, |cause| cause.class)
}

/// A 422 answer to an object that a mutation made invalid: the registry's field errors on what
/// the generated mutations set (tests/conformance/grammar.rs, `mutation`).
static OBJECT_INVALID: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
    regex::Regex::new(
        r#"^(ConfigMap|Deployment\.apps) "[a-z0-9]([-a-z0-9.]*[a-z0-9])?" is invalid: \[?(metadata\.labels|metadata\.annotations|data\[[^\]]+\]|data|spec\.replicas|spec\.minReadySeconds|spec\.template\.spec\.containers\[[0-9]+\]\.image): (Invalid value|Too long): "#,
    )
    .unwrap()
});

/// Refusals at create the test knows Portcullis does not make yet. The apiserver's text is the
/// errors kubectl prints after `"<name>" is invalid: ` (one, or `\n* ` before each of several).
pub const KNOWN_REFUSALS: &[KnownCause] = &[
    KnownCause {
        class: "load-time-type-checking",
        issue: "#13 (items 2 and 3)",
        reason: "the apiserver type-checks every expression when a policy is created (with `object` \
             as dyn) and refuses what does not compile; Portcullis's type checker refuses what it \
             can judge with certainty (docs/cel.md) and loads the rest, where a type it does not \
             know is dyn. Matched: every error is on an expression field and is a type error \
             cel-go's checker gives (`found no matching overload for …`, `expected type …`, \
             `undefined field …`, `… does not support field selection`, `… cannot be range of \
             a comprehension`; a format() clause given an object type, named by the \
             apiserver's per-run type name, `Pod123.spec`) or an output type (`must evaluate \
             to T but got U`, U not dyn); a parse error, an undeclared reference, a constant \
             folded at create (`program instantiation failed`), another format() error or a \
             field's validation is new",
        matches: |item| {
            item.what == "refusal"
                && item.apiserver.is_some_and(|text| {
                    let errors = refusal_errors(text);
                    !errors.is_empty() && errors.iter().all(|e| type_error(e))
                })
        },
    },
    KnownCause {
        class: "load-time-validation",
        issue: "#13 (item 2)",
        reason: "the apiserver validates the policy's fields at create (enums such as a validation's \
             `reason`); Portcullis loads some it refuses. Matched: every error is an enum's \
             `spec.<field>: Unsupported value: \"v\": supported values: …`",
        matches: |item| {
            item.what == "refusal"
                && item.apiserver.is_some_and(|text| {
                    let errors = refusal_errors(text);
                    !errors.is_empty() && errors.iter().all(|e| UNSUPPORTED_VALUE.is_match(e))
                })
        },
    },
];

pub fn classify_refusal(apiserver: &str) -> &'static str {
    let item = Item {
        what: "refusal",
        apiserver: Some(apiserver),
        portcullis: Some("loaded"),
        status: None,
        mutating: false,
    };
    KNOWN_REFUSALS
        .iter()
        .find(|cause| (cause.matches)(&item))
        .map_or(NEW, |cause| cause.class)
}

/// The errors of kubectl's text after `is invalid: `: one, a `* ` item each when several (a
/// refusal alone), or `[a, b]` (the apiserver's message, when kubectl reports several objects'
/// errors); none for an empty text.
pub fn refusal_errors(text: &str) -> Vec<&str> {
    let text = text.trim_end_matches('\n');
    if text.is_empty() {
        return Vec::new();
    }
    if let Some(items) = text.strip_prefix("\n* ") {
        return items.split("\n* ").collect();
    }
    if let Some(items) = text.strip_prefix('[').and_then(|t| t.strip_suffix(']')) {
        // Each error starts with its field path.
        let mut errors = Vec::new();
        let mut start = 0;
        for (at, _) in items.match_indices(", ") {
            let next = &items[at + 2..];
            if next.starts_with("spec.") || next.starts_with("metadata.") {
                errors.push(&items[start..at]);
                start = at + 2;
            }
        }
        errors.push(&items[start..]);
        return errors;
    }
    vec![text]
}

/// An error on an expression field that is a type error of cel-go's checker (every `ERROR:` it
/// lists), or an output type the apiserver refuses where it knows the type (`… but got dyn`
/// it would refuse here too).
fn type_error(error: &str) -> bool {
    static FIELD: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(
            r#"(?s)^spec\.(validations\[[0-9]+\]\.(expression|messageExpression)|matchConditions\[[0-9]+\]\.expression|variables\[[0-9]+\]\.expression|auditAnnotations\[[0-9]+\]\.valueExpression|mutations\[[0-9]+\]\.(jsonPatch|applyConfiguration)\.expression): Invalid value: "(?:[^"\\]|\\.)*": (.*)$"#,
        )
        .unwrap()
    });
    static CHECKER: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(
            r"^ERROR: <input>:[0-9]+:[0-9]+: (found no matching overload for '[^']+' applied to '.*'|expected type '[^']+' but found '[^']+'|expected type of field '[^']+' is '[^']*' but provided type is '[^']+'|undefined field '[^']+'|type '[^']+' does not support field selection|expression of type '[^']+' cannot be range of a comprehension \(must be list, map, or dynamic\)|error during formatting: [a-z-]+ clause can only be used on [^,]+, was given [A-Za-z]+[0-9]+(\.[A-Za-z0-9_]+)*)$",
        )
        .unwrap()
    });
    static OUTPUT: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(r"^must evaluate to .+ but got (.+)$").unwrap()
    });
    let Some(found) = FIELD.captures(error) else {
        return false;
    };
    let rest = found.get(4).map_or("", |m| m.as_str());
    if let Some(output) = OUTPUT.captures(rest) {
        return &output[1] != "dyn";
    }
    let Some(listed) = rest.strip_prefix("compilation failed: ") else {
        return false;
    };
    let mut errors = listed.lines().filter(|line| !line.starts_with(" | "));
    let first = errors.next();
    first.is_some()
        && first
            .into_iter()
            .chain(errors)
            .all(|line| CHECKER.is_match(line))
}

/// An enum field's value the apiserver does not support.
static UNSUPPORTED_VALUE: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
    regex::Regex::new(
        r#"^spec\.[A-Za-z]+(\[[0-9]+\])?(\.[A-Za-z]+(\[[0-9]+\])?)*: Unsupported value: "[^"]*": supported values: "[^"]*"(, "[^"]*")*$"#,
    )
    .unwrap()
});

/// Both texts report the same expression failing, each with a whole runtime error as cel-go
/// words it, about something the expression reads, where the expression has two places that
/// can fail (see `which-error-is-reported`).
fn two_known_errors(item: &Item<'_>) -> bool {
    let (Some(apiserver), Some(portcullis)) = (item.apiserver, item.portcullis) else {
        return false;
    };
    let (Some((a_head, a_error)), Some((p_head, p_error))) = (
        apiserver.split_once(" resulted in error: "),
        portcullis.split_once(" resulted in error: "),
    ) else {
        return false;
    };
    let Some(expression) = a_head
        .split_once("expression '")
        .and_then(|(_, rest)| rest.strip_suffix('\''))
    else {
        return false;
    };
    if a_head != p_head || a_error == p_error {
        return false;
    }
    let (Some(a), Some(p)) = (
        runtime_error(Some(expression), a_error),
        runtime_error(Some(expression), p_error),
    ) else {
        return false;
    };
    // Two places that can fail: `&&`, `||`, a comprehension; or both errors from one variable
    // the expression reads (the choice made inside the variable's own expression).
    let two_places = ["&&", "||"]
        .iter()
        .chain(COMPREHENSIONS)
        .any(|construct| expression.contains(construct));
    let one_variable = matches!((a, p), (Some(x), Some(y)) if x == y);
    two_places || one_variable
}

const COMPREHENSIONS: &[&str] = &[
    ".all(",
    ".exists(",
    ".exists_one(",
    ".existsOne(",
    ".map(",
    ".filter(",
    ".transformList(",
    ".transformMap(",
    ".transformMapEntry(",
];

/// A whole runtime error cel-go words so, about something `expression` reads (`None`: the
/// variable's expression, not in the text; the shape alone): `Some(Some(variable))` for a
/// composited variable's error, `Some(None)` for another, `None` when it is neither.
fn runtime_error<'e>(expression: Option<&str>, error: &'e str) -> Option<Option<&'e str>> {
    static SHAPES: std::sync::LazyLock<[regex::Regex; 8]> = std::sync::LazyLock::new(|| {
        [
            r#"^no such key: ([^'"\s]\S*)$"#,
            r"^insert failed: key \S+ already exists$",
            r"^index out of range: -?[0-9]+$",
            r"^type conversion error from '[A-Za-z0-9_.]+' to '([a-z]+)'$",
            r"^no such overload(: \S+)?$",
            r"^No Major\.Minor\.Patch elements found$",
            r#"^composited variable "([A-Za-z_][A-Za-z0-9_]*)" fails to evaluate: (.+)$"#,
            // An index by a computed key (`object.data[k]`).
            r"\[[A-Za-z_]",
        ]
        .map(|shape| regex::Regex::new(shape).unwrap())
    });
    let [
        key,
        insert,
        index,
        conversion,
        overload,
        semver,
        variable,
        computed,
    ] = &*SHAPES;
    let reads = |test: &dyn Fn(&str) -> bool| expression.is_none_or(test);
    if let Some(found) = key.captures(error) {
        // The key is named in the expression, or the expression indexes by a computed key.
        let k = &found[1];
        return reads(&|e: &str| {
            [format!(".{k}"), format!("'{k}'"), format!("\"{k}\"")]
                .iter()
                .any(|form| e.contains(form.as_str()))
                || computed.is_match(e)
        })
        .then_some(None);
    }
    if insert.is_match(error) {
        // Two entries of one transformMapEntry with the same key.
        return reads(&|e: &str| e.contains(".transformMapEntry(")).then_some(None);
    }
    if index.is_match(error) {
        // A list index, or a position in a string.
        return reads(&|e: &str| {
            e.contains('[') || e.contains(".substring(") || e.contains(".charAt(")
        })
        .then_some(None);
    }
    if let Some(found) = conversion.captures(error) {
        let call = format!("{}(", &found[1]);
        return reads(&|e: &str| e.contains(&call)).then_some(None);
    }
    if overload.is_match(error) {
        return Some(None);
    }
    if semver.is_match(error) {
        return reads(&|e: &str| e.contains("semver(")).then_some(None);
    }
    let found = variable.captures(error)?;
    let name = found.get(1)?.as_str();
    let read = reads(&|e: &str| e.contains(&format!("variables.{name}")));
    let inner = runtime_error(None, found.get(2)?.as_str()).is_some();
    (read && inner).then_some(Some(name))
}

/// An audit annotation key as Portcullis writes it (`annotation_key` in the engine): `/` and
/// other characters a webhook's key may not hold become `.`.
pub fn audit_key(key: &str) -> String {
    let key: String = key
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '.'
            }
        })
        .take(63)
        .collect();
    key.trim_matches(|c: char| !c.is_ascii_alphanumeric())
        .to_owned()
}

/// The validation_failure lists of both sides, compared entry by entry (by policy and
/// expression index): `None` when either is not such a list.
fn failure_entries(
    context: &Context,
    apiserver: &str,
    portcullis: &str,
) -> Option<Vec<Divergence>> {
    let a = failure_list(apiserver)?;
    let p = failure_list(portcullis)?;
    let whole = || {
        divergence(
            context,
            "audit",
            Some(apiserver.to_owned()),
            Some(portcullis.to_owned()),
        )
    };
    if a == p {
        // The same entries written differently (Portcullis escapes as Go's encoding/json).
        let mut same = whole();
        same.class = NEW;
        return Some(vec![same]);
    }
    let id = |entry: &Value| (entry["policy"].clone(), entry["expressionIndex"].clone());
    let ids = |list: &[Value], other: &[Value]| -> Vec<(Value, Value)> {
        list.iter()
            .map(id)
            .filter(|i| other.iter().any(|o| id(o) == *i))
            .collect()
    };
    if ids(&a, &p) == ids(&p, &a) {
        // The same failures in the same order: compared one by one below.
    } else if sorted(&a) == sorted(&p) {
        // The same failures in another order: a cause only as whole policies reordered.
        return Some(vec![whole()]);
    } else if !policies_reordered(&ids(&a, &p), &ids(&p, &a)) {
        // Other failures, and the common ones in another order than whole policies give.
        let mut reordered = whole();
        reordered.class = NEW;
        return Some(vec![reordered]);
    }
    let message = |entry: &Value| entry["message"].as_str().unwrap_or_default().to_owned();
    let mut out = Vec::new();
    for entry in &a {
        match p.iter().find(|other| id(other) == id(entry)) {
            Some(other) if other == entry => {}
            Some(other) => out.push(divergence(
                context,
                "audit",
                Some(message(entry)),
                Some(message(other)),
            )),
            None => out.push(divergence(context, "audit", Some(message(entry)), None)),
        }
    }
    for entry in &p {
        if !a.iter().any(|other| id(other) == id(entry)) {
            out.push(divergence(context, "audit", None, Some(message(entry))));
        }
    }
    Some(out)
}

/// A validation_failure annotation's list (the apiserver's `\u003c`, `\u003e`, `\u0026` read
/// as the characters).
fn failure_list(text: &str) -> Option<Vec<Value>> {
    let unescaped = text
        .replace("\\u003c", "<")
        .replace("\\u003e", ">")
        .replace("\\u0026", "&");
    serde_json::from_str(&unescaped).ok()
}

fn sorted(list: &[Value]) -> Vec<String> {
    let mut list: Vec<String> = list.iter().map(Value::to_string).collect();
    list.sort();
    list
}

/// Whether two lists hold the same items in runs by policy (each policy's items together, in
/// the same order within the run), the runs in another order: what the apiserver's order of
/// policies does to the list of failures.
fn policies_reordered<T: PartialEq + Clone + PolicyOf>(a: &[T], b: &[T]) -> bool {
    let runs = |list: &[T]| -> Option<Vec<Vec<T>>> {
        let mut runs: Vec<Vec<T>> = Vec::new();
        for item in list {
            match runs.last_mut() {
                Some(run) if run[0].policy_of() == item.policy_of() => run.push(item.clone()),
                _ => {
                    // A policy's failures in two runs: not an order of policies.
                    if runs
                        .iter()
                        .any(|run| run[0].policy_of() == item.policy_of())
                    {
                        return None;
                    }
                    runs.push(vec![item.clone()]);
                }
            }
        }
        Some(runs)
    };
    let (Some(ra), Some(rb)) = (runs(a), runs(b)) else {
        return false;
    };
    a != b
        && ra.len() == rb.len()
        && ra.iter().all(|run| rb.contains(run))
        && rb.iter().all(|run| ra.contains(run))
}

/// The policy an item of a validation_failure list belongs to.
trait PolicyOf {
    fn policy_of(&self) -> Value;
}

impl PolicyOf for Value {
    fn policy_of(&self) -> Value {
        serde_json::json!([self["policy"], self["binding"]])
    }
}

impl PolicyOf for (Value, Value) {
    fn policy_of(&self) -> Value {
        self.0.clone()
    }
}
