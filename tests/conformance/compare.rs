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

/// The disagreements between two answers for the same object.
pub fn differences(apiserver: &Answer, portcullis: &Answer) -> Vec<Divergence> {
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
            && let Some(entries) = failure_entries(a, p)
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
    what: &'static str,
    apiserver: Option<String>,
    portcullis: Option<String>,
) -> Divergence {
    let class = classify(
        apiserver.as_deref().unwrap_or(""),
        portcullis.as_deref().unwrap_or(""),
    );
    Divergence {
        class,
        what,
        apiserver,
        portcullis,
    }
}

/// A known cause of divergence: the test tolerates these and counts them; anything else fails it.
pub struct KnownCause {
    pub class: &'static str,
    pub issue: &'static str,
    pub reason: &'static str,
    /// Whether a pair of texts (apiserver, Portcullis) is this cause.
    pub matches: fn(&str, &str) -> bool,
}

/// Divergences that vanish when Portcullis is given the policies in reverse order.
pub const POLICY_ORDER: &str = "policy-order";

/// Divergences the test does not know: it fails on them.
pub const NEW: &str = "NEW";

pub const KNOWN: &[KnownCause] = &[
    KnownCause {
        class: "object-validation-after-mutation",
        issue: "#13 (not admission: `check` does not run the registry's object validation)",
        reason: "after a MutatingAdmissionPolicy the apiserver validates the object (e.g. a label \
                 value) and answers 422 `<Kind> \"name\" is invalid: …`; `check` admits the \
                 patched object",
        matches: |apiserver, portcullis| {
            apiserver.starts_with("denied: ")
                && apiserver.contains("\" is invalid: ")
                && !apiserver.contains("denied request")
                && portcullis == "allowed"
        },
    },
    KnownCause {
        class: "which-error-is-reported",
        issue: "#13 (item 4)",
        reason: "when two sub-expressions fail, cel-go and the cel crate report different ones: \
                 for `a && b` cel-go the left operand's error, the cel crate the right one's; in \
                 a comprehension cel-go the error of a later element (its accumulator keeps the \
                 last), the cel crate the first (both in the cel crate's interpreter, not \
                 src/expressions)",
        matches: |apiserver, portcullis| two_known_errors(apiserver, portcullis),
    },
    KnownCause {
        class: "audit-failure-order",
        issue: "#13 (item 4)",
        reason: "the validation_failure audit annotation lists the same failures in another order \
                 of policies: Portcullis in the order of its policy files, the apiserver in the \
                 order its policy source lists them (see policy-order)",
        matches: |apiserver, portcullis| {
            let entries = |text: &str| -> Option<Vec<String>> {
                let (_, list) = text.split_once(": ")?;
                let list = list
                    .replace("\\u003c", "<")
                    .replace("\\u003e", ">")
                    .replace("\\u0026", "&");
                let list: Vec<Value> = serde_json::from_str(&list).ok()?;
                let mut list: Vec<String> = list.iter().map(Value::to_string).collect();
                list.sort();
                Some(list)
            };
            apiserver.contains("validation_failure")
                && entries(apiserver).is_some()
                && entries(apiserver) == entries(portcullis)
        },
    },
    KnownCause {
        class: POLICY_ORDER,
        issue: "#13",
        reason: "the apiserver runs (and reports) the policies matching a request in the order \
                 its policy source lists them, which is neither their names' order nor their \
                 creation order (both orders were seen for two policies created in the same \
                 order); Portcullis uses its file order. Two MutatingAdmissionPolicies setting \
                 one field leave different values; the first denial and the validation_failure \
                 list follow that order. Confirmed per instance by running check again with \
                 the policies reversed",
        matches: |_, _| false,
    },
];

pub fn classify(apiserver: &str, portcullis: &str) -> &'static str {
    KNOWN
        .iter()
        .find(|cause| (cause.matches)(apiserver, portcullis))
        .map_or(NEW, |cause| cause.class)
}

/// Refusals at create the test knows Portcullis does not make yet.
pub const KNOWN_REFUSALS: &[KnownCause] = &[
    KnownCause {
        class: "load-time-type-checking",
        issue: "#13 (items 2 and 3)",
        reason: "the apiserver type-checks every expression when a policy is created (with `object` \
             as dyn) and refuses what does not compile; Portcullis's type checker refuses what it \
             can judge with certainty (docs/cel.md) and loads the rest (constants are folded as \
             cel-go folds them: a `program instantiation failed` refusal not matched here is new)",
        matches: |apiserver, _| {
            apiserver.contains("compilation failed") || apiserver.contains("must evaluate to")
        },
    },
    KnownCause {
        class: "load-time-validation",
        issue: "#13 (item 2)",
        reason: "the apiserver validates the policy's fields at create (enums such as a validation's \
             `reason`, names, limits); Portcullis loads some it refuses",
        matches: |apiserver, _| apiserver.contains("Unsupported value"),
    },
];

pub fn classify_refusal(apiserver: &str) -> &'static str {
    KNOWN_REFUSALS
        .iter()
        .find(|cause| (cause.matches)(apiserver, ""))
        .map_or(NEW, |cause| cause.class)
}

/// Both texts report the same expression failing, each with an error worded as the other side
/// words that error elsewhere: which of two failing sub-expressions is reported.
fn two_known_errors(apiserver: &str, portcullis: &str) -> bool {
    const WORDED_ALIKE: [&str; 6] = [
        "no such key: ",
        "index out of range: ",
        "type conversion error from ",
        "no such overload",
        "composited variable ",
        "No Major.Minor.Patch",
    ];
    let split = |text: &str| {
        text.split_once(" resulted in error: ")
            .map(|(head, error)| (head.to_owned(), error.to_owned()))
    };
    match (split(apiserver), split(portcullis)) {
        (Some((a_head, a_error)), Some((p_head, p_error))) => {
            a_head == p_head
                && a_error != p_error
                && WORDED_ALIKE.iter().any(|w| a_error.starts_with(w))
                && WORDED_ALIKE.iter().any(|w| p_error.starts_with(w))
        }
        _ => false,
    }
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
fn failure_entries(apiserver: &str, portcullis: &str) -> Option<Vec<Divergence>> {
    let unescaped = apiserver
        .replace("\\u003c", "<")
        .replace("\\u003e", ">")
        .replace("\\u0026", "&");
    let a: Vec<Value> = serde_json::from_str(&unescaped).ok()?;
    let p: Vec<Value> = serde_json::from_str(portcullis).ok()?;
    let whole = |class: &'static str| Divergence {
        class,
        what: "audit",
        apiserver: Some(apiserver.to_owned()),
        portcullis: Some(portcullis.to_owned()),
    };
    let sorted = |list: &[Value]| {
        let mut list: Vec<String> = list.iter().map(Value::to_string).collect();
        list.sort();
        list
    };
    if a == p {
        // The same entries written differently (Portcullis escapes as Go's encoding/json).
        return Some(vec![whole(NEW)]);
    }
    if sorted(&a) == sorted(&p) {
        return Some(vec![whole("audit-failure-order")]);
    }
    let id = |entry: &Value| (entry["policy"].clone(), entry["expressionIndex"].clone());
    let message = |entry: &Value| entry["message"].as_str().unwrap_or_default().to_owned();
    let mut out = Vec::new();
    for entry in &a {
        match p.iter().find(|other| id(other) == id(entry)) {
            Some(other) if other == entry => {}
            Some(other) => out.push(divergence(
                "audit",
                Some(message(entry)),
                Some(message(other)),
            )),
            None => out.push(divergence("audit", Some(message(entry)), None)),
        }
    }
    for entry in &p {
        if !a.iter().any(|other| id(other) == id(entry)) {
            out.push(divergence("audit", None, Some(message(entry))));
        }
    }
    Some(out)
}
