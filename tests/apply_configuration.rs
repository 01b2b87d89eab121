//! `patchType: ApplyConfiguration` merges, from fixture files.
//!
//! Each `tests/fixtures/apply_configuration/*.yaml` holds an object, an apply configuration
//! (`partial`), the kind, and either the merged object or the exact error expected. Unless
//! noted in its description, what a fixture expects is what the apiserver's
//! `ApplyStructuredMergeDiff` (k8s.io/apiserver v0.37.2) answers for the same input.

use std::path::{Path, PathBuf};

use portcullis::admission::GroupVersionKind;
use portcullis::engine::admission_policy::apply_configuration::{
    merge_apply_configuration, merge_apply_configuration_with, merge_server_side_apply,
    merge_server_side_apply_with,
};
use portcullis::kubernetes::schema::crd::schemas_from_crd;
use serde::Deserialize;
use serde_json::Value;

/// One case.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Fixture {
    /// What the case shows.
    description: String,
    gvk: GroupVersionKind,
    /// The CustomResourceDefinition whose schema the kind has (else the built-in kind's, or
    /// none).
    #[serde(default)]
    crd: Option<Value>,
    /// `false` merges as plain server-side apply, without the refusal of atomic values.
    #[serde(default = "refuse_atomics")]
    refuse_atomics: bool,
    object: Value,
    partial: Value,
    /// The merged object.
    #[serde(default)]
    expected: Option<Value>,
    /// The exact error.
    #[serde(default)]
    error: Option<String>,
}

fn refuse_atomics() -> bool {
    true
}

fn fixture_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/apply_configuration")
}

fn fixtures() -> Vec<(String, Fixture)> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(fixture_dir())
        .expect("the fixture folder is readable")
        .map(|entry| entry.expect("a readable folder entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "yaml"))
        .collect();
    paths.sort();
    paths
        .into_iter()
        .map(|path| {
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            let text = std::fs::read_to_string(&path).expect("a readable fixture");
            let fixture: Fixture = serde_norway::from_str(&text)
                .unwrap_or_else(|error| panic!("{name} does not parse: {error}"));
            (name, fixture)
        })
        .collect()
}

/// Merges the fixture's apply configuration into `object` with the fixture's schema.
fn merge(fixture: &Fixture, object: &Value) -> Result<Value, String> {
    let Some(crd) = &fixture.crd else {
        return if fixture.refuse_atomics {
            merge_apply_configuration(object, &fixture.partial, &fixture.gvk)
        } else {
            merge_server_side_apply(object, &fixture.partial, &fixture.gvk)
        };
    };
    let schemas = schemas_from_crd(crd).map_err(|error| format!("bad CRD: {error}"))?;
    let schema = schemas
        .iter()
        .find(|schema| schema.gvk() == &fixture.gvk)
        .ok_or_else(|| "the CRD does not serve the fixture's kind".to_owned())?;
    if fixture.refuse_atomics {
        merge_apply_configuration_with(object, &fixture.partial, Some(schema))
    } else {
        merge_server_side_apply_with(object, &fixture.partial, Some(schema))
    }
}

#[test]
fn fixtures_merge_as_expected() {
    let fixtures = fixtures();
    assert!(fixtures.len() >= 20, "only {} fixtures", fixtures.len());
    let mut failures = Vec::new();
    for (name, fixture) in &fixtures {
        let got = merge(fixture, &fixture.object);
        let failure = match (&got, &fixture.expected, &fixture.error) {
            (Ok(merged), Some(expected), None) if merged == expected => None,
            (Err(error), None, Some(expected)) if error == expected => None,
            (_, Some(_), Some(_)) | (_, None, None) => {
                Some("needs exactly one of `expected` and `error`".to_owned())
            }
            (Ok(merged), _, _) => Some(format!(
                "merged to\n{}",
                serde_json::to_string_pretty(merged).unwrap()
            )),
            (Err(error), _, _) => Some(format!("failed with\n{error}")),
        };
        if let Some(failure) = failure {
            failures.push(format!("{name} ({}): {failure}", fixture.description));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// Merging the same apply configuration twice changes nothing the second time (what makes
/// `reinvocationPolicy: IfNeeded` settle).
#[test]
fn merging_again_changes_nothing() {
    for (name, fixture) in fixtures() {
        if fixture.expected.is_none() || !fixture.refuse_atomics {
            continue;
        }
        let once =
            merge(&fixture, &fixture.object).unwrap_or_else(|error| panic!("{name}: {error}"));
        let twice = merge(&fixture, &once).unwrap_or_else(|error| panic!("{name}: {error}"));
        assert_eq!(once, twice, "{name}");
    }
}

fn gvk(group: &str, version: &str, kind: &str) -> GroupVersionKind {
    GroupVersionKind {
        group: group.to_owned(),
        version: version.to_owned(),
        kind: kind.to_owned(),
    }
}

/// Kinds the old hand-written table did not know merge by their schema's list keys.
#[test]
fn kinds_beyond_the_old_table_merge_by_key() {
    let policy = serde_json::json!({
        "apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
        "metadata": {"name": "np"},
        "spec": {"podSelector": {}, "policyTypes": ["Ingress"],
                 "ingress": [{"ports": [{"port": 80}]}]}
    });
    // ingress and its ports are atomic in the schema: setting them is refused, as the
    // apiserver refuses it, each atomic value listed.
    let error = merge_apply_configuration(
        &policy,
        &serde_json::json!({"spec": {"ingress": [{"ports": [{"port": 443}]}]}}),
        &gvk("networking.k8s.io", "v1", "NetworkPolicy"),
    )
    .unwrap_err();
    assert_eq!(
        error,
        "invalid ApplyConfiguration: may not mutate atomic arrays, maps or structs: \
         .spec.ingress, .spec.ingress[0].ports"
    );
    let hpa = serde_json::json!({
        "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "h"},
        "spec": {"maxReplicas": 3, "scaleTargetRef": {"kind": "Deployment", "name": "d"}}
    });
    let merged = merge_apply_configuration(
        &hpa,
        &serde_json::json!({"spec": {"minReplicas": 2}}),
        &gvk("autoscaling", "v2", "HorizontalPodAutoscaler"),
    )
    .unwrap();
    assert_eq!(merged["spec"]["minReplicas"], 2);
    assert_eq!(merged["spec"]["maxReplicas"], 3);
}

/// A field the schema does not declare, and a scalar of the wrong type, are refused when the
/// apply configuration is converted to its typed form.
#[test]
fn undeclared_fields_and_wrong_scalars_are_refused() {
    let pod = serde_json::json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                                 "spec": {"containers": [{"name": "a", "image": "a"}]}});
    let error = merge_apply_configuration(
        &pod,
        &serde_json::json!({"spec": {"containers": [{"name": "a", "imageTypo": "b"}]}}),
        &gvk("", "v1", "Pod"),
    )
    .unwrap_err();
    assert_eq!(
        error,
        "failed to convert patch object to typed object: \
         .spec.containers[name=\"a\"].imageTypo: field not declared in schema"
    );
    let error = merge_apply_configuration(
        &pod,
        &serde_json::json!({"spec": {"priority": "high"}}),
        &gvk("", "v1", "Pod"),
    )
    .unwrap_err();
    assert_eq!(
        error,
        "failed to convert patch object to typed object: .spec.priority: expected numeric \
         (int or float), got string"
    );
}

/// A custom resource merges by the list keys of its CustomResourceDefinition's schema.
#[test]
fn custom_resources_merge_by_their_crd_schema() {
    let crd = serde_json::json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
                 "names": {"kind": "Widget", "plural": "widgets"},
                 "versions": [{"name": "v1", "served": true, "storage": true, "schema": {
                     "openAPIV3Schema": {"type": "object", "properties": {"spec": {
                         "type": "object", "properties": {
                             "parts": {"type": "array", "x-kubernetes-list-type": "map",
                                       "x-kubernetes-list-map-keys": ["name"],
                                       "items": {"type": "object", "properties": {
                                           "name": {"type": "string"},
                                           "size": {"type": "integer"}}}},
                             "selector": {"type": "object", "x-kubernetes-map-type": "atomic",
                                          "properties": {"app": {"type": "string"}}}}}}}}}]}
    });
    let schemas = schemas_from_crd(&crd).unwrap();
    let widget = serde_json::json!({
        "apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"},
        "spec": {"parts": [{"name": "p1", "size": 1}]}
    });
    let merged = merge_apply_configuration_with(
        &widget,
        &serde_json::json!({"spec": {"parts": [{"name": "p2", "size": 2}, {"name": "p1", "size": 3}]}}),
        Some(&schemas[0]),
    )
    .unwrap();
    assert_eq!(
        merged["spec"]["parts"],
        serde_json::json!([{"name": "p2", "size": 2}, {"name": "p1", "size": 3}])
    );
    let error = merge_apply_configuration_with(
        &widget,
        &serde_json::json!({"spec": {"selector": {"app": "a"}}}),
        Some(&schemas[0]),
    )
    .unwrap_err();
    assert_eq!(
        error,
        "invalid ApplyConfiguration: may not mutate atomic arrays, maps or structs: .spec.selector"
    );
    // Without its schema, the same list is deduced atomic and refused.
    assert!(
        merge_apply_configuration(
            &widget,
            &serde_json::json!({"spec": {"parts": [{"name": "p2"}]}}),
            &gvk("example.com", "v1", "Widget"),
        )
        .is_err()
    );
}
