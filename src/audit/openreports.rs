//! OpenReports documents (`openreports.io/v1alpha1`, github.com/openreports/reports-api
//! v0.2.1): one `Report` per namespaced resource, one `ClusterReport` per cluster-scoped
//! resource, with a result per finding.
//!
//! - a violation of a denying rule is a `fail` result (scored), naming its policy and rule;
//! - a warning is a `warn` result: its policy is read from the warning's text where the
//!   engine puts it (`[policy/rule] …` for Portcullis policies, `… ValidatingAdmissionPolicy
//!   'name' with binding 'binding' …`, `… PodSecurity …`), else `portcullis`;
//! - an audit annotation (the Audit action) is a `warn` result with property
//!   `action: Audit`.
//!
//! Reports are named after the resource's uid and owned by it (`ownerReferences`), so the
//! garbage collector removes a report with its resource; they carry the label
//! `app.kubernetes.io/managed-by: portcullis`.

use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Map, Value, json};

use crate::offline::CheckResult;

/// `apiVersion` of the reports.
pub const API_VERSION: &str = "openreports.io/v1alpha1";
/// The group of the reports.
pub const GROUP: &str = "openreports.io";
/// The value of `source` in reports and results.
pub const SOURCE: &str = "portcullis";
/// The label (and value) every report Portcullis writes carries.
pub const MANAGED_BY: (&str, &str) = ("app.kubernetes.io/managed-by", "portcullis");

/// Whether a scan result has anything to report.
pub fn has_findings(result: &CheckResult) -> bool {
    !result.violations.is_empty()
        || !result.warnings.is_empty()
        || !result.audit_annotations.is_empty()
}

/// The policy and rule a warning comes from, as far as its text says.
fn warning_origin(warning: &str) -> (String, Option<String>) {
    if let Some(rest) = warning.strip_prefix('[')
        && let Some((inside, _)) = rest.split_once("] ")
        && let Some((policy, rule)) = inside.split_once('/')
    {
        return (policy.to_owned(), Some(rule.to_owned()));
    }
    // A Gatekeeper constraint's: `[constraint] msg`.
    if let Some(rest) = warning.strip_prefix('[')
        && let Some((constraint, _)) = rest.split_once("] ")
        && !constraint.contains([' ', '/'])
    {
        return (constraint.to_owned(), None);
    }
    let quoted_after = |marker: &str| -> Option<String> {
        let start = warning.find(marker)? + marker.len();
        let end = warning[start..].find('\'')?;
        Some(warning[start..start + end].to_owned())
    };
    if let Some(policy) = quoted_after("ValidatingAdmissionPolicy '") {
        return (policy, quoted_after("with binding '"));
    }
    if warning.contains("PodSecurity ") {
        return ("pod-security".to_owned(), Some("warn".to_owned()));
    }
    (SOURCE.to_owned(), None)
}

fn result_entry(
    policy: &str,
    rule: Option<&str>,
    result: &str,
    message: &str,
    properties: Option<Map<String, Value>>,
    timestamp: &Value,
) -> Value {
    let mut entry = json!({
        "source": SOURCE,
        "policy": policy,
        "result": result,
        "scored": result == "fail",
        "message": message,
        "timestamp": timestamp,
    });
    if let Some(rule) = rule.filter(|r| !r.is_empty()) {
        entry["rule"] = json!(rule);
    }
    if let Some(properties) = properties.filter(|p| !p.is_empty()) {
        entry["properties"] = Value::Object(properties);
    }
    entry
}

/// The report for one scanned object, or `None` when the scan found nothing to report (or
/// the object has no uid to name the report after).
pub fn report(result: &CheckResult, now: SystemTime) -> Option<Value> {
    if !has_findings(result) {
        return None;
    }
    let uid = result.uid.as_str();
    let name = result.name.as_deref()?;
    let since_epoch = now.duration_since(UNIX_EPOCH).unwrap_or_default();
    let timestamp = json!({"seconds": since_epoch.as_secs(), "nanos": 0});
    let mut results = Vec::new();
    for violation in &result.violations {
        let mut properties = Map::new();
        if !violation.path.is_empty() {
            properties.insert("path".into(), json!(violation.path));
        }
        results.push(result_entry(
            &violation.policy,
            Some(&violation.rule),
            "fail",
            &violation.message,
            Some(properties),
            &timestamp,
        ));
    }
    for warning in &result.warnings {
        let (policy, rule) = warning_origin(warning);
        results.push(result_entry(
            &policy,
            rule.as_deref(),
            "warn",
            warning,
            Some(Map::from_iter([("action".into(), json!("Warn"))])),
            &timestamp,
        ));
    }
    for (key, value) in &result.audit_annotations {
        results.push(result_entry(
            key,
            None,
            "warn",
            value,
            Some(Map::from_iter([("action".into(), json!("Audit"))])),
            &timestamp,
        ));
    }
    let count = |wanted: &str| results.iter().filter(|r| r["result"] == wanted).count();
    let summary = json!({
        "pass": 0,
        "fail": count("fail"),
        "warn": count("warn"),
        "error": 0,
        "skip": 0,
    });
    let mut scope = json!({
        "apiVersion": result.api_version,
        "kind": result.kind,
        "name": name,
        "uid": uid,
    });
    let mut metadata = json!({
        "name": uid,
        "labels": {MANAGED_BY.0: MANAGED_BY.1},
        "ownerReferences": [{
            "apiVersion": result.api_version,
            "kind": result.kind,
            "name": name,
            "uid": uid,
        }],
    });
    let kind = match &result.namespace {
        Some(namespace) => {
            scope["namespace"] = json!(namespace);
            metadata["namespace"] = json!(namespace);
            "Report"
        }
        None => "ClusterReport",
    };
    Some(json!({
        "apiVersion": API_VERSION,
        "kind": kind,
        "metadata": metadata,
        "source": SOURCE,
        "scope": scope,
        "summary": summary,
        "results": results,
    }))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::time::Duration;

    use super::*;
    use crate::admission::Operation;
    use crate::engine::Violation;
    use crate::engine::ViolationForm;
    use crate::offline::Source;

    fn result(namespace: Option<&str>) -> CheckResult {
        CheckResult {
            source: Source {
                file: "api/v1/pods".into(),
                index: 0,
                item: None,
            },
            uid: "7f0c1d2e-0000-4000-8000-000000000001".into(),
            operation: Operation::Create,
            api_version: "v1".into(),
            kind: "Pod".into(),
            namespace: namespace.map(str::to_owned),
            name: Some("web".into()),
            webhooks: vec!["mutate", "validate"],
            allowed: false,
            violations: vec![Violation {
                policy: "pod-security".into(),
                rule: "enforce".into(),
                path: "spec.containers[0]".into(),
                message: "privileged".into(),
                form: ViolationForm::Rule,
            }],
            warnings: vec![
                "[builtin-image-tags/pinned] spec.containers[0].image: no tag".into(),
                "Validation failed for ValidatingAdmissionPolicy 'replicas' with binding \
                 'replicas-warn': too many"
                    .into(),
                "would violate PodSecurity \"restricted:latest\": runAsNonRoot".into(),
                "something else".into(),
            ],
            audit_annotations: BTreeMap::from([("team-labels".into(), "[r] x: y".into())]),
            patch: None,
            patched_object: None,
        }
    }

    #[test]
    fn a_namespaced_object_gets_a_report_owned_by_it() {
        let now = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let report = report(&result(Some("team")), now).unwrap();
        assert_eq!(report["kind"], "Report");
        assert_eq!(report["metadata"]["namespace"], "team");
        assert_eq!(
            report["metadata"]["name"],
            "7f0c1d2e-0000-4000-8000-000000000001"
        );
        assert_eq!(report["metadata"]["ownerReferences"][0]["kind"], "Pod");
        assert_eq!(report["scope"]["namespace"], "team");
        assert_eq!(
            report["summary"],
            json!({"pass": 0, "fail": 1, "warn": 5, "error": 0, "skip": 0})
        );
        let results = report["results"].as_array().unwrap();
        let origins: Vec<(&str, &str, &str)> = results
            .iter()
            .map(|r| {
                (
                    r["policy"].as_str().unwrap(),
                    r["rule"].as_str().unwrap_or(""),
                    r["result"].as_str().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            origins,
            [
                ("pod-security", "enforce", "fail"),
                ("builtin-image-tags", "pinned", "warn"),
                ("replicas", "replicas-warn", "warn"),
                ("pod-security", "warn", "warn"),
                ("portcullis", "", "warn"),
                ("team-labels", "", "warn"),
            ]
        );
        assert_eq!(results[0]["properties"]["path"], "spec.containers[0]");
        assert_eq!(results[0]["scored"], true);
        assert_eq!(results[5]["properties"]["action"], "Audit");
        assert_eq!(
            results[0]["timestamp"],
            json!({"seconds": 1_700_000_000u64, "nanos": 0})
        );
    }

    #[test]
    fn a_cluster_scoped_object_gets_a_cluster_report() {
        let report = report(&result(None), SystemTime::now()).unwrap();
        assert_eq!(report["kind"], "ClusterReport");
        assert!(report["metadata"].get("namespace").is_none());
        assert!(report["scope"].get("namespace").is_none());
    }

    #[test]
    fn nothing_to_report_gives_no_report() {
        let mut clean = result(Some("team"));
        clean.violations.clear();
        clean.warnings.clear();
        clean.audit_annotations.clear();
        clean.allowed = true;
        assert!(report(&clean, SystemTime::now()).is_none());
    }
}
