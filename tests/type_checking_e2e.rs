//! Differential test of ValidatingAdmissionPolicy type checking: the warnings the real
//! control plane writes into each policy's `status.typeChecking.expressionWarnings` (the
//! kube-controller-manager's `validatingadmissionpolicy-status-controller`, which runs the
//! apiserver library's `TypeChecker`) against what Portcullis computes offline for the same
//! files (`Engine::type_checking`).
//!
//! The fixtures are `tests/fixtures/e2e/type-checking/policies/`: the CRDs of a custom resource
//! and its paramKind (`crds.yaml`) and small policies, each probing one thing (a YAML comment
//! above each says what). `observed.json` beside them is the control plane's answer for every
//! policy, recorded by the live test with `PORTCULLIS_E2E_WRITE_OBSERVED=1`:
//!
//! - `type_checking_agrees_with_the_controller_manager` (live; needs `PORTCULLIS_E2E_BIN`, with
//!   `kube-controller-manager` in it): starts etcd, kube-apiserver and a controller manager
//!   with only that controller, applies the fixtures, waits until every policy's
//!   `status.observedGeneration` reaches its `metadata.generation`, and compares policy by
//!   policy; it also checks that `observed.json` is still what the control plane says.
//! - `type_checking_agrees_with_the_recorded_controller_manager` (offline, always runs):
//!   the same comparison against `observed.json`.
//!
//! The type checker names each object type after its kind and `time.Now().Nanosecond()`
//! (`'(Pod795597975.spec.containers.@idx, string)'`): both sides, and `observed.json`, have
//! that number replaced with `#` (`Pod#.spec.containers.@idx`).

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Duration;

use common::control_plane::{ControlPlane, e2e_bin, eventually};
use common::fixture;
use portcullis::engine::{Engine, ExpressionWarning};
use serde_json::{Value, json};

const POLICIES: &str = "e2e/type-checking/policies";
const OBSERVED: &str = "e2e/type-checking/observed.json";
const CRDS: &str = "e2e/type-checking/policies/crds.yaml";
/// The custom resource group of `crds.yaml` and the kinds its OpenAPI v3 document must show
/// before policies naming them are checked: the status controller resolves custom-resource
/// schemas through OpenAPI v3 discovery and silently skips a kind it cannot resolve.
const CRD_GROUP_VERSION: &str = "typecheck.portcullis.example/v1";
const CRD_KINDS: [&str; 2] = ["Widget", "WidgetClass"];
const STATUS_CONTROLLER: &str = "validatingadmissionpolicy-status-controller";
const VAP: &str = "validatingadmissionpolicy.admissionregistration.k8s.io/";

type Warnings = BTreeMap<String, Vec<ExpressionWarning>>;

#[test]
fn type_checking_agrees_with_the_controller_manager() {
    let Some(bin) = e2e_bin() else { return };
    let (version, statuses) = observe(&bin);
    let recorded = recorded_file(&version, &statuses);
    let observed_path = fixture(OBSERVED);
    let mut stale = None;
    if std::env::var_os("PORTCULLIS_E2E_WRITE_OBSERVED").is_some() {
        std::fs::write(&observed_path, &recorded).unwrap();
        eprintln!("e2e: wrote {}", observed_path.display());
    } else if std::fs::read_to_string(&observed_path).ok().as_deref() != Some(recorded.as_str()) {
        stale = Some(format!(
            "{} is not what the control plane says now: rerun this test with \
             PORTCULLIS_E2E_WRITE_OBSERVED=1 and review the diff",
            observed_path.display()
        ));
    }
    let from_apiserver = warnings_of(&statuses);
    let report = compare(&from_apiserver, &portcullis_warnings());
    let warned = from_apiserver.values().filter(|w| !w.is_empty()).count();
    eprintln!(
        "e2e: kube-controller-manager {version} type-checked {} policies ({warned} with \
         warnings)",
        from_apiserver.len()
    );
    assert!(
        report.is_none() && stale.is_none(),
        "{}{}",
        report.unwrap_or_default(),
        stale.unwrap_or_default()
    );
}

#[test]
fn type_checking_agrees_with_the_recorded_controller_manager() {
    let text = String::from_utf8(common::read_fixture(OBSERVED)).unwrap();
    let recorded: Value = serde_json::from_str(&text).unwrap();
    let statuses: BTreeMap<String, Value> =
        serde_json::from_value(recorded["policies"].clone()).unwrap();
    let from_apiserver = warnings_of(&statuses);
    if let Some(report) = compare(&from_apiserver, &portcullis_warnings()) {
        panic!(
            "against {OBSERVED} (kube-controller-manager {}; after a change to the policies, \
             record it again: see tests/type_checking_e2e.rs):\n{report}",
            recorded["kubernetes"].as_str().unwrap_or("?")
        );
    }
}

/// Runs the fixtures through a real control plane; returns its version and each policy's
/// `status` as the status controller wrote it, by policy name.
fn observe(bin: &Path) -> (String, BTreeMap<String, Value>) {
    let cluster = ControlPlane::start(bin);
    let version = cluster.git_version();
    let crds = fixture(CRDS).display().to_string();
    cluster.kubectl_ok(&["apply", "-f", &crds]);
    cluster.kubectl_ok(&[
        "wait",
        "--for=condition=Established",
        "--timeout=60s",
        "-f",
        &crds,
    ]);
    eventually(
        "the custom resources' schemas in OpenAPI v3",
        Duration::from_secs(60),
        || {
            let output = cluster.kubectl(&[
                "get",
                "--raw",
                &format!("/openapi/v3/apis/{CRD_GROUP_VERSION}"),
            ]);
            let document = String::from_utf8_lossy(&output.stdout);
            let missing: Vec<&str> = CRD_KINDS
                .into_iter()
                .filter(|kind| !document.contains(&format!("\"kind\":\"{kind}\"")))
                .collect();
            if missing.is_empty() {
                Ok(())
            } else {
                Err(format!(
                    "missing {missing:?}; {}",
                    common::control_plane::stderr(&output)
                ))
            }
        },
    );

    let mut controller_manager = cluster.start_controller_manager(&[STATUS_CONTROLLER]);
    let applied = cluster.kubectl_ok(&[
        "apply",
        "-o",
        "name",
        "-f",
        &fixture(POLICIES).display().to_string(),
    ]);
    let names: BTreeSet<String> = applied
        .lines()
        .filter_map(|line| line.strip_prefix(VAP))
        .map(str::to_owned)
        .collect();
    assert!(names.len() > 20, "too few policies applied: {applied}");

    let mut statuses = BTreeMap::new();
    eventually(
        "every policy's status.observedGeneration to reach its generation",
        Duration::from_secs(120),
        || {
            controller_manager.running()?;
            let list: Value = serde_json::from_str(&cluster.kubectl_ok(&[
                "get",
                "validatingadmissionpolicies",
                "-o",
                "json",
            ]))
            .map_err(|e| e.to_string())?;
            statuses.clear();
            let mut pending = Vec::new();
            for policy in list["items"].as_array().into_iter().flatten() {
                let name = policy["metadata"]["name"].as_str().unwrap_or_default();
                if !names.contains(name) {
                    continue;
                }
                let generation = &policy["metadata"]["generation"];
                if generation.is_null() || policy["status"]["observedGeneration"] != *generation {
                    pending.push(name.to_owned());
                }
                statuses.insert(name.to_owned(), without_type_numbers(&policy["status"]));
            }
            pending.extend(names.iter().filter(|n| !statuses.contains_key(*n)).cloned());
            if pending.is_empty() {
                Ok(())
            } else {
                Err(format!(
                    "not yet observed: {pending:?}; controller manager log:\n{}",
                    controller_manager.log_tail(10)
                ))
            }
        },
    );
    (version, statuses)
}

/// `status` with the per-run number of each type name in its warnings replaced with `#`.
fn without_type_numbers(status: &Value) -> Value {
    let mut status = status.clone();
    let warnings = status.pointer_mut("/typeChecking/expressionWarnings");
    if let Some(warnings) = warnings.and_then(Value::as_array_mut) {
        for warning in warnings {
            if let Some(text) = warning["warning"].as_str() {
                warning["warning"] = Value::String(numbered_type_names(text));
            }
        }
    }
    status
}

/// `text` with `Kind123456789` (a type name the type checker made unique with a nanosecond
/// count) written `Kind#`.
fn numbered_type_names(text: &str) -> String {
    static TYPE_NAME: std::sync::LazyLock<regex::Regex> =
        std::sync::LazyLock::new(|| regex::Regex::new(r"\b([A-Z][A-Za-z]*)[0-9]+\b").unwrap());
    TYPE_NAME.replace_all(text, "${1}#").into_owned()
}

/// `observed.json`: each policy's `status.typeChecking` as the controller wrote it.
fn recorded_file(version: &str, statuses: &BTreeMap<String, Value>) -> String {
    let policies: serde_json::Map<String, Value> = statuses
        .iter()
        .map(|(name, status)| {
            let checking = json!({ "typeChecking": status["typeChecking"] });
            (name.clone(), checking)
        })
        .collect();
    let document = json!({
        "comment": "status.typeChecking of each policy in policies/, as kube-controller-manager's \
                    validatingadmissionpolicy-status-controller wrote it, except that the \
                    per-run number in type names (Pod795597975.spec) is written # (Pod#.spec); \
                    written by PORTCULLIS_E2E_WRITE_OBSERVED=1 cargo test --test \
                    type_checking_e2e (tests/type_checking_e2e.rs), not by hand",
        "kubernetes": version,
        "policies": policies,
    });
    serde_json::to_string_pretty(&document).unwrap() + "\n"
}

/// Each policy's warnings from its `status` (no `typeChecking` or no `expressionWarnings`:
/// none).
fn warnings_of(statuses: &BTreeMap<String, Value>) -> Warnings {
    statuses
        .iter()
        .map(|(name, status)| {
            let warnings = status["typeChecking"]["expressionWarnings"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|warning| ExpressionWarning {
                    field_ref: warning["fieldRef"].as_str().unwrap().to_owned(),
                    warning: warning["warning"].as_str().unwrap().to_owned(),
                })
                .collect();
            (name.clone(), warnings)
        })
        .collect()
}

/// Portcullis's warnings for the fixtures, with numbered type names written as the apiserver's
/// are (Portcullis may number them or not).
fn portcullis_warnings() -> Warnings {
    let engine = Engine::load(&[fixture(POLICIES)])
        .unwrap_or_else(|e| panic!("Portcullis refuses {POLICIES}: {e}"));
    let mut warnings = engine.type_checking();
    for warning in warnings.values_mut().flatten() {
        warning.warning = numbered_type_names(&warning.warning);
    }
    warnings
}

/// `None` when both sides agree on every policy; otherwise a report naming each differing
/// policy with both sides' warnings (exact text, as Rust string literals; `*` marks a warning
/// the other side does not have).
fn compare(from_apiserver: &Warnings, from_portcullis: &Warnings) -> Option<String> {
    let names: BTreeSet<&String> = from_apiserver
        .keys()
        .chain(from_portcullis.keys())
        .collect();
    let mut report = String::new();
    let mut differing = 0;
    for name in &names {
        let apiserver = from_apiserver.get(*name);
        let portcullis = from_portcullis.get(*name);
        if apiserver == portcullis {
            continue;
        }
        differing += 1;
        report += &format!("policy {name}:\n");
        for (side, warnings, other) in [
            ("kube-controller-manager", apiserver, portcullis),
            ("portcullis", portcullis, apiserver),
        ] {
            match warnings {
                None => report += &format!("  {side}: (no such policy)\n"),
                Some(warnings) if warnings.is_empty() => {
                    report += &format!("  {side}: no warnings\n");
                }
                Some(warnings) => {
                    report += &format!("  {side}:\n");
                    for warning in warnings {
                        let mark = match other {
                            Some(other) if other.contains(warning) => ' ',
                            _ => '*',
                        };
                        report +=
                            &format!("   {mark}{}: {:?}\n", warning.field_ref, warning.warning);
                    }
                }
            }
        }
    }
    (differing > 0).then(|| {
        format!(
            "type checking differs on {differing} of {} policies:\n{report}",
            names.len()
        )
    })
}

#[test]
fn numbered_type_names_are_written_with_a_hash() {
    assert_eq!(
        numbered_type_names(
            "applied to '(Pod333228332.spec.containers.@idx, string)' '(WidgetClass5, int)' \
             'map(string, string)' Kind=Pod: ERROR: <input>:1:8"
        ),
        "applied to '(Pod#.spec.containers.@idx, string)' '(WidgetClass#, int)' \
         'map(string, string)' Kind=Pod: ERROR: <input>:1:8"
    );
}
