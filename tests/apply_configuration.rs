//! `patchType: ApplyConfiguration` merges, from fixture files.
//!
//! Each `tests/fixtures/apply_configuration/*.yaml` holds an object, an apply configuration
//! (`partial`), the kind, and either the merged object or the exact error expected. Unless
//! noted in its description, what a fixture expects is what the apiserver's
//! `ApplyStructuredMergeDiff` (k8s.io/apiserver v0.37.2) answers for the same input.

use std::path::{Path, PathBuf};

use portcullis::admission::GroupVersionKind;
use portcullis::engine::admission_policy::apply_configuration::{
    ListKind, Shape, merge_apply_configuration, merge_server_side_apply, shape_at,
};
use serde::Deserialize;
use serde_json::Value;

/// One case.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Fixture {
    /// What the case shows.
    description: String,
    gvk: GroupVersionKind,
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

#[test]
fn fixtures_merge_as_expected() {
    let fixtures = fixtures();
    assert!(fixtures.len() >= 20, "only {} fixtures", fixtures.len());
    let mut failures = Vec::new();
    for (name, fixture) in &fixtures {
        let merge = if fixture.refuse_atomics {
            merge_apply_configuration
        } else {
            merge_server_side_apply
        };
        let got = merge(&fixture.object, &fixture.partial, &fixture.gvk);
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
        let once = merge_apply_configuration(&fixture.object, &fixture.partial, &fixture.gvk)
            .unwrap_or_else(|error| panic!("{name}: {error}"));
        let twice = merge_apply_configuration(&once, &fixture.partial, &fixture.gvk)
            .unwrap_or_else(|error| panic!("{name}: {error}"));
        assert_eq!(once, twice, "{name}");
    }
}

fn gvk(group: &str, kind: &str) -> GroupVersionKind {
    GroupVersionKind {
        group: group.to_owned(),
        version: "v1".to_owned(),
        kind: kind.to_owned(),
    }
}

fn keys(shape: &Shape) -> Vec<&'static str> {
    match shape {
        Shape::List {
            kind: ListKind::Map(keys),
            ..
        } => keys.iter().map(|key| key.field).collect(),
        other => panic!("not an associative list: {other:?}"),
    }
}

#[test]
fn table_finds_lists_by_path_from_the_kind_root() {
    let pod = gvk("", "Pod");
    let deployment = gvk("apps", "Deployment");
    let cron_job = gvk("batch", "CronJob");
    assert_eq!(keys(shape_at(&pod, "spec.containers")), ["name"]);
    assert_eq!(
        keys(shape_at(&deployment, "spec.template.spec.initContainers")),
        ["name"]
    );
    assert_eq!(
        keys(shape_at(
            &cron_job,
            "spec.jobTemplate.spec.template.spec.containers.env"
        )),
        ["name"]
    );
    assert_eq!(
        keys(shape_at(&pod, "spec.containers.ports")),
        ["containerPort", "protocol"]
    );
    assert_eq!(keys(shape_at(&pod, "spec.volumes")), ["name"]);
    assert_eq!(
        keys(shape_at(&pod, "spec.topologySpreadConstraints")),
        ["topologyKey", "whenUnsatisfiable"]
    );
    assert_eq!(
        keys(shape_at(&gvk("", "Service"), "spec.ports")),
        ["port", "protocol"]
    );
    assert_eq!(keys(shape_at(&pod, "metadata.ownerReferences")), ["uid"]);
    assert!(matches!(
        shape_at(&pod, "metadata.finalizers"),
        Shape::List {
            kind: ListKind::Set,
            ..
        }
    ));
    assert!(shape_at(&pod, "spec.tolerations").is_atomic());
    assert!(shape_at(&pod, "spec.readinessGates").is_atomic());
    assert!(shape_at(&pod, "spec.nodeSelector").is_atomic());
    assert!(shape_at(&deployment, "spec.selector").is_atomic());
    assert!(matches!(
        shape_at(&pod, "metadata.labels"),
        Shape::Map { atomic: false, .. }
    ));
    // Unknown kinds know their metadata; unknown paths are Unknown (atomic lists, granular
    // maps).
    let widget = gvk("example.com", "Widget");
    assert_eq!(keys(shape_at(&widget, "metadata.ownerReferences")), ["uid"]);
    assert_eq!(*shape_at(&widget, "spec.items"), Shape::Unknown);
    assert_eq!(
        *shape_at(&pod, "spec.containers.securityContext"),
        Shape::Unknown
    );
}
